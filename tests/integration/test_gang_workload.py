"""Gang scheduling by Kubernetes itself (the Workload API, runtime/plugins/workload.py) on a Kubernetes 1.37 control
plane with its real kube-scheduler (`GenericWorkload` on, `scheduling.k8s.io/v1beta1` served) and four kwok nodes of
one GPU each: a TrainJob that cannot fit gets no pod bound, two that fit alone but not together run one whole and the
other waits whole, one that fits binds all its pods, and the same runtime without `spec.scheduling` behaves as today
(pods placed one by one).

The cluster is this module's own (its own directory and name), at `K8S_VERSION` when that is 1.37 or later, else
1.37.2. Skipped, saying so, when that version's control plane is not in the tool cache, as in `make test` (whose
CI time cannot hold its cold build): `make test-gang` builds it once (the cache key is the version's go.sum) and runs
this module. The bind-latency test measures scheduler-plugins' Coscheduling beside it when `make tools-coscheduling`
built that scheduler.
"""

from __future__ import annotations

import os
import ssl
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from builders import torch_runtime, trainjob_object
from cluster_fixtures import RUN_FOR_ANNOTATION, wait_for
from harness import cluster as cluster_lib
from operator_fixtures import OPERATOR_NAMESPACE, REPO, Kube, OperatorProcess, eventually, free_port
from trainjob_operator.runtime.plugins.workload import GATE

pytestmark = pytest.mark.cluster

DEFAULT_VERSION = "1.37.2"
GATES = "GenericWorkload=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
NODES = 4
"""kwok nodes of one GPU each: four pods of one GPU fit, five do not."""
NS = "gang"


def _version() -> str:
    wanted = cluster_lib.k8s_version_wanted()
    if wanted and tuple(int(x) for x in wanted.split(".")[:2]) >= (1, 37):
        return wanted
    return DEFAULT_VERSION


class _Env:
    """This module's cluster directory and name in the environment while the harness runs (the session cluster's,
    if any, are restored after)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        self.saved = {k: os.environ.get(k) for k in self.values}
        os.environ.update(self.values)

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def gang_cluster() -> Iterator[cluster_lib.ClusterInfo]:
    version = _version()
    if not cluster_lib.k8s_tools_present(version):
        pytest.skip(
            f"Kubernetes {version} is not in the tool cache ({cluster_lib.k8s_bin_dir(version)}); `make test` does "
            f"not build it (about an hour cold): `make test-gang` builds it once and runs these tests "
            f"(docs/gang-scheduling.md)"
        )
    env = _Env(
        {
            "TRAINJOB_CLUSTER_DIR": str(REPO / ".cluster" / f"gang-{os.getpid()}"),
            "TRAINJOB_CLUSTER_NAME": f"trainjob-operator-gang-{os.getpid()}",
        }
    )
    with env:
        try:
            info = cluster_lib.up(
                kueue=True,
                nodes=NODES,
                gpus_per_node=1,
                k8s_version=version,
                feature_gates=GATES,
                runtime_config=RUNTIME_CONFIG,
            )
        except cluster_lib.ClusterError as exc:
            pytest.fail(f"could not start the Kubernetes {version} cluster: {exc}", pytrace=False)
    try:
        yield info
    finally:
        with env:
            cluster_lib.down()


@pytest.fixture(scope="module")
def gkube(gang_cluster: cluster_lib.ClusterInfo) -> Kube:
    kube = Kube(gang_cluster)
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    eventually(lambda: cluster_lib.crds_established(gang_cluster, "trainer.kubeflow.org", 3), "our CRDs Established")
    kube.run("create", "namespace", OPERATOR_NAMESPACE, check=False)
    kube.run("create", "namespace", NS, check=False)
    eventually(lambda: kube.get("serviceaccount", "default", NS), "ServiceAccount default")
    # Kueue's TrainJob webhook refuses TrainJobs until it noticed the Trainer CRDs (it polls for them); v0.17.0 refuses
    # even those without a queue label meanwhile (`unsupported runtime: TrainingRuntime.trainer.kubeflow.org`).
    kube.apply(runtime("gang", GANG))
    probe = yaml.safe_dump(trainjob_object(NS, "probe", runtime_name="gang"))
    eventually(
        lambda: kube.run("create", "--dry-run=server", "-f", "-", stdin=probe, check=False).returncode == 0,
        "Kueue's webhook accepting TrainJobs",
        timeout=150,
    )
    return kube


@pytest.fixture(scope="module")
def gang_operator(gkube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    settings: dict[str, Any] = {
        "feature_gates": {GATE: True},
        "leader_election": {
            "lease_name": "trainjob-operator-gang",
            "lease_duration_seconds": 4,
            "renew_deadline_seconds": 3,
            "retry_period_seconds": 1,
        },
    }
    process = OperatorProcess(str(gkube.cluster.kubeconfig), "operator-gang", settings).start(
        tmp_path_factory.mktemp("gang")
    )
    try:
        eventually(process.ready, "operator readiness", timeout=60)
        yield process
    finally:
        process.stop()


KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def kueue_queue(kube: Kube, gpus: int) -> str:
    """A ResourceFlavor, a ClusterQueue of `gpus` GPUs for the test namespace and its LocalQueue `team`, active."""
    cq = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "gang-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}],
            }
        ],
    }
    kube.apply(
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "gang-flavor"}, "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "gang-cq"}, "spec": cq},
    )
    kube.apply(
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": "team"},
            "spec": {"clusterQueue": "gang-cq"},
        },
        namespace=NS,
    )

    def active() -> bool:
        for cond in ((kube.get("clusterqueue", "gang-cq") or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Active":
                return bool(cond.get("status") == "True")
        return False

    eventually(active, "the ClusterQueue active", timeout=60)
    return "team"


def runtime(name: str, scheduling: dict[str, Any] | None) -> dict[str, Any]:
    """One `node` job whose pods take one GPU each and run until deleted."""
    rt = torch_runtime(NS, name=name, pod_annotations={RUN_FOR_ANNOTATION: "3600s"})
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    if scheduling is not None:
        rt["spec"]["scheduling"] = scheduling
    return rt


def pods(kube: Kube, trainjob: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.items("pods", NS)
        if (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == trainjob
        and not p["metadata"].get("deletionTimestamp")
    ]


def bound(kube: Kube, trainjob: str) -> int:
    return sum(1 for p in pods(kube, trainjob) if p["spec"].get("nodeName"))


def pod_group_condition(kube: Kube, name: str) -> dict[str, Any] | None:
    group = kube.get("podgroups.v1beta1.scheduling.k8s.io", name, NS) or {}
    for cond in (group.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodGroupInitiallyScheduled":
            return dict(cond)
    return None


def unschedulable(kube: Kube, name: str) -> bool:
    cond = pod_group_condition(kube, name) or {}
    return cond.get("status") == "False" and cond.get("reason") == "Unschedulable"


def delete_and_wait(kube: Kube, *names: str) -> None:
    for name in names:
        kube.delete("trainjob", name, NS)
    wait_for(lambda: not any(pods(kube, n) for n in names), timeout=90, what=f"the pods of {names} gone")


GANG: dict[str, Any] = {"schedulingPolicy": {"gang": {}}}


def test_a_trainjob_that_cannot_fit_gets_no_pod_bound_and_leaves_the_capacity_to_others(
    gkube: Kube, gang_operator: OperatorProcess
) -> None:
    gkube.apply(runtime("gang", GANG))
    gkube.apply(trainjob_object(NS, "too-big", runtime_name="gang", trainer={"numNodes": NODES + 1}))
    workload = eventually(lambda: gkube.get("workloads.v1beta1.scheduling.k8s.io", "too-big", NS), "the Workload")
    templates = [{k: v for k, v in t.items() if v is not None} for t in workload["spec"]["podGroupTemplates"]]
    assert templates == [{"name": "too-big", "schedulingPolicy": {"gang": {"minCount": 5}}}]  # the server adds nulls
    assert (
        workload["metadata"]["ownerReferences"][0]["uid"]
        == gkube.existing("trainjob", "too-big", NS)["metadata"]["uid"]
    )
    eventually(lambda: len(pods(gkube, "too-big")) == NODES + 1, "all five pods created")
    eventually(lambda: unschedulable(gkube, "too-big"), "the scheduler's verdict on the gang: Unschedulable")
    assert bound(gkube, "too-big") == 0, "no pod of a gang that cannot fit is bound"
    # The capacity is left for others: a TrainJob of four binds whole beside the waiting five.
    gkube.apply(trainjob_object(NS, "fits", runtime_name="gang", trainer={"numNodes": NODES}))
    eventually(lambda: bound(gkube, "fits") == NODES, "the four pods of the fitting TrainJob bound", timeout=90)
    assert bound(gkube, "too-big") == 0
    delete_and_wait(gkube, "too-big", "fits")


def test_two_that_fit_alone_but_not_together_run_one_whole_and_the_other_waits_whole(
    gkube: Kube, gang_operator: OperatorProcess
) -> None:
    gkube.apply(runtime("gang", GANG))
    gkube.apply(
        trainjob_object(NS, "first", runtime_name="gang", trainer={"numNodes": 3}),
        trainjob_object(NS, "second", runtime_name="gang", trainer={"numNodes": 3}),
    )
    eventually(lambda: len(pods(gkube, "first")) == 3 and len(pods(gkube, "second")) == 3, "six pods created")
    eventually(lambda: {bound(gkube, "first"), bound(gkube, "second")} == {0, 3}, "one gang bound whole", timeout=90)
    waiting = "first" if bound(gkube, "first") == 0 else "second"
    running = "second" if waiting == "first" else "first"
    eventually(lambda: unschedulable(gkube, waiting), f"{waiting} waits as a gang")
    assert bound(gkube, waiting) == 0, "the waiting gang holds no node"
    # No deadlock: once the running one is gone, the waiting one binds whole.
    t0 = time.monotonic()
    delete_and_wait(gkube, running)
    eventually(lambda: bound(gkube, waiting) == 3, f"{waiting} bound whole after {running} left", timeout=120)
    assert time.monotonic() - t0 < 120
    delete_and_wait(gkube, waiting)


def test_suspend_and_resume_keep_the_gang(gkube: Kube, gang_operator: OperatorProcess) -> None:
    """Kueue's way: created suspended, resumed, suspended again, resumed: each time the pods are bound together."""
    gkube.apply(runtime("gang", GANG))
    gkube.apply(trainjob_object(NS, "kueue-like", runtime_name="gang", suspend=True, trainer={"numNodes": NODES}))
    eventually(
        lambda: gkube.get("podgroups.v1beta1.scheduling.k8s.io", "kueue-like", NS), "the PodGroup while suspended"
    )
    assert pods(gkube, "kueue-like") == []
    for _ in range(2):
        gkube.patch("trainjob", "kueue-like", NS, {"spec": {"suspend": False}})
        eventually(lambda: bound(gkube, "kueue-like") == NODES, "all pods bound on resume", timeout=90)
        assert all(
            p["spec"].get("schedulingGroup") == {"podGroupName": "kueue-like"} for p in pods(gkube, "kueue-like")
        )
        gkube.patch("trainjob", "kueue-like", NS, {"spec": {"suspend": True}})
        wait_for(lambda: not pods(gkube, "kueue-like"), timeout=90, what="the pods gone on suspend")
    refused = gkube.patch("trainjob", "kueue-like", NS, {"spec": {"trainer": {"numNodes": 2}}}, check=False)
    assert refused.returncode != 0 and "gang-scheduled" in refused.stderr, refused.stderr
    delete_and_wait(gkube, "kueue-like")


def test_kueue_admits_what_its_quota_holds_and_the_admitted_gang_binds_whole(
    gkube: Kube, gang_operator: OperatorProcess
) -> None:
    """Kueue (v0.19.2, quota of 4 GPUs) admits one of two TrainJobs of 3 and keeps the other suspended; the admitted
    one's pods are bound together; when it is deleted Kueue admits the other, which binds whole."""
    gkube.apply(runtime("gang", GANG))
    queue = kueue_queue(gkube, gpus=NODES)

    def queued(name: str) -> dict[str, Any]:
        job = trainjob_object(NS, name, runtime_name="gang", trainer={"numNodes": 3})
        job["metadata"]["labels"] = {QUEUE_LABEL: queue}
        return job

    # Kueue's TrainJob webhook refuses TrainJobs until it noticed the Trainer CRDs (it polls for them).
    eventually(
        lambda: (
            gkube.run(
                "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(queued("probe")), check=False
            ).returncode
            == 0
        ),
        "Kueue's webhook accepting TrainJobs",
        timeout=150,
    )
    gkube.apply(queued("q1"), queued("q2"))
    eventually(lambda: {bound(gkube, "q1"), bound(gkube, "q2")} == {0, 3}, "one admitted gang bound whole", timeout=120)
    waiting = "q1" if bound(gkube, "q1") == 0 else "q2"
    running = "q2" if waiting == "q1" else "q1"
    assert gkube.existing("trainjob", waiting, NS)["spec"].get("suspend") is True, "Kueue keeps the other suspended"
    assert pods(gkube, waiting) == []
    delete_and_wait(gkube, running)
    eventually(lambda: bound(gkube, waiting) == 3, f"{waiting} admitted and bound whole", timeout=120)
    delete_and_wait(gkube, waiting)


def test_the_same_runtime_without_scheduling_places_pods_one_by_one_as_today(
    gkube: Kube, gang_operator: OperatorProcess
) -> None:
    gkube.apply(runtime("plain", None))
    gkube.apply(trainjob_object(NS, "plain", runtime_name="plain", trainer={"numNodes": NODES + 1}))
    eventually(lambda: bound(gkube, "plain") == NODES, "four of five pods bound one by one", timeout=90)
    assert gkube.get("workloads.v1beta1.scheduling.k8s.io", "plain", NS) is None
    assert all("schedulingGroup" not in p["spec"] for p in pods(gkube, "plain"))
    delete_and_wait(gkube, "plain")


COSCHEDULING = "coscheduling-scheduler"
"""The scheduler name of scheduler-plugins' kube-scheduler, a second scheduler beside the cluster's own."""
SCHEDULER_PLUGINS = "0.35.4-devel"
"""The newest scheduler-plugins release (no v0.36 or v0.37 exists); `make tools-coscheduling` builds it."""


@pytest.fixture(scope="module")
def coscheduling(gkube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """scheduler-plugins' kube-scheduler with the Coscheduling plugin as a second scheduler (its own name), when the
    tool cache has it; else None and the reason."""
    binary = cluster_lib.pinned_bin_dir("scheduler-plugins", SCHEDULER_PLUGINS) / "kube-scheduler"
    if not binary.exists():
        yield None
        return
    tmp = tmp_path_factory.mktemp("coscheduling")
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(gkube.cluster.kubeconfig), "qps": 5000, "burst": 10000},
        "profiles": [
            {
                "schedulerName": COSCHEDULING,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 600}}],
            }
        ],
    }
    (tmp / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp / "scheduler.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), "--config", str(tmp / "config.yaml"), "--bind-address=127.0.0.1", f"--secure-port={port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE

    def healthy() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"scheduler-plugins' kube-scheduler exited: {(tmp / 'scheduler.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    try:
        eventually(healthy, "scheduler-plugins' kube-scheduler healthy", timeout=120)
        yield COSCHEDULING
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def bench_runtime(kind: str) -> dict[str, Any]:
    """Trainer pods that request no GPU (the four kwok nodes take 110 pods each), gang-scheduled by `kind`."""
    rt = torch_runtime(NS, name=f"bench-{kind}", pod_annotations={RUN_FOR_ANNOTATION: "3600s"})
    if kind == "workload":
        rt["spec"]["scheduling"] = GANG
    else:
        rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 600}}
        rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["schedulerName"] = (
            COSCHEDULING
        )
    return rt


def measure(kube: Kube, name: str, kind: str, size: int) -> tuple[float, float]:
    """Seconds from the TrainJob's creation to all its pods created, and to all bound."""
    t0 = time.monotonic()
    kube.apply(trainjob_object(NS, name, runtime_name=f"bench-{kind}", trainer={"numNodes": size}))
    eventually(lambda: len(pods(kube, name)) == size, f"{size} pods created", timeout=900)
    created = time.monotonic() - t0
    eventually(lambda: bound(kube, name) == size, f"{size} pods bound", timeout=900)
    elapsed = time.monotonic() - t0
    pod = pods(kube, name)[0]["spec"]
    if kind == "workload":
        assert pod["schedulingGroup"] == {"podGroupName": name}
    else:  # placed by scheduler-plugins' scheduler, gated by its PodGroup
        assert pod["schedulerName"] == COSCHEDULING
        assert kube.existing("podgroups.v1alpha1.scheduling.x-k8s.io", name, NS)["spec"]["minMember"] == size
    return created, elapsed


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


@pytest.mark.slow
@pytest.mark.parametrize("size", [int(os.environ.get("TRAINJOB_GANG_BENCH_SIZE", "256"))])
def test_bind_latency_of_a_large_gang(
    gkube: Kube, gang_operator: OperatorProcess, coscheduling: str | None, size: int
) -> None:
    """From the TrainJob's creation to every pod of a `size`-pod gang bound, by the Workload API and (when built:
    `make tools-coscheduling`) by scheduler-plugins' Coscheduling, alternating, `TRAINJOB_GANG_BENCH_RUNS` times
    each (default 1); the medians and the load average are printed."""
    kinds = ["workload"] + (["coscheduling"] if coscheduling else [])
    if not coscheduling:
        print("\ncoscheduling not measured: scheduler-plugins' kube-scheduler is not built (make tools-coscheduling)")
    gkube.apply(*(bench_runtime(kind) for kind in kinds))
    results: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    print(f"\nload average before: {load()}")
    for run in range(int(os.environ.get("TRAINJOB_GANG_BENCH_RUNS", "1"))):
        for kind in kinds:
            name = f"bench-{kind}-{run}"
            created, elapsed = measure(gkube, name, kind, size)
            results[kind].append((created, elapsed))
            print(
                f"{kind} run {run + 1}: {size} pods created after {created:.1f} s, all bound after {elapsed:.1f} s "
                f"(load {load()})"
            )
            delete_and_wait(gkube, name)
    for kind, runs in results.items():
        created = statistics.median(c for c, _ in runs)
        elapsed = statistics.median(e for _, e in runs)
        after = statistics.median(e - c for c, e in runs)
        print(
            f"{kind}: median of {len(runs)}: created {created:.1f} s, bound {elapsed:.1f} s, all bound {after:.1f} s "
            f"after the last pod appeared"
        )
    print(f"load average after: {load()}")
