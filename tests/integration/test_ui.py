"""`trainjob-operator ui` in a real headless Chromium (Debian's `chromium` + `chromium-driver`, driven over the W3C
WebDriver protocol with the standard library) against the local control plane and the operator: the list across
namespaces, keyboard navigation to a TrainJob, its conditions, events, JobSet, pods, snapshot and a pod's log, live
progress without a reload, the metric chart, and no Secret data anywhere. Screenshots are kept as test artifacts
($TRAINJOB_TEST_ARTIFACTS/ui, default .test-artifacts/ui); the browser is tests/browser.py's."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from browser import ARTIFACTS, KEYS, Browser
from builders import torch_runtime, trainjob_object
from operator_fixtures import REPO, Kube, OperatorProcess, UIServer, eventually

pytestmark = pytest.mark.cluster

SECRET_VALUE = "hunter2-do-not-show"


def runtime(namespace: str) -> dict[str, Any]:
    return torch_runtime(
        namespace,
        num_nodes=2,
        pod_annotations={"trainjob-operator.test/run-for": "600s"},
        command=("torchrun",),
        env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
        backoff_limit=None,
    )


trainjob = trainjob_object


def report(kube: Kube, namespace: str, name: str, percent: int, loss: float, minutes_ago: int) -> None:
    """What the status server writes for a pod's update_trainjob_status() (tested in test_progress_server.py)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60 * minutes_ago))
    kube.run(
        "patch",
        "trainjob",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(
            {
                "status": {
                    "trainerStatus": {
                        "progressPercentage": percent,
                        "estimatedRemainingSeconds": 300 - 3 * percent,
                        "metrics": [
                            {"name": "loss", "value": str(loss)},
                            {"name": "accuracy", "value": str(round(1 - loss / 2, 3))},
                        ],
                        "lastUpdatedTime": stamp,
                    }
                }
            }
        ),
    )


def text(browser: Browser, selector: str) -> str:
    return str(browser.js("const n = document.querySelector(arguments[0]); return n ? n.innerText : '';", selector))


def test_the_ui_in_a_real_browser(
    kube: Kube, operator: OperatorProcess, namespace: str, browser: Browser, ui: UIServer
) -> None:
    kube.run("create", "secret", "generic", "creds", "-n", namespace, f"--from-literal=token={SECRET_VALUE}")
    kube.apply(
        runtime(namespace),
        trainjob(namespace, "llm-finetune", trainer={"numNodes": 2}),
        trainjob(namespace, "queued-eval", suspend=True),
    )
    eventually(
        lambda: len([p for p in kube.items("pods", namespace) if p["status"].get("phase") == "Running"]) >= 2,
        "two running pods",
        timeout=90,
    )
    report(kube, namespace, "llm-finetune", 10, 0.93, 10)

    browser.get(ui.login)
    eventually(lambda: "10%" in text(browser, f'tr[data-key="{namespace}/llm-finetune"]'), "the list row")
    eventually(lambda: "Suspended" in text(browser, f'tr[data-key="{namespace}/queued-eval"]'), "the suspended row")
    row = text(browser, f'tr[data-key="{namespace}/llm-finetune"]')
    assert "llm-finetune" in row and namespace in row and "Running" in row and "10%" in row, row
    assert "▶ Running" in row and "‖ Suspended" in text(browser, f'tr[data-key="{namespace}/queued-eval"]'), (
        "states carry a symbol and a word, not only a colour"
    )
    browser.js("window.__sameDocument = true;")
    report(kube, namespace, "llm-finetune", 25, 0.61, 5)
    eventually(lambda: "25%" in text(browser, f'tr[data-key="{namespace}/llm-finetune"]'), "a live list update")
    browser.screenshot("trainjobs-list")

    # Keyboard only: Tab to the TrainJob's link, Enter opens it.
    browser.js("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    for _ in range(40):
        browser.keys(KEYS["tab"])
        if browser.js("return document.activeElement.textContent") == "llm-finetune":
            break
    else:
        pytest.fail("the TrainJob link is not reachable with Tab")
    browser.keys(KEYS["enter"])
    eventually(lambda: browser.js("return location.hash") == f"#/{namespace}/llm-finetune", "the detail page")
    eventually(lambda: "node" in text(browser, "#pods") and "Running" in text(browser, "#pods"), "the pods")
    assert browser.js("return window.__sameDocument === true"), "navigation stayed in the page"
    eventually(lambda: "JobSet llm-finetune" in text(browser, "#jobset"), "the JobSet")
    eventually(
        lambda: "kind: TrainingRuntime" in browser.js("return document.getElementById('snapshot').textContent"),
        "the runtime snapshot",
    )
    assert "25%" in text(browser, "#progress") and "loss" in text(browser, "#progress")
    # The goodput timeline's segments have their widths (set through the CSSOM: the CSP drops style attributes).
    eventually(lambda: "Training" in text(browser, "#goodput"), "the goodput timeline")
    assert browser.js("return document.querySelector('#goodput .timeline .seg').offsetWidth") > 0

    # Live: a new report reaches the open page (watch → SSE), and the chart grows a point.
    report(kube, namespace, "llm-finetune", 40, 0.42, 0)
    eventually(lambda: "40%" in text(browser, "#progress"), "a live progress update")
    eventually(
        lambda: browser.js("return document.querySelectorAll('#chart figure').length") == 3,
        "charts for progress, loss and accuracy",
    )
    assert browser.js("return document.querySelectorAll('#chart figure svg circle').length") >= 9
    assert browser.js("return window.__sameDocument === true"), "no reload"

    # A pod's log, chosen with the keyboard: focus the first pod's Log button and press Enter.
    browser.js("document.querySelector('#pods button[data-pod]').focus()")
    browser.keys(KEYS["enter"])
    eventually(
        lambda: "fake container started" in browser.js("return document.getElementById('log').textContent"),
        "the pod's log tail",
    )
    eventually(lambda: "Events" in text(browser, "#events-title"), "the events section")
    browser.screenshot("trainjob-detail", height=2600)

    # Conditions and events: suspend → the Suspended condition and the JobSet's events appear live.
    kube.patch("trainjob", "llm-finetune", namespace, {"spec": {"suspend": True}})
    eventually(lambda: "Suspended" in text(browser, "#conditions"), "the Suspended condition, live", timeout=60)
    eventually(
        lambda: "JobSet/llm-finetune" in text(browser, "#events") or "Pod/" in text(browser, "#events"),
        "events of the JobSet or its pods",
        timeout=60,
    )

    page = str(browser.js("return document.documentElement.outerHTML"))
    assert SECRET_VALUE not in page and base64.b64encode(SECRET_VALUE.encode()).decode() not in page
    with ui.open(f"api/trainjobs/{namespace}/llm-finetune") as answer:
        detail = json.loads(answer.read())
    assert SECRET_VALUE not in json.dumps(detail)
    assert "managedFields" not in json.dumps(detail["trainjob"])
    assert (ARTIFACTS / "trainjobs-list.png").stat().st_size > 10000


HOLD_THE_LIST = """
const realFetch = window.fetch.bind(window);
let release;
const gate = new Promise((resolve) => { release = resolve; });
window.__releaseList = () => release();
window.fetch = (url, ...rest) =>
  String(url) === "/api/trainjobs" ? gate.then(() => realFetch(url, ...rest)) : realFetch(url, ...rest);
"""


def cells(browser: Browser, selector: str) -> list[list[str]]:
    return list(
        browser.js(
            "return [...document.querySelectorAll(arguments[0])].map((tr) => [...tr.cells].map((td) => td.innerText));",
            selector,
        )
    )


def visible(browser: Browser, element_id: str) -> bool:
    return bool(
        browser.js("const n = document.getElementById(arguments[0]); return !!n && !n.closest('[hidden]');", element_id)
    )


def test_the_ui_tells_the_truth_in_a_real_browser(
    kube: Kube, operator: OperatorProcess, namespace: str, browser: Browser, ui: UIServer
) -> None:
    """Issue 27, one browser check per glitch: a loading state before the first listing; no "null" under Progress;
    pods counted per replicated job; a TrainJob that does not exist shows nothing of the one before; a failed
    TrainJob says its JobSet was deleted and keeps its gone pods' FailedScheduling Warnings; the reason beside the
    state."""
    stuck_runtime = torch_runtime(namespace, "nowhere", pod_annotations={"trainjob-operator.test/run-for": "600s"})
    pod_spec = stuck_runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {"trainjob-operator.test/none": "x"}
    stuck_runtime["spec"]["runPolicy"] = {"startupDeadlineSeconds": 5}
    kube.apply(
        runtime(namespace),
        stuck_runtime,
        trainjob(namespace, "two-nodes", trainer={"numNodes": 2}),
        trainjob(namespace, "stuck", "nowhere"),
    )

    # Before the first listing arrives the list says it is loading, not that there are no TrainJobs.
    browser.cmd(
        "POST",
        "/goog/cdp/execute",
        {"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": HOLD_THE_LIST}},
    )
    browser.get(ui.login)
    eventually(lambda: visible(browser, "loading"), "the loading state")
    assert "Loading TrainJobs" in text(browser, "#loading") and not visible(browser, "empty")
    browser.screenshot("trainjobs-loading")
    browser.js("window.__releaseList()")
    # The live stream may show a row before the held listing lands: the loading state ends with the listing itself.
    eventually(
        lambda: (
            "two-nodes" in text(browser, f'tr[data-key="{namespace}/two-nodes"]') and not visible(browser, "loading")
        ),
        "the list after loading",
    )
    assert not visible(browser, "empty")

    # No progress reported: "not reported", never "null"; the pods of the one `node` Job counted as pods.
    eventually(
        lambda: len([p for p in kube.items("pods", namespace) if p["status"].get("phase") == "Running"]) >= 2,
        "two running pods",
        timeout=90,
    )
    browser.get(f"{ui.url}#/{namespace}/two-nodes")
    eventually(lambda: "not reported" in text(browser, "#progress"), "the progress section")
    assert "null" not in text(browser, "#progress")
    eventually(
        lambda: cells(browser, "#jobset tbody tr") == [["node", "2", "2", "2", "0", "0", "0", "1 / 0 / 0"]],
        "one Job of two pods: 2 pods running and ready, 1 Job active",
        timeout=60,
    )
    assert "Pods" in text(browser, "#jobset thead") and "Jobs active" in text(browser, "#jobset thead")

    # A TrainJob that does not exist: the banner, and nothing of the TrainJob shown before.
    browser.js(f"location.hash = '#/{namespace}/no-such-trainjob'")
    eventually(lambda: "not found" in text(browser, "#problem"), "the not-found banner")
    assert not visible(browser, "summary") and not visible(browser, "pods")
    assert "two-nodes" not in text(browser, "#detail-view")
    browser.screenshot("trainjob-not-found")

    # A TrainJob failed by its startup deadline: no JobSet any more, said so; its pods' FailedScheduling Warnings
    # stay, with the operator's own Warning naming the pod.
    eventually(
        lambda: (kube.get("trainjob", "stuck", namespace) or {}).get("status", {}).get("state") == "Failed",
        "stuck fails",
        timeout=90,
    )
    eventually(lambda: kube.get("jobset", "stuck", namespace) is None, "its JobSet deleted", timeout=60)
    browser.js(f"location.hash = '#/{namespace}/stuck'")
    eventually(
        lambda: "its JobSet was deleted" in text(browser, "#jobset"), "the note where the JobSet was", timeout=30
    )
    assert "No JobSet (yet)" not in text(browser, "#jobset")
    eventually(
        lambda: "FailedScheduling" in text(browser, "#events"), "the gone pods' FailedScheduling Warnings", timeout=30
    )
    assert "PodUnschedulable" in text(browser, "#events") and "⚠ Warning" in text(browser, "#events")
    assert "✖ Failed" in text(browser, "#detail-title")
    browser.screenshot("trainjob-failed", height=1800)

    # The reason beside the state in the list (a pod that cannot be scheduled, before any deadline).
    kube.apply(trainjob(namespace, "waiting", "nowhere", startupDeadlineSeconds=3600))
    browser.js("location.hash = '#/'")
    eventually(
        lambda: "Pending · Unschedulable" in text(browser, f'tr[data-key="{namespace}/waiting"]'),
        "the reason beside the state",
        timeout=60,
    )


def test_the_ui_is_read_only_and_loopback_only(ui: UIServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        ui.open("api/trainjobs", data=b"{}", method="POST")
    assert refused.value.code == 405
    with pytest.raises(urllib.error.HTTPError) as foreign:
        ui.open("api/trainjobs", headers={"Host": "evil.example:80"})
    assert foreign.value.code == 403, "a page of another origin resolving to 127.0.0.1 reads nothing"
    started = time.monotonic()
    with ui.open("") as page:
        assert page.headers["Content-Security-Policy"] == "default-src 'self'; style-src 'self'"
    assert time.monotonic() - started < 10


# --- a UI that serves only its user (issue 33), one browser check each ---------------------------------------------------

CRAFTED = "x%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fapi%2Fv1%2Fnamespaces%2F{namespace}%2Fsecrets%2Fcreds"


def body_text(browser: Browser) -> str:
    return str(browser.js("return document.body ? document.body.innerText : '';"))


def test_the_ui_wants_its_token_and_keeps_it_in_an_httponly_cookie(browser: Browser, ui: UIServer) -> None:
    browser.get(ui.url)
    eventually(lambda: "token" in body_text(browser), "the 401")
    assert "open the URL `trainjob-operator ui` printed" in body_text(browser)
    browser.get(f"{ui.url}api/trainjobs")
    assert "rows" not in body_text(browser), "nothing is read without the token"

    browser.get(ui.login)
    eventually(lambda: browser.js("return location.href") == ui.url, "the token dropped from the address bar")
    eventually(lambda: visible(browser, "list-view") and "TrainJobs" in body_text(browser), "the list page")
    assert browser.js("return document.cookie") == "", "HttpOnly: the page's scripts cannot read the session"
    cookies = browser.cmd("GET", "/cookie")
    assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [("trainjob-ui", True, "Strict")]
    assert all(ui.token not in c["value"] for c in cookies)
    browser.get(f"{ui.url}api/trainjobs")
    assert json.loads(body_text(browser))["rows"] is not None, "the cookie opens the API"


def test_a_crafted_route_reads_no_secret_in_a_real_browser(
    kube: Kube, namespace: str, browser: Browser, ui: UIServer
) -> None:
    kube.run("create", "secret", "generic", "creds", "-n", namespace, f"--from-literal=token={SECRET_VALUE}")
    browser.get(ui.login)
    for route in (
        f"api/trainjobs/{namespace}/{CRAFTED.format(namespace=namespace)}",
        f"api/pods/{namespace}/{CRAFTED.format(namespace=namespace)}/log",
        f"api/pods/{namespace}/p/log?container=..%2F..%2Fsecrets%2Fcreds",
        f"api/trainjobs/{namespace}/Bad_Name",
    ):
        browser.get(ui.url + route)
        shown = body_text(browser)
        assert SECRET_VALUE not in shown and base64.b64encode(SECRET_VALUE.encode()).decode() not in shown, route
        assert "is not a" in shown or "Not Found" in shown or "404" in shown, (route, shown)
    browser.get(f"{ui.url}api/trainjobs/{namespace}/Bad_Name")
    assert json.loads(body_text(browser))["message"].startswith("name: 'Bad_Name' is not a TrainJob name")


def test_another_site_cannot_use_the_ui_in_a_real_browser(browser: Browser, ui: UIServer) -> None:
    """A page of another origin (here `localhost`, another site than `127.0.0.1` for the browser) fetches the UI or
    navigates to it: the strict cookie is not sent, and the UI refuses the cross-site request before it looks."""
    browser.get(ui.login)  # the user is logged in: the cookie exists
    eventually(lambda: browser.js("return location.href") == ui.url, "logged in")
    other = ui.url.replace("127.0.0.1", "localhost")
    browser.get(other)  # another origin: no cookie of its own
    assert "token" in body_text(browser)
    outcome = browser.cmd(
        "POST",
        "/execute/async",
        {
            "script": """
const done = arguments[arguments.length - 1];
fetch(arguments[0], {credentials: "include"}).then((r) => done("status " + r.status), (e) => done("blocked " + e));
""",
            "args": [f"{ui.url}api/trainjobs"],
        },
    )
    assert "status 200" not in outcome, "no cross-origin read"
    browser.js("location.href = arguments[0];", f"{ui.url}api/trainjobs")
    eventually(lambda: browser.js("return location.href") == f"{ui.url}api/trainjobs", "the cross-site navigation")
    eventually(lambda: body_text(browser) != "", "its answer")
    answer = json.loads(body_text(browser))
    assert "rows" not in answer and "cross-site request" in answer["message"], answer


def test_a_non_loopback_address_is_refused_without_allow_remote(kubeconfig: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.cli", "ui", "--kubeconfig", kubeconfig, "--address", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert ran.returncode == 2
    assert "--address 0.0.0.0 is not a loopback address" in ran.stderr and "--allow-remote" in ran.stderr
