"""The web UI over a TrainJob that ran for real (issue 38): a trainer pod on a real node trains three "epochs", logs
each and reports its progress with the unmodified kubeflow SDK (`update_trainjob_status()`, as in
test_progress_from_a_pod.py); headless Chromium shows the list with the progress the pod reported, and the TrainJob's
page with that pod's real log from containerd. The screenshots are kept in $TRAINJOB_TEST_ARTIFACTS/ui-realnode
(default .test-artifacts/ui-realnode); docs/images/ui-list.png and ui-detail.png are copies of them."""

from __future__ import annotations

import pytest
from real_runtimes import finished, real_node_runtime, real_trainjob

from browser import ARTIFACTS_ROOT, Browser
from harness import realnodes
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

FOLDER = ARTIFACTS_ROOT / "ui-realnode"

#: A training script's shape: log each epoch, report progress and metrics after it through the SDK.
TRAIN = """
import sys, time
from kubeflow.trainer import update_trainjob_status
losses = [0.92, 0.57, 0.31]
for epoch, loss in enumerate(losses, start=1):
    time.sleep(1)
    print(f"epoch {epoch}/{len(losses)} loss={loss} accuracy={1 - loss / 2:.3f}", flush=True)
    ok = update_trainjob_status(progress_percent=round(100 * epoch / len(losses)),
                                estimated_remaining_seconds=len(losses) - epoch,
                                metrics={"loss": loss, "accuracy": f"{1 - loss / 2:.3f}"})
    print(f"update_trainjob_status returned {ok}", flush=True)
    if not ok:
        sys.exit(1)
print("training done", flush=True)
"""


def text(browser: Browser, selector: str) -> str:
    return str(browser.js("const n = document.querySelector(arguments[0]); return n ? n.innerText : '';", selector))


def test_the_ui_shows_a_real_pods_progress_and_log(
    kube: Kube, operator: OperatorProcess, namespace: str, ui: str, browser: Browser
) -> None:
    image = realnodes.load_image(kube.cluster, "sdk")
    kube.create(real_node_runtime(image, "sdk-real"), namespace)
    kube.create(real_trainjob("llm-finetune", "sdk-real", numNodes=1, command=["python3", "-c", TRAIN]), namespace)
    job = finished(kube, "llm-finetune", namespace, timeout=240)
    assert condition(job, "Complete"), (job.get("status"), operator.log())

    browser.get(ui)
    row = f'tr[data-key="{namespace}/llm-finetune"]'
    eventually(lambda: "100%" in text(browser, row) and "Complete" in text(browser, row), "the list row", timeout=60)
    browser.screenshot("trainjobs-list", folder=FOLDER)

    browser.get(f"{ui}#/{namespace}/llm-finetune")
    eventually(lambda: "real-node-" in text(browser, "#pods"), "the pod on a real node")
    eventually(lambda: "loss" in text(browser, "#progress"), "the progress the pod reported")
    browser.js("document.querySelector('#pods button[data-pod]').click()")
    eventually(
        lambda: "epoch 3/3" in browser.js("return document.getElementById('log').textContent"),
        "the pod's real log",
    )
    browser.screenshot("trainjob-detail", height=2200, folder=FOLDER)
    assert (FOLDER / "trainjob-detail.png").stat().st_size > 10000
