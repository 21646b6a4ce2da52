"""Upstream Kubeflow Trainer v2.3.0's controller in the sequence of issue 28 (recorded in docs/compatibility.md,
D27): a torch TrainJob completes, is deleted and applied again under its name with another image while the garbage
collector is held back (SIGSTOP of this cluster's kube-controller-manager), then the collector runs. The test prints
what upstream did and asserts it is what the documentation says; ours is held to the opposite in
tests/integration/test_identity_cluster.py. Skipped without `make tools-upstream`. Runs upstream's CRDs on this
cluster for its duration (our CRDs are applied back afterwards), like tests/e2e/test_differential.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builders import torch_runtime, trainjob_object
from cluster_fixtures import garbage_collector_held, wait_for
from operator_fixtures import Kube, condition

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
from harness import upstream_run  # noqa: E402

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not upstream_run.available(), reason="upstream's controller is not built (make tools-upstream)"),
]


def owner_uid(obj: dict[str, Any] | None) -> str | None:
    owners = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((o.get("uid") for o in owners if o.get("controller")), None)


def node_image(jobset: dict[str, Any] | None) -> str | None:
    for rjob in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        for ctr in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if ctr["name"] == "node":
                return str(ctr.get("image"))
    return None


def test_upstream_v230_in_the_recreate_sequence(
    kube: Kube, cluster: Any, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("upstream-identity")
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(upstream_run.crds_dir()))
    for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        # Upstream's manager exits at start-up when a kind is not served yet ("no matches for kind"): a CRD replaced
        # under load is established and served again only after a moment (seen in `make test`, session 2).
        wait_for(
            lambda plural=plural: (
                kube.run(
                    "wait", "--for=condition=Established", f"crd/{plural}.trainer.kubeflow.org", check=False
                ).returncode
                == 0
                and kube.run("get", f"{plural}.trainer.kubeflow.org", "-A", check=False).returncode == 0
            ),
            timeout=60,
            what=f"upstream's {plural} CRD served",
        )
    upstream = upstream_run.start(kube.cluster, logs=tmp)
    try:
        wait_for(lambda: upstream_run.ready(kube.cluster, upstream), timeout=90, what="upstream controller ready")

        def train(image: str) -> dict[str, Any]:
            return trainjob_object(namespace, "again", "torch", trainer={"image": image, "numNodes": 2})

        kube.apply(torch_runtime(namespace))
        # Kueue's TrainJob webhook answers "unsupported runtime: TrainingRuntime.trainer.kubeflow.org" for a moment
        # after the Trainer CRDs were replaced above (it notices CRDs by polling; e2e_support.default_runtimes waits
        # the same way): wait until every webhook admits the TrainJob (seen with `make test`'s lanes, 2026-11-25).
        wait_for(
            lambda: kube.apply(train("user/train:v2"), check=False).returncode == 0,
            timeout=150,
            what="the TrainJob admitted by every webhook",
        )
        wait_for(lambda: condition(kube.get("trainjob", "again", namespace), "Complete"), timeout=120, what="v2")
        old_uid = (kube.get("trainjob", "again", namespace) or {})["metadata"]["uid"]
        with garbage_collector_held(cluster):
            kube.run("delete", "trainjob", "again", "-n", namespace, "--wait=true")
            kube.apply(train("user/train:v3"))
            new = kube.get("trainjob", "again", namespace) or {}
            new_uid = new["metadata"]["uid"]
            held = wait_for(
                lambda: condition(kube.get("trainjob", "again", namespace), "Complete"),
                timeout=30,
                what="upstream's verdict on the new TrainJob",
            )
            jobset = kube.get("jobset", "again", namespace)
            during = {
                "new TrainJob Complete": held is not None,
                "JobSet owner": "predecessor" if owner_uid(jobset) == old_uid else owner_uid(jobset),
                "JobSet image": node_image(jobset),
            }
        wait_for(
            lambda: owner_uid(kube.get("jobset", "again", namespace)) != old_uid,
            timeout=120,
            what="the collector removing the predecessor's JobSet",
        )
        deadline = time.monotonic() + 20  # 20 s for upstream to build anew (it does not: the state is terminal)
        after = None
        while time.monotonic() < deadline and after is None:
            after = kube.get("jobset", "again", namespace)
            time.sleep(0.5)
        final = kube.get("trainjob", "again", namespace) or {}
        outcome = {
            **during,
            "JobSet of its own after the collector ran": owner_uid(after) == new_uid,
            "still Complete": condition(final, "Complete") is not None,
        }
        print(f"\nupstream v2.3.0, recreated under its name with the collector held: {outcome}")
        assert outcome == {
            "new TrainJob Complete": True,
            "JobSet owner": "predecessor",
            "JobSet image": "user/train:v2",
            "JobSet of its own after the collector ran": False,
            "still Complete": True,
        }
    finally:
        upstream_run.stop(upstream)
        kube.run("delete", "namespace", namespace, "--wait=true", "--timeout=120s", check=False)
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"), check=False)
