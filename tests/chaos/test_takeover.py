"""Takeover from upstream Kubeflow Trainer v2.3.0 and rollback, on one local control plane.

Upstream's controller (built by `make tools-upstream`, started by hack/harness/upstream_run.py) runs TrainJobs
into mixed states (running, suspended, Complete, Failed, MPI with SSH Secrets); it stops, our CRDs and operator
take over: no JobSet re-created or mutated, no Secret regenerated, terminal statuses kept, suspended ones resume.
Then the reverse: ours stops, upstream's CRDs and controller come back and keep working on the same objects.
Skipped when upstream's controller is not built. See docs/migration.md.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from chaos_support import Api, Figures, runtimes, scan_logs, secret_needles, size
from test_chaos import Replicas, converged, delete_all_and_count_orphans, wait

from operator_fixtures import Kube
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.plugins.jobset import rebuildable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
from harness import upstream_run  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.chaos, pytest.mark.timeout(size(600, 3600))]

EXIT_CODE = "trainjob-operator.test/exit-code"


def short_runtimes(namespace: str) -> list[dict[str, Any]]:
    """`done` completes in 1 s, `fails` fails in 1 s."""
    done, fails = runtimes(namespace, run_for="1s")[0], runtimes(namespace, run_for="1s")[0]
    done["metadata"]["name"], fails["metadata"]["name"] = "done", "fails"
    pod = fails["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"]["annotations"][EXIT_CODE] = "1"
    return [done, fails]


RUNNING = ("torch-0", "mpi-0")
SUSPENDED = ("torch-suspended", "mpi-suspended")


def mixed_jobs(namespace: str, count: int) -> list[dict[str, Any]]:
    kinds = ("torch", "torch-suspended", "done", "fails", "mpi", "mpi-suspended")
    jobs = []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        spec: dict[str, Any] = {"runtimeRef": {"name": kind.removesuffix("-suspended"), "kind": "TrainingRuntime"}}
        if kind.endswith("-suspended"):
            spec["suspend"] = True
        if kind.startswith("mpi"):
            spec["trainer"] = {"numNodes": 2}
        jobs.append(
            {
                "apiVersion": c.API_VERSION,
                "kind": "TrainJob",
                "metadata": {"name": f"{kind}-{index:04d}", "namespace": namespace},
                "spec": spec,
            }
        )
    return jobs


def condition(job: dict[str, Any], type_: str) -> bool:
    return any(
        cond.get("type") == type_ and cond.get("status") == "True"
        for cond in (job.get("status") or {}).get("conditions") or []
    )


def state(api: Api, namespace: str) -> dict[str, dict[str, Any]]:
    """What must survive a handover: JobSets (uid, generation, resourceVersion), Secrets (uid, data), terminal
    conditions."""
    snapshot: dict[str, dict[str, Any]] = {"jobsets": {}, "secrets": {}, "terminal": {}}
    snapshot["never_started"] = set()
    for js in api.list("jobset.x-k8s.io/v1alpha2", "JobSet", namespace):
        meta = js["metadata"]
        snapshot["jobsets"][meta["name"]] = (
            meta["uid"],
            meta.get("generation"),
            meta["resourceVersion"],
            bool((js.get("spec") or {}).get("suspend")),
        )
        if rebuildable(js):
            snapshot["never_started"].add(meta["name"])
    for secret in api.list("v1", "Secret", namespace):
        if secret["metadata"]["name"].endswith("-mpi-ssh-auth"):
            data = hashlib.sha256(json.dumps(secret.get("data"), sort_keys=True).encode()).hexdigest()
            snapshot["secrets"][secret["metadata"]["name"]] = (secret["metadata"]["uid"], data)
    for job in api.list(c.API_VERSION, "TrainJob", namespace):
        for type_ in ("Complete", "Failed"):
            if condition(job, type_):
                snapshot["terminal"][job["metadata"]["name"]] = type_
    return snapshot


def handover_counts(
    before: dict[str, dict[str, Any]],
    after: dict[str, dict[str, Any]],
    rebuildable_on_resume: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """`recreated`: JobSets deleted and created again, except the `rebuildable_on_resume` ones (suspended and never
    started before, resumed since: docs/migration.md), which are counted apart as `rebuilt_on_resume`."""
    running_before = {k: v for k, v in before["jobsets"].items() if not v[3]}
    replaced = {k for k, v in before["jobsets"].items() if k in after["jobsets"] and after["jobsets"][k][0] != v[0]}
    return {
        "recreated": len(replaced - rebuildable_on_resume),
        "rebuilt_on_resume": len(replaced & rebuildable_on_resume),
        "mutated": sum(
            1 for k, v in running_before.items() if k in after["jobsets"] and after["jobsets"][k][1] != v[1]
        ),
        "regenerated": sum(1 for k, v in before["secrets"].items() if after["secrets"].get(k) != v),
        "terminal_changed": sum(1 for k, v in before["terminal"].items() if after["terminal"].get(k) != v),
    }


def touched(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> int:
    """Running JobSets whose resourceVersion moved (status updates of the JobSet controller included)."""
    return sum(
        1 for k, v in before["jobsets"].items() if not v[3] and k in after["jobsets"] and after["jobsets"][k][2] != v[2]
    )


@pytest.mark.skipif(not upstream_run.available(), reason="upstream's controller is not built (make tools-upstream)")
def test_takeover_from_upstream_and_rollback(
    exclusive: None, kube: Kube, cluster: Any, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    count = size(12, 200)
    api = Api(kubeconfig)
    upstream = None
    replicas = Replicas(kubeconfig, tmp_path, 1)
    try:
        # 1. upstream's CRDs and controller run the TrainJobs into mixed states
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(upstream_run.crds_dir()))
        upstream = upstream_run.start(cluster, logs=tmp_path / "upstream")
        wait(lambda: upstream_run.ready(cluster, upstream), 120, "upstream's controller ready")
        assert not api.create_all([*runtimes(namespace), *short_runtimes(namespace)], concurrency=1)
        jobs = mixed_jobs(namespace, count)
        assert not api.create_all(jobs)
        names = {j["metadata"]["name"] for j in jobs}
        running = {n for n in names if n.startswith(RUNNING)}
        suspended = {n for n in names if n.startswith(SUSPENDED)}
        terminal = {n for n in names if n.startswith(("done", "fails"))}

        def upstream_settled() -> bool:
            done, _ = converged(api, namespace, running)
            by_name = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
            ended = {
                n for n in terminal if condition(by_name.get(n, {}), "Complete" if n.startswith("done") else "Failed")
            }
            return done == running and ended == terminal

        wait(upstream_settled, size(240, 900), "upstream running, completing and failing the TrainJobs", 2)
        before = state(api, namespace)
        upstream_run.stop(upstream)
        upstream_run.unregister_webhooks(cluster)

        # 2. ours takes over
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
        replicas.start_all()
        process = replicas.slots[0].process
        assert process is not None
        wait(
            lambda: process.metric("trainjob_operator_reconcile_duration_seconds_count") >= len(names),
            120,
            "every TrainJob reconciled once",
        )
        # the takeover itself (everything reconciled, nothing resumed yet): nothing re-created at all
        takeover = handover_counts(before, state(api, namespace))
        started = time.monotonic()
        api.patch_all("TrainJob", namespace, suspended, {"spec": {"suspend": False}})
        resumed, _ = converged(api, namespace, running | suspended)
        while resumed != running | suspended and time.monotonic() - started < size(120, 600):
            time.sleep(1)
            resumed, _ = converged(api, namespace, running | suspended)
        after_ours = state(api, namespace)
        # once resumed: upstream's suspended JobSets that never started may be rebuilt in our shape (they refuse
        # our pod template in place: the status server's env, v2.4's MPI env); nothing else may be re-created
        resume = handover_counts(before, after_ours, frozenset(before["never_started"] & suspended))
        by_name = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
        not_following = sum(1 for n in running if not (by_name[n].get("status") or {}).get("jobsStatus"))
        replicas.stop_all()
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):  # ours point at nothing now
            for name in ("validator.trainer.kubeflow.org", "defaulter.trainer.kubeflow.org"):
                kube.run("delete", kind, name, "--ignore-not-found")

        # 3. rollback: upstream's CRDs and controller again
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(upstream_run.crds_dir()))
        upstream = upstream_run.start(cluster, logs=tmp_path / "upstream-again")
        wait(lambda: upstream_run.ready(cluster, upstream), 120, "upstream's controller back")
        extra = mixed_jobs(namespace, 5)
        for job in extra:
            job["metadata"]["name"] = "after-" + job["metadata"]["name"]
        assert not api.create_all(extra)
        extra_running = {
            j["metadata"]["name"]
            for j in extra
            if j["metadata"]["name"].startswith(tuple(f"after-{p}" for p in RUNNING))
        }
        rolled, _ = converged(api, namespace, extra_running)
        deadline = time.monotonic() + size(120, 300)
        while rolled != extra_running and time.monotonic() < deadline:
            time.sleep(1)
            rolled, _ = converged(api, namespace, extra_running)
        rollback = handover_counts(after_ours, state(api, namespace))
        upstream_run.stop(upstream)
        upstream = None

        figures = Figures(
            "takeover",
            {
                "recreated": takeover["recreated"] + takeover["rebuilt_on_resume"] + resume["recreated"],
                "mutated": resume["mutated"],
                "regenerated": resume["regenerated"],
                "terminal_changed": resume["terminal_changed"],
                "not_resumed": len((running | suspended) - resumed),
                "not_following": not_following,
                "rollback_recreated": rollback["recreated"],
                "rollback_mutated": rollback["mutated"],
                "rollback_regenerated": rollback["regenerated"],
                "rollback_lost": len(extra_running - rolled),
            },
            {
                "trainjobs": float(len(names)),
                "running_touched": float(touched(before, after_ours)),
                "mpi_secrets": float(len(before["secrets"])),
                "rebuilt_on_resume": float(resume["rebuilt_on_resume"]),
                "suspended": float(len(suspended)),
            },
        )
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
        values = [str(v) for s in api.list("v1", "Secret", namespace) for v in (s.get("data") or {}).values()]
        figures.counts["orphans"] = delete_all_and_count_orphans(kube, api, namespace, size(120, 600))
        tracebacks, leaks = scan_logs(replicas.logs, secret_needles(values))
        figures.counts.update({"tracebacks": tracebacks, "leaks": leaks})
        figures.report()
    finally:
        if upstream is not None:
            upstream_run.stop(upstream)
        upstream_run.unregister_webhooks(cluster)
        replicas.stop_all()
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"), check=False)
        api.close()
