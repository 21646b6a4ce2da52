"""The admin's path past the install, for real (issue 23): `helm upgrade` rolls both operator pods while runtimes are
applied without pause and no apply is refused (upstream's certificate race refuses them: its cert-controller
regenerates the webhook certificate on a restart while the API server still holds the old CA), the webhook keeps
answering through the Service; `helm uninstall` keeps the CRDs, the TrainJobs and their status; a reinstall picks
them up: a TrainJob created while no operator ran is run, a finished one is left as it was.

Like test_chart_install.py, it runs before the tests that start the operator as a local process (file order) and
removes what the chart's operator published when done."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from real_runtimes import busybox_runtime, shell_trainjob
from test_chart_install import WEBHOOK_CONFIGURATIONS, _helm

from harness import cluster as cluster_lib
from harness import images, realnodes
from operator_fixtures import Kube, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

REPO = Path(__file__).resolve().parents[2]
CHART = str(REPO / "charts" / "trainjob-operator")
RELEASE, NAMESPACE, JOBS = "tjo-life", "tjo-life", "tjo-life-jobs"
CRDS = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
#: How many applies the applier makes once `helm upgrade --wait` returned (about 10-20 s here): meanwhile the new
#: leader takes over and re-applies the webhook configurations.
APPLIES_AFTER = 15


def _install(cluster: cluster_lib.ClusterInfo, image: str, *extra: str) -> None:
    repository, tag = image.rsplit(":", 1)
    done = _helm(
        cluster,
        "install",
        RELEASE,
        CHART,
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--take-ownership",
        "--set-json",
        f"image={json.dumps({'repository': repository, 'tag': tag, 'pullPolicy': 'Never'})}",
        "--set",
        "replicas=2",
        "--set-json",
        f"nodeSelector={json.dumps(realnodes.REAL_NODE_SELECTOR)}",
        "--set-json",
        f"tolerations={json.dumps([realnodes.REAL_NODE_TOLERATION])}",
        *extra,
        "--wait",
        "--timeout",
        "240s",
    )
    assert done.returncode == 0, done.stderr


def _denied_by_the_webhook(kube: Kube) -> tuple[bool, str]:
    """A TrainJob of a missing runtime, dry-run: the webhook must answer (deny it); anything else is a refusal of
    the admission path (no endpoint, a certificate the API server does not trust)."""
    bad = shell_trainjob("probe", "nope", "true")
    bad["metadata"]["namespace"] = JOBS
    bad["spec"]["runtimeRef"] = {"name": "nope"}
    result = kube.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(bad), check=False)
    return "denied the request" in result.stderr and "failed calling webhook" not in result.stderr, result.stderr


class Applier(threading.Thread):
    """Applies the runtime `churn` (a new annotation each time, so every apply is an UPDATE the runtime webhook
    validates) and probes the TrainJob webhook, until stopped; keeps every refusal."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(daemon=True)
        self.kube, self.stop = kube, threading.Event()
        self.applied, self.probed = 0, 0
        self.refusals: list[str] = []

    def run(self) -> None:
        runtime = busybox_runtime("churn")
        while not self.stop.is_set():
            runtime["metadata"]["annotations"] = {"test.io/generation": str(self.applied)}
            done = self.kube.run(
                "apply", "--server-side", "--field-manager", "churn", "-n", JOBS, "-f", "-",
                stdin=json.dumps(runtime), check=False,
            )  # fmt: skip
            if done.returncode != 0:
                self.refusals.append(f"{_now()} apply {self.applied}: {done.stderr.strip()}")
            self.applied += 1
            answered, stderr = _denied_by_the_webhook(self.kube)
            if not answered:
                self.refusals.append(f"{_now()} probe {self.probed}: {stderr.strip()}")
            self.probed += 1


def _now() -> str:
    """The wall-clock time of a refusal, to read beside the operator pods' logs."""
    return time.strftime("%H:%M:%S", time.gmtime())


def _operator_pods(kube: Kube) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in kube.items("pods", NAMESPACE)
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == RELEASE
        and not p["metadata"].get("deletionTimestamp")
    )


def test_helm_upgrade_under_applies_refuses_none_and_uninstall_keeps_trainjobs_for_a_reinstall(
    cluster: cluster_lib.ClusterInfo, kube: Kube, installed: None
) -> None:
    meta = images.build_operator(REPO)
    image = realnodes.load_image_archive(cluster, meta["ref"], Path(meta["archive"]))
    kube.run("create", "namespace", JOBS, check=False)
    try:
        _install(cluster, image)
        eventually(lambda: _denied_by_the_webhook(kube)[0], "the webhook answering through the Service", 90)
        kube.create(busybox_runtime("quick"), JOBS)
        kube.create(shell_trainjob("before", "quick", "echo done"), JOBS)
        eventually(lambda: condition(kube.get("trainjob", "before", JOBS), "Complete"), "before Complete", 120)

        # helm upgrade with a changed config: the pods' config checksum changes, both replicas are replaced.
        old_pods = _operator_pods(kube)
        applier = Applier(kube)
        applier.start()
        try:
            eventually(lambda: applier.applied >= 3, "the applier going", timeout=60)
            started = time.monotonic()
            upgraded = _helm(
                cluster, "upgrade", RELEASE, CHART, "--namespace", NAMESPACE, "--reuse-values",
                "--set", "config.log_level=DEBUG", "--wait", "--timeout", "240s",
            )  # fmt: skip
            upgrade_s = time.monotonic() - started
            during = applier.applied
            eventually(lambda: applier.applied >= during + APPLIES_AFTER, "applies after the upgrade", timeout=120)
        finally:
            applier.stop.set()
            applier.join(timeout=60)
        assert upgraded.returncode == 0, upgraded.stderr
        new_pods = _operator_pods(kube)
        assert len(new_pods) == 2 and not set(new_pods) & set(old_pods), (old_pods, new_pods)
        assert applier.refusals == [], applier.refusals
        assert during >= 5, f"only {during} applies during the upgrade: it did not overlap"
        print(
            f"helm upgrade: {upgrade_s:.1f}s, {applier.applied} applies and {applier.probed} webhook probes, "
            f"{during} of the applies before it returned, 0 refused"
        )

        # helm uninstall keeps the CRDs (helm.sh/resource-policy: keep), the TrainJobs and their status.
        before = kube.get("trainjob", "before", JOBS) or {}
        jobset_uid = (kube.get("jobset", "before", JOBS) or {})["metadata"]["uid"]
        done = _helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "120s")
        assert done.returncode == 0, done.stderr
        eventually(lambda: _operator_pods(kube) == [], "the operator pods gone", timeout=120)
        for crd in CRDS:
            assert kube.get("crd", f"{crd}.trainer.kubeflow.org") is not None, crd
        kept = kube.get("trainjob", "before", JOBS) or {}
        assert kept["metadata"]["uid"] == before["metadata"]["uid"]
        assert kept["status"] == before["status"]
        # As values.yaml tells the admin: the operator's webhook configurations outlive the release.
        for kind, name in WEBHOOK_CONFIGURATIONS:
            kube.delete(kind, name)

        # A TrainJob created while no operator runs waits for one.
        kube.create(shell_trainjob("while-away", "quick", "echo done"), JOBS)
        _install(cluster, image)
        eventually(lambda: condition(kube.get("trainjob", "while-away", JOBS), "Complete"), "while-away Complete", 120)
        after = kube.get("trainjob", "before", JOBS) or {}
        assert after["status"] == before["status"]
        assert (kube.get("jobset", "before", JOBS) or {})["metadata"]["uid"] == jobset_uid
    finally:
        _helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "120s")
        for kind, name in WEBHOOK_CONFIGURATIONS:
            kube.delete(kind, name)
        kube.run("delete", "namespace", NAMESPACE, JOBS, "--ignore-not-found", "--wait=false", check=False)
        eventually(lambda: kube.get("namespace", NAMESPACE) is None, f"namespace {NAMESPACE} deleted", timeout=120)
