"""Kueue's MultiKueue across local control planes (hack/harness/multikueue.py): TrainJobs submitted to the
manager with kubectl and with the unmodified kubeflow SDK are dispatched by Kueue to worker1, run there under our
operator (kwok pods), and their status comes back to the manager, where our operator creates nothing and writes no
status (Kueue owns it: `spec.managedBy: kueue.x-k8s.io/multikueue`); worker2 runs upstream v2.3.0's controller
(mixed fleet). What the manager shows is in docs/multikueue.md.

Runs with `make test-multikueue` (TRAINJOB_OPERATOR_MULTIKUEUE=1): three more control planes, so not in the
single-cluster e2e session. The last test kills worker1's API server; the fleet is torn down after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import COMPLETE, QUEUE_LABEL, RUN_FOR, RUNTIMES_DIR, kwok_patch, trainjob

from harness import cluster as cluster_lib
from harness import multikueue
from operator_fixtures import OPERATOR_NAMESPACE, REPO, Kube, OperatorProcess, condition, eventually

sys.path.insert(0, str(REPO / "hack"))
from harness import upstream_run

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.cluster,
    pytest.mark.multikueue,
    pytest.mark.timeout(600),  # the first test also starts three control planes (about 4 min at load 16)
    pytest.mark.skipif(
        os.environ.get("TRAINJOB_OPERATOR_MULTIKUEUE", "") in ("", "0"),
        reason="starts three more control planes: make test-multikueue (TRAINJOB_OPERATOR_MULTIKUEUE=1)",
    ),
]

NAMESPACE = "team-a"
#: TrainJobs of this namespace can only run on the worker with upstream's controller (its LocalQueue is only there).
UPSTREAM_NAMESPACE = "team-b"
UPSTREAM_WORKER = "worker2"
QUEUE = "team"
OUR_FIELD_MANAGERS = {"trainer", "trainer-status"}
MULTIKUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"


@dataclass
class Member:
    """One control plane of the fleet and the operator serving it."""

    role: str
    info: cluster_lib.ClusterInfo
    kube: Kube
    #: ours, or None on the worker that runs upstream's controller
    operator: OperatorProcess | None


@dataclass
class FleetUnderTest:
    manager: Member
    workers: dict[str, Member]
    tmp: Path
    watches: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def worker(self) -> Member:
        return self.workers["worker1"]


def _install(member_kube: Kube) -> None:
    """Our CRDs over upstream's (installed before Kueue started) under the harness's field manager, so fields only
    upstream's have are removed, and the operator namespace."""
    member_kube.run(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=trainjob-operator-test-harness",
        "-f",
        str(REPO / "crds"),
    )
    eventually(
        lambda: cluster_lib.crds_established(member_kube.cluster, "trainer.kubeflow.org", 3),
        "our CRDs Established",
        timeout=60,
    )
    member_kube.run("create", "namespace", OPERATOR_NAMESPACE, check=False)


def _start_operator(role: str, member_kube: Kube, tmp: Path) -> OperatorProcess:
    settings = {
        "leader_election": {
            "lease_name": f"trainjob-operator-{role}",
            "lease_duration_seconds": 4,
            "renew_deadline_seconds": 3,
            "retry_period_seconds": 1,
        }
    }
    process = OperatorProcess(str(member_kube.cluster.kubeconfig), f"operator-{role}", settings).start(tmp)
    eventually(process.ready, f"operator on {role} ready", timeout=90)
    return process


def _runtimes(member_kube: Kube) -> None:
    """Our default ClusterTrainingRuntimes, then a probe: every TrainJob webhook (ours, Kueue's) admits one."""
    member_kube.run("apply", "--server-side", "--force-conflicts", "-f", str(RUNTIMES_DIR))
    member_kube.run("create", "namespace", OPERATOR_NAMESPACE, check=False)  # the probe's (upstream's worker too)
    probe = trainjob("e2e-admission-probe", "torch-distributed")
    eventually(
        lambda: (
            member_kube.run(
                "create",
                "--dry-run=server",
                "-n",
                OPERATOR_NAMESPACE,
                "-f",
                "-",
                stdin=yaml.safe_dump(probe),
                check=False,
            ).returncode
            == 0
        ),
        "TrainJob admission by every webhook",
        timeout=150,
    )


def _start_upstream(role: str, member_kube: Kube, tmp: Path) -> subprocess.Popen[bytes]:
    """Upstream Kubeflow Trainer v2.3.0's controller and webhooks on this member, over its own CRDs (installed
    before Kueue started)."""
    member_kube.run("apply", "--server-side", "--force-conflicts", "-f", str(upstream_run.crds_dir()))
    with multikueue.member(role):  # its serving certificate and CA are the member's
        proc = upstream_run.start(member_kube.cluster, logs=tmp / role)
        try:
            eventually(lambda: upstream_run.ready(member_kube.cluster, proc), f"upstream's controller on {role}", 90)
            upstream_run.register_webhooks(member_kube.cluster, proc)
        except BaseException:
            upstream_run.stop(proc)
            raise
    return proc


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetUnderTest]:
    """A manager and worker1 with our operator, and worker2 with upstream's v2.3.0 controller when it is built."""
    mixed = upstream_run.available()
    workers = ("worker1", UPSTREAM_WORKER) if mixed else ("worker1",)
    tmp = tmp_path_factory.mktemp("multikueue")
    operators: list[OperatorProcess] = []
    upstreams: list[subprocess.Popen[bytes]] = []
    try:
        fl = multikueue.up(workers)
        members: dict[str, Member] = {}
        for role, info in fl.members().items():
            member_kube = Kube(info)
            if role == UPSTREAM_WORKER:
                upstreams.append(_start_upstream(role, member_kube, tmp))
                operator = None
            else:
                _install(member_kube)
                operator = _start_operator(role, member_kube, tmp)
                operators.append(operator)
            _runtimes(member_kube)
            members[role] = Member(role, info, member_kube, operator)
        multikueue.connect(fl)
        multikueue.queues(fl, NAMESPACE, gpus=8, queue=QUEUE, workers=["worker1"])
        if mixed:
            multikueue.queues(fl, UPSTREAM_NAMESPACE, gpus=8, queue=QUEUE, workers=[UPSTREAM_WORKER])
        under_test = FleetUnderTest(members.pop(multikueue.MANAGER), members, tmp)
        yield under_test
        for watch in under_test.watches:
            watch.kill()
    finally:
        for process in operators:
            process.stop()
        for upstream in upstreams:
            upstream_run.stop(upstream)
        multikueue.down(workers)


def queued(name: str, run_for: str, nodes: int = 2) -> dict[str, Any]:
    return trainjob(
        name,
        "torch-distributed",
        labels={QUEUE_LABEL: QUEUE},
        trainer={
            "numNodes": nodes,
            "command": ["torchrun", "train.py"],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
        },
        runtimePatches=[kwok_patch({"node": {RUN_FOR: run_for}})],
    )


class WriteWatch:
    """`kubectl get trainjobs --watch` on one cluster for the test's length: every version of every TrainJob the
    API server stored, with the field managers that wrote it (managedFields)."""

    def __init__(self, fl: FleetUnderTest, member: Member) -> None:
        self.out = fl.tmp / f"watch-{member.role}-{len(fl.watches)}.json"
        self.proc = subprocess.Popen(
            [
                str(member.info.kubectl_path),
                "--kubeconfig",
                str(member.info.kubeconfig),
                "get",
                "trainjobs",
                "-n",
                NAMESPACE,
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=self.out.open("w"),
            stderr=subprocess.DEVNULL,
            text=True,
        )
        fl.watches.append(self.proc)

    def events(self) -> list[dict[str, Any]]:
        text, decoder, i, events = self.out.read_text(), json.JSONDecoder(), 0, []
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                return events
            try:
                event, i = decoder.raw_decode(text, i)
            except ValueError:
                return events  # a document still being written
            events.append(event)

    def writers(self, name: str) -> set[tuple[str, str]]:
        """(field manager, subresource) of every write seen on TrainJob `name`."""
        seen: set[tuple[str, str]] = set()
        for event in self.events():
            obj = event.get("object") or {}
            if obj.get("metadata", {}).get("name") != name:
                continue
            for entry in obj["metadata"].get("managedFields") or []:
                seen.add((entry.get("manager", ""), entry.get("subresource", "")))
        return seen

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def printed(member: Member, name: str, namespace: str = NAMESPACE) -> dict[str, str]:
    """`kubectl get trainjob NAME -o wide` as the user sees it: column -> value."""
    out = member.kube.run("get", "trainjob", name, "-n", namespace, "-o", "wide").stdout.splitlines()
    header, row = out[0], out[1]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


def worker_pods(member: Member, name: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    out = member.kube.run("get", "pods", "-n", namespace, "-l", f"jobset.sigs.k8s.io/jobset-name={name}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def children_on(member: Member, uid: str, namespace: str = NAMESPACE) -> list[str]:
    """Objects in the namespace whose controller ownerReference names the TrainJob's uid."""
    found = []
    for kind in ("jobsets", "configmaps", "secrets", "jobs", "pods"):
        for obj in member.kube.items(kind, namespace):
            if any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or []):
                found.append(f"{kind}/{obj['metadata']['name']}")
    return found


def test_kubectl_trainjob_runs_on_the_worker_and_the_manager_shows_it(fleet: FleetUnderTest) -> None:
    manager, worker = fleet.manager, fleet.worker
    watch = WriteWatch(fleet, manager)
    manager.kube.apply(queued("mk-kubectl", "8s"), namespace=NAMESPACE)
    local = manager.kube.get("trainjob", "mk-kubectl", NAMESPACE)
    assert local is not None and local["spec"]["managedBy"] == MULTIKUEUE_MANAGED_BY  # Kueue's webhook set it

    # dispatched: the worker's copy runs under our operator, its managedBy cleared (our default) and its pods up
    remote = eventually(lambda: worker.kube.get("trainjob", "mk-kubectl", NAMESPACE), "the worker's copy", 90)
    assert remote["spec"].get("managedBy") in (None, "trainer.kubeflow.org/trainjob-controller")
    assert remote["metadata"]["labels"].get("kueue.x-k8s.io/multikueue-origin") == "multikueue-e2e"
    eventually(
        lambda: sum(p["status"].get("phase") == "Running" for p in worker_pods(worker, "mk-kubectl")) == 2,
        "two pods running on the worker",
        90,
    )
    assert (worker.kube.get("trainjob", "mk-kubectl", NAMESPACE) or {})["status"].get("state") == "Running"

    # the worker's status comes back (Kueue's typed copy: conditions and jobsStatus; our state/reason dropped)
    def manager_sees_active() -> dict[str, Any] | None:
        status = (manager.kube.get("trainjob", "mk-kubectl", NAMESPACE) or {}).get("status") or {}
        active = sum(j.get("active", 0) for j in status.get("jobsStatus") or [])
        return status if active else None

    status = eventually(manager_sees_active, "the worker's jobsStatus on the manager", 60)
    running_row = printed(manager, "mk-kubectl")
    print(f"\nmanager while running: {status} {running_row}")
    # STATE is ours and nothing runs on the manager; upstream's fields Kueue copied tell the truth with -o wide
    assert (running_row["STATE"], running_row["CONDITION"], running_row["ACTIVE"]) == ("", "", "node"), running_row

    # Complete on the worker -> Complete on the manager, with the reason and message our operator wrote
    def complete_on_manager() -> dict[str, Any] | None:
        cond = condition(manager.kube.get("trainjob", "mk-kubectl", NAMESPACE), "Complete")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(complete_on_manager, "Complete on the manager", 90)
    assert (cond["reason"], cond["message"]) == COMPLETE
    done_row = printed(manager, "mk-kubectl")
    assert (done_row["STATE"], done_row["CONDITION"], done_row["ACTIVE"]) == ("", "Complete", ""), done_row

    # the manager's operator created nothing and wrote nothing: no children, no write by our field managers
    local = manager.kube.get("trainjob", "mk-kubectl", NAMESPACE) or {}
    assert children_on(manager, local["metadata"]["uid"]) == []
    watch.stop()
    writers = watch.writers("mk-kubectl")
    assert writers, "the watch saw the TrainJob"
    assert not {m for m, _ in writers} & OUR_FIELD_MANAGERS, writers
    assert any(subresource == "status" for _, subresource in writers), f"Kueue's status copy: {writers}"
    print(f"writers of the manager's TrainJob: {sorted(writers)}")


def test_deleting_on_the_manager_removes_everything_on_the_worker(fleet: FleetUnderTest) -> None:
    manager, worker = fleet.manager, fleet.worker
    manager.kube.apply(queued("mk-delete", "600s"), namespace=NAMESPACE)
    remote = eventually(lambda: worker.kube.get("trainjob", "mk-delete", NAMESPACE), "the worker's copy", 90)
    eventually(
        lambda: sum(p["status"].get("phase") == "Running" for p in worker_pods(worker, "mk-delete")) == 2,
        "two pods running on the worker",
        90,
    )
    manager.kube.run("delete", "trainjob", "mk-delete", "-n", NAMESPACE, "--wait=true", "--timeout=60s")
    eventually(lambda: worker.kube.get("trainjob", "mk-delete", NAMESPACE) is None, "the worker's copy deleted", 90)
    eventually(
        lambda: children_on(worker, remote["metadata"]["uid"]) == [] and worker_pods(worker, "mk-delete") == [],
        "the worker's JobSet, pods and other children gone",
        90,
    )
    workloads = [w for w in worker.kube.items("workloads", NAMESPACE) if "mk-delete" in w["metadata"]["name"]]
    assert workloads == []


def train_fn() -> None:  # pragma: no cover - runs in the (fake) pod
    print("training")


def test_the_sdk_on_the_manager_follows_the_job_to_complete(fleet: FleetUnderTest) -> None:
    """The unmodified kubeflow SDK against the manager: `train()` with the queue label, then the state Kueue copies
    back. The SDK derives `Running` from the job's pods (sdk-contract section 2.2), which live on the worker, so on
    the manager it reports `Created` until the copied `Complete` condition arrives; steps and logs are the worker's."""
    pytest.importorskip("kubeflow.trainer", reason="needs the kubeflow SDK: pip install kubeflow==0.5.0")
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options.kubernetes import (
        JobSetSpecPatch,
        JobSetTemplatePatch,
        JobSpecPatch,
        JobTemplatePatch,
        Labels,
        PodTemplatePatch,
        ReplicatedJobPatch,
        RuntimePatch,
        TrainingRuntimeSpecPatch,
    )

    manager, worker = fleet.manager, fleet.worker
    client = TrainerClient(KubernetesBackendConfig(namespace=NAMESPACE, config_file=str(manager.info.kubeconfig)))
    run_for = RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(
                spec=JobSetSpecPatch(
                    replicated_jobs=[
                        ReplicatedJobPatch(
                            name="node",
                            template=JobTemplatePatch(
                                spec=JobSpecPatch(template=PodTemplatePatch(metadata={"annotations": {RUN_FOR: "8s"}}))
                            ),
                        )
                    ]
                )
            )
        )
    )
    name = client.train(
        runtime=client.get_runtime("torch-distributed"),
        trainer=CustomTrainer(func=train_fn, num_nodes=2, resources_per_node={"gpu": 1}),
        options=[Labels({QUEUE_LABEL: QUEUE}), run_for],
    )
    eventually(
        lambda: sum(p["status"].get("phase") == "Running" for p in worker_pods(worker, name)) == 2,
        "the SDK's job running on the worker",
        90,
    )
    assert client.get_job(name).status == "Created"  # no pods on the manager: the SDK cannot say Running there
    remote_uid = (worker.kube.get("trainjob", name, NAMESPACE) or {})["metadata"]["uid"]
    job = client.wait_for_job_status(name, status={"Complete"}, timeout=120, polling_interval=1)
    assert (job.status, job.num_nodes, job.steps) == ("Complete", 2, [])
    # Kueue deletes the worker's copy once the manager's Workload is finished: the manager keeps the record
    eventually(lambda: worker.kube.get("trainjob", name, NAMESPACE) is None, "the finished copy removed", 90)
    eventually(lambda: children_on(worker, remote_uid) == [], "the worker's children gone", 90)
    assert client.get_job(name).status == "Complete"
    client.delete_job(name)
    eventually(lambda: manager.kube.get("trainjob", name, NAMESPACE) is None, "deleted on the manager", 60)


def test_a_worker_running_upstream_beside_one_running_ours(fleet: FleetUnderTest) -> None:
    """Mixed fleet: team-b's queue exists only on worker2, where upstream Kubeflow Trainer v2.3.0's controller runs.
    The manager shows the same upstream fields for it as for a job our operator ran on worker1."""
    if UPSTREAM_WORKER not in fleet.workers:
        pytest.skip("upstream's controller is not built (make tools-upstream)")
    manager, upstream = fleet.manager, fleet.workers[UPSTREAM_WORKER]
    manager.kube.apply(queued("mk-upstream", "5s"), namespace=UPSTREAM_NAMESPACE)
    remote = eventually(
        lambda: upstream.kube.get("trainjob", "mk-upstream", UPSTREAM_NAMESPACE), "the copy on worker2", 90
    )
    assert fleet.worker.kube.get("trainjob", "mk-upstream", UPSTREAM_NAMESPACE) is None
    eventually(
        lambda: worker_pods(upstream, "mk-upstream", UPSTREAM_NAMESPACE), "upstream's JobSet's pods on worker2", 90
    )

    def complete_on_manager() -> dict[str, Any] | None:
        cond = condition(manager.kube.get("trainjob", "mk-upstream", UPSTREAM_NAMESPACE), "Complete")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(complete_on_manager, "Complete on the manager", 120)
    assert (cond["reason"], cond["message"]) == COMPLETE
    assert printed(manager, "mk-upstream", UPSTREAM_NAMESPACE)["CONDITION"] == "Complete"
    remote = upstream.kube.get("trainjob", "mk-upstream", UPSTREAM_NAMESPACE) or remote
    assert "state" not in (remote.get("status") or {}), "upstream's controller ran it, not ours"
    local = manager.kube.get("trainjob", "mk-upstream", UPSTREAM_NAMESPACE) or {}
    assert children_on(manager, local["metadata"]["uid"], UPSTREAM_NAMESPACE) == []


def test_a_high_priority_trainjob_preempts_a_low_one_under_multikueue(fleet: FleetUnderTest) -> None:
    """Preemption happens where the quota is counted, on the manager: the high-priority Workload evicts the low one
    there, Kueue suspends the manager's low TrainJob and deletes its copy on the worker (JobSet and pods go with it),
    runs the high one, and dispatches the low one again when the quota is back."""
    manager, worker = fleet.manager, fleet.worker
    classes = [
        {"apiVersion": multikueue.KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("e2e-low", 100), ("e2e-high", 1000))
    ]
    for member in (manager, worker):
        member.kube.apply(*classes)

    def with_priority(job: dict[str, Any], priority: str) -> dict[str, Any]:
        job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
        return job

    manager.kube.apply(with_priority(queued("mk-low", "30s", nodes=4), "e2e-low"), namespace=NAMESPACE)  # all 8 GPUs
    low_copy = eventually(lambda: worker.kube.get("trainjob", "mk-low", NAMESPACE), "the low one's copy", 90)
    eventually(lambda: len(worker_pods(worker, "mk-low")) == 4, "the low one's pods on the worker", 90)

    manager.kube.apply(with_priority(queued("mk-high", "5s", nodes=4), "e2e-high"), namespace=NAMESPACE)

    def low_workload() -> dict[str, Any]:
        return next(w for w in manager.kube.items("workloads", NAMESPACE) if "mk-low" in w["metadata"]["name"])

    evicted = eventually(
        lambda: (c := condition(low_workload(), "Evicted")) and c["status"] == "True" and c,
        "the low one's Workload evicted on the manager",
        90,
    )
    assert evicted["reason"] == "Preempted", evicted
    eventually(
        lambda: (manager.kube.get("trainjob", "mk-low", NAMESPACE) or {})["spec"].get("suspend") is True,
        "the manager's low TrainJob suspended",
        60,
    )
    eventually(
        lambda: children_on(worker, low_copy["metadata"]["uid"]) == [] and worker_pods(worker, "mk-low") == [],
        "no pod of the low one left on the worker",
        90,
    )

    def complete(name: str) -> bool:
        cond = condition(manager.kube.get("trainjob", name, NAMESPACE), "Complete")
        return bool(cond and cond["status"] == "True")

    eventually(lambda: complete("mk-high"), "the high one Complete on the manager", 120)
    eventually(lambda: complete("mk-low"), "the low one dispatched again and Complete", 150)


# Not in `make test` (session 5 deselects `slow`), only in `make test-multikueue`: once in five runs on a 2-core machine
# under two concurrent `make test`s, Kueue v0.19.2 had not given the lost worker up 120 s after its 30 s timeout
# (2026-11-25); CI must give the same answer every time, so the bound is longer and the test runs by its own target.
@pytest.mark.slow
def test_a_worker_lost_mid_run_is_given_up_after_the_timeout(fleet: FleetUnderTest) -> None:
    """Kueue's design (pkg/controller/admissionchecks/multikueue/workload.go): while the worker that admitted a
    workload is unreachable the manager keeps it admitted for `workerLostTimeout` (30 s here, 15 min by default);
    then its admission check goes to Retry ("Admitting remote lost"), the manager's Workload is evicted and requeued
    and Kueue suspends the manager's TrainJob, which waits for a worker again. Last in the module: the worker's API
    server stays down until the fleet is torn down."""
    manager, worker = fleet.manager, fleet.worker
    manager.kube.apply(queued("mk-lost", "600s"), namespace=NAMESPACE)
    eventually(
        lambda: sum(p["status"].get("phase") == "Running" for p in worker_pods(worker, "mk-lost")) == 2,
        "two pods running on the worker",
        90,
    )

    def workload() -> dict[str, Any]:
        return next(w for w in manager.kube.items("workloads", NAMESPACE) if "mk-lost" in w["metadata"]["name"])

    assert condition(workload(), "Admitted") is not None
    multikueue.stop_api_server(worker.info, worker.role)
    eventually(
        lambda: (
            (c := condition(manager.kube.get("multikueuecluster", worker.role), "Active")) and c["status"] == "False"
        ),
        "the manager notices the lost worker (MultiKueueCluster Active=False)",
        60,
    )
    # within the timeout the manager still counts the workload as admitted (the remote likely still runs)
    assert (condition(workload(), "Admitted") or {}).get("status") == "True"
    assert not (manager.kube.get("trainjob", "mk-lost", NAMESPACE) or {})["spec"].get("suspend")

    def given_up() -> str | None:
        # Kueue evicts the Workload, clears its admission and requeues it, and suspends the TrainJob. The Workload's
        # `Evicted` condition can be gone again between two polls of a loaded machine (seen twice), so the
        # TrainJob's suspension counts as the same outcome.
        evicted = condition(workload(), "Evicted")
        if evicted and evicted["status"] == "True":
            return f"Workload Evicted ({evicted.get('reason')}): {evicted.get('message')}"
        if (manager.kube.get("trainjob", "mk-lost", NAMESPACE) or {})["spec"].get("suspend") is True:
            return "TrainJob suspended by Kueue: its Workload was evicted and requeued"
        return None

    outcome = eventually(given_up, "the worker given up after workerLostTimeout", 300)
    print(f"\nworker lost: {outcome}")
    eventually(
        lambda: (manager.kube.get("trainjob", "mk-lost", NAMESPACE) or {})["spec"].get("suspend") is True,
        "Kueue suspends the manager's TrainJob (requeued, waiting for a worker)",
        60,
    )
    local = manager.kube.get("trainjob", "mk-lost", NAMESPACE) or {}
    assert condition(local, "Complete") is None and condition(local, "Failed") is None
    assert children_on(manager, local["metadata"]["uid"]) == []
