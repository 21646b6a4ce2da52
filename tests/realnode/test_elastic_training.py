"""Elastic PyTorch for real (issue 34): a torch TrainJob with `elasticPolicy{minNodes: 1, maxNodes: 2}` on the two
real nodes, checkpointing to a directory both nodes share (a hostPath: both kubelets run on this machine). Mid-run
the kubelet of the node that runs index 1 is killed and that pod's containers with it (a node that went away: a
killed kubelet alone leaves its containers running and still talking to the survivor). torchrun's agent on the
survivor re-rendezvous alone and training goes on from the checkpoint; the operator shrinks the JobSet to 1 when
the lost index cannot be placed again (no JobSet restart). The kubelet back, the operator grows the JobSet to 2,
the new pod joins the rendezvous and the TrainJob completes with every step done once. The training script's own
record (START lines: the world size each incarnation of the workers saw, the step it resumed from) is the proof.

The JobSet controller runs with its ElasticJobSet feature gate on for this session (set before the session's
cluster starts); the TrainJob shows the operator's `status.elastic` and one Event per resize."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from real_runtimes import _containers_on, _ctr, finished, pods_of, real_node_runtime, real_trainjob

from harness import realnodes
from operator_fixtures import Kube, OperatorProcess, condition, eventually

os.environ.setdefault("TRAINJOB_JOBSET_FEATURE_GATES", "ElasticJobSet=true")

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("torch",)

TOTAL_STEPS = 1000
"""Steps of the run: at one a second until the test has seen the job grow back, then as fast as gloo goes (the `fast`
file: the rest of the steps in seconds, not the 45 s that 0.05 s a step took)."""

TRAIN = """
import json, os, socket, time
import torch
import torch.distributed as dist

CKPT = "/ckpt/state.json"
TOTAL = int(os.environ["TOTAL_STEPS"])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
state = {"step": 0, "done": []}
if os.path.exists(CKPT):
    with open(CKPT) as f:
        state = json.load(f)
step = state["step"]
node = os.environ.get("NODE_NAME", "?")
line = f"START rank={rank} world={world} node={node} step={step} restart={restart} t={time.time():.1f}"
print(line, flush=True)
if rank == 0:
    with open("/ckpt/starts.log", "a") as f:
        f.write(line + "\\n")
with open(f"/ckpt/worker-{socket.gethostname()}.log", "a") as f:  # each worker's own record of its world sizes
    f.write(line + "\\n")
while step < TOTAL:
    t = torch.tensor([1.0])
    dist.all_reduce(t)  # the world size, summed by gloo across the nodes
    step += 1
    if rank == 0:
        state["step"] = step
        state["done"].append([step, int(t.item()), round(time.time(), 2)])
        with open(CKPT + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(CKPT + ".tmp", CKPT)  # the checkpoint: every step, atomically
    if step % 10 == 0:
        print(f"STEP step={step} world={int(t.item())} rank={rank} node={node}", flush=True)
    time.sleep(0.0 if os.path.exists("/ckpt/fast") else 1.0)
print(f"DONE rank={rank} world={world} node={node} step={step}", flush=True)
dist.destroy_process_group()
"""


def elastic_runtime(image: str, name: str, ckpt: Path, total_steps: int = TOTAL_STEPS) -> dict[str, Any]:
    runtime = real_node_runtime(image, name, torch_env=True, backoff_limit=10)
    runtime["spec"]["mlPolicy"]["torch"] = {
        "elasticPolicy": {"minNodes": 1, "maxNodes": 2, "maxRestarts": 10, "belowMinNodesSeconds": 600}
    }
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod = job["template"]["spec"]
    # One trainer per node, strictly: the lost index cannot be placed beside the survivor (a spread constraint
    # would allow it once the dead node is tainted and no longer counts).
    pod.pop("topologySpreadConstraints", None)
    pod["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "elastic"}},
                }
            ]
        }
    }
    # Know soon that a node is gone (the default toleration is 300 s).
    pod["tolerations"] += [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
        for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
    ]
    pod["terminationGracePeriodSeconds"] = 5
    pod["volumes"] = [*pod.get("volumes", []), {"name": "ckpt", "hostPath": {"path": str(ckpt), "type": "Directory"}}]
    container = pod["containers"][0]
    container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": "ckpt", "mountPath": "/ckpt"}]
    container["env"] += [
        {"name": "TOTAL_STEPS", "value": str(total_steps)},
        # Close a rendezvous round 5 s after minNodes joined (torch's default waits 30 s for more).
        {"name": "PET_RDZV_CONF", "value": "join_timeout=900,last_call_timeout=5"},
    ]
    return runtime


def starts(ckpt: Path) -> list[dict[str, str]]:
    path = ckpt / "starts.log"
    text = path.read_text() if path.exists() else ""
    return [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in text.splitlines() if line.startswith("START")]


def steps(ckpt: Path) -> int:
    try:
        return int(json.loads((ckpt / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError):
        return 0


def kill_pod_containers(kube: Kube, index: int, namespace: str) -> int:
    """SIGKILL every task (sandbox included) of `namespace`'s pods in real node `index`'s containerd: the node's
    workload dies with it, its pod IPs go."""
    socket = kube.cluster.real["sockets"][index]
    tasks = _containers_on(kube.cluster, socket, namespace)
    for task in tasks:
        _ctr(kube.cluster, socket, "tasks", "kill", "--signal", "SIGKILL", task)
    return len(tasks)


def fresh_checkpoint(namespace: str) -> Path:
    """An empty shared checkpoint directory for the test's TrainJob, writable by the trainer (uid 1000, the shipped
    runtime's security context); the test removes it when done."""
    ckpt = Path(f"/tmp/trainjob-elastic-{namespace}")
    shutil.rmtree(ckpt, ignore_errors=True)
    ckpt.mkdir()
    ckpt.chmod(0o777)
    return ckpt


def start_training(kube: Kube, namespace: str, ckpt: Path, runtime: str, **trainer: Any) -> float:
    """TRAIN under torchrun as the TrainJob `elastic` (the runtime's anti-affinity names this JobSet) of `runtime`,
    2 nodes of 1 process (`trainer`: more of its fields); returns when it was created, once it trains at world
    size 2."""
    command = ["bash", "-c", f"cat > /workspace/t.py <<'EOF'\n{TRAIN}\nEOF\nexec torchrun /workspace/t.py"]
    kube.create(real_trainjob("elastic", runtime, numNodes=2, numProcPerNode=1, command=command, **trainer), namespace)
    created = time.monotonic()
    eventually(lambda: any(s["world"] == "2" for s in starts(ckpt)), "training at world size 2", timeout=240)
    return created


@pytest.mark.timeout(1500)
def test_an_elastic_torch_job_loses_a_node_goes_on_and_grows_back(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "torch")
    ckpt = fresh_checkpoint(namespace)
    try:
        kube.create(elastic_runtime(image, "torch-elastic", ckpt), namespace)
        created = start_training(kube, namespace, ckpt, "torch-elastic")
        two = steps(ckpt)
        eventually(lambda: steps(ckpt) >= two + 5, "5 steps at world size 2", timeout=120)
        trained = time.monotonic()
        victim = next(
            p for p in pods_of(kube, namespace, "elastic") if p["metadata"]["name"].startswith("elastic-node-0-1")
        )
        node = victim["spec"]["nodeName"]
        index = int(node.rsplit("-", 1)[1])
        jobset_uid = (kube.get("jobset", "elastic", namespace) or {})["metadata"]["uid"]

        realnodes.kill_kubelet(kube.cluster, index)
        killed_tasks = kill_pod_containers(kube, index, namespace)
        killed, at_kill, starts_at_kill = time.monotonic(), steps(ckpt), len(starts(ckpt))
        try:
            eventually(
                lambda: any(s["world"] == "1" for s in starts(ckpt)[starts_at_kill:]),
                "the survivor training alone",
                timeout=180,
            )
            alone = time.monotonic()
            eventually(lambda: steps(ckpt) >= at_kill + 5, "steps on the survivor", timeout=120)

            def shrunk() -> dict[str, Any] | None:
                job = kube.get("trainjob", "elastic", namespace) or {}
                elastic = (job.get("status") or {}).get("elastic") or {}
                return job if elastic.get("desiredNodes") == 1 else None

            eventually(shrunk, "the operator shrinking the JobSet to 1", timeout=240)
            shrank = time.monotonic()
            rjob = (kube.get("jobset", "elastic", namespace) or {})["spec"]["replicatedJobs"][0]
            assert rjob["template"]["spec"]["parallelism"] == 1
        finally:
            realnodes.restart_kubelet(kube.cluster, index)
        back = time.monotonic()
        regrown_at = len(starts(ckpt))
        eventually(
            lambda: any(s["world"] == "2" for s in starts(ckpt)[regrown_at:]), "training at world size 2 again", 300
        )
        regrown = time.monotonic()
        (ckpt / "fast").touch()
        job = finished(kube, "elastic", namespace, timeout=300)
        done = time.monotonic()
        logs = {
            p["metadata"]["name"]: kube.run("logs", "-n", namespace, p["metadata"]["name"]).stdout
            for p in pods_of(kube, namespace, "elastic")
        }
        assert condition(job, "Complete"), (job.get("status"), logs)

        # The same JobSet all along: no JobSet restart, no rebuild.
        jobset = kube.get("jobset", "elastic", namespace) or {}
        assert jobset["metadata"]["uid"] == jobset_uid
        assert int((jobset.get("status") or {}).get("restarts") or 0) == 0
        # Every step done exactly once, in order, none lost to the shrink or the growth.
        state = json.loads((ckpt / "state.json").read_text())
        assert [s for s, _, _ in state["done"]] == list(range(1, TOTAL_STEPS + 1))
        worlds = [w for _, w, _ in state["done"]]
        # The survivor's idle time: the longest pause between two steps (the re-rendezvous after the loss).
        stamps = [t for _, _, t in state["done"]]
        idle = max(b - a for a, b in itertools.pairwise(stamps))
        assert worlds[-1] == 2 and worlds[at_kill:].count(1) > 0 and worlds[two:at_kill] == [2] * (at_kill - two), (
            worlds
        )
        history = starts(ckpt)
        # (The first round may close with one node if the second joins more than last_call_timeout later.)
        resumed = [int(s["step"]) for s in history]
        assert resumed == sorted(resumed) and resumed[starts_at_kill] >= at_kill - 1, (resumed, at_kill)
        # The operator's view and its Events.
        elastic = job["status"]["elastic"]
        # At least one shrink and one growth (a growth tried while the node was still away shrinks again).
        assert (elastic["desiredNodes"], elastic["scaling"]) == (2, "Enabled") and elastic["resizes"] >= 2, elastic
        events = [
            e["reason"]
            for e in kube.items("events", namespace)
            if e["involvedObject"].get("name") == "elastic" and e["reason"].startswith("Elastic")
        ]
        assert events.count("ElasticScaleDown") >= 1 and events.count("ElasticScaleUp") >= 1, events
        for log in logs.values():
            assert re.search(r"DONE rank=\d world=2", log), logs
        print(
            f"elastic torch 1..2: world 2 training {trained - created:.1f}s after create; node killed "
            f"({killed_tasks} tasks) at step {at_kill}; survivor alone (world 1) after {alone - killed:.1f}s; "
            f"JobSet shrunk to 1 after {shrank - killed:.1f}s; kubelet back after {back - killed:.1f}s; world 2 again "
            f"{regrown - back:.1f}s after that; Complete {done - regrown:.1f}s later; longest pause between steps "
            f"{idle:.1f}s (node-seconds idle: {idle:.1f} on the one survivor); status.restarts "
            f"{job['status'].get('restarts')}, resizes {elastic['resizes']}; starts: "
            + "; ".join(f"world={s['world']} step={s['step']} restart={s['restart']}" for s in history)
        )
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


AWAY_S = 40
"""How long the fixed-size contrast keeps the node away: a little more than the elastic run's shrink takes (the 16 s
node monitor grace of `realnodes.NODE_MONITOR_OPTIONS`, the 5 s toleration, the eviction), so the lost pod is
evicted."""


@pytest.mark.timeout(1500)
def test_the_same_loss_on_a_fixed_size_torch_job_idles_the_survivor_until_the_node_returns(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    """The contrast: the same script and the same loss on a fixed-size TrainJob (no elasticPolicy: torchrun's static
    rendezvous over exactly 2 nodes). The survivor's torchrun fails with its lost peer, its container restarts and
    waits for a node 1 that cannot be placed: nothing trains until the node is back. Reported: the survivor's
    longest pause, in node-seconds, beside the elastic run's."""
    image = realnodes.load_image(kube.cluster, "torch")
    ckpt = fresh_checkpoint(namespace)
    try:
        runtime = elastic_runtime(image, "torch-fixed", ckpt)
        runtime["spec"]["mlPolicy"]["torch"] = {}
        kube.create(runtime, namespace)
        created = start_training(kube, namespace, ckpt, "torch-fixed")
        eventually(lambda: steps(ckpt) >= 8, "8 steps at world size 2", timeout=120)
        victim = next(
            p for p in pods_of(kube, namespace, "elastic") if p["metadata"]["name"].startswith("elastic-node-0-1")
        )
        index = int(victim["spec"]["nodeName"].rsplit("-", 1)[1])
        realnodes.kill_kubelet(kube.cluster, index)
        kill_pod_containers(kube, index, namespace)
        killed, at_kill = time.monotonic(), steps(ckpt)
        try:
            deadline = killed + AWAY_S
            eventually(lambda: time.monotonic() >= deadline, f"the node away for {AWAY_S}s", timeout=AWAY_S + 10)
            trained_meanwhile = steps(ckpt) - at_kill
        finally:
            realnodes.restart_kubelet(kube.cluster, index)
        back = time.monotonic()
        eventually(lambda: steps(ckpt) > at_kill + 2, "training again", timeout=300)
        again = time.monotonic()
        (ckpt / "fast").touch()
        job = finished(kube, "elastic", namespace, timeout=600)
        done = time.monotonic()
        state = json.loads((ckpt / "state.json").read_text())
        stamps = [t for _, _, t in state["done"]]
        idle = max(b - a for a, b in itertools.pairwise(stamps))
        assert condition(job, "Complete"), job.get("status")
        assert trained_meanwhile <= 1, "a fixed-size job trains nothing while a node is away"
        assert {w for _, w, _ in state["done"]} == {2}
        print(
            f"fixed-size torch 2: node away {back - killed:.1f}s, {trained_meanwhile} steps meanwhile; training again "
            f"{again - back:.1f}s after it was back; longest pause between steps {idle:.1f}s (node-seconds idle: "
            f"{idle:.1f} on the one survivor); status.restarts {job['status'].get('restarts')}; create to Complete "
            f"{done - created:.1f}s; steps in order each once: "
            f"{[s for s, _, _ in state['done']] == list(range(1, TOTAL_STEPS + 1))}; starts: "
            + "; ".join(f"world={s['world']} step={s['step']} restart={s['restart']}" for s in starts(ckpt))
        )
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def worker_worlds(ckpt: Path) -> dict[str, list[str]]:
    """Each worker's (pod hostname's) record: the world size of each of its starts, in order."""
    return {
        path.stem.removeprefix("worker-"): [line.split()[2] for line in path.read_text().splitlines()]
        for path in sorted(ckpt.glob("worker-*.log"))
    }


def elastic_events(kube: Kube, namespace: str, name: str) -> list[str]:
    """The Elastic* Events of that TrainJob, oldest first: a list of Events comes in the order of their names (random
    suffixes), not of time, so it is sorted by when each was first seen (the resizes it checks are seconds apart)."""
    events = [
        e
        for e in kube.items("events", namespace)
        if e["involvedObject"].get("name") == name and e["reason"].startswith("Elastic")
    ]
    events.sort(key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or e["metadata"]["creationTimestamp"])
    return [f"{e['reason']}: {e.get('message')}" for e in events]


NUMNODES_STEPS = 200
"""Steps of the numNodes run: at one a second until the test saw it grow back, then fast."""


@pytest.mark.timeout(900)
def test_a_user_changes_num_nodes_of_a_running_elastic_torch_job(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    """A user edits `spec.trainer.numNodes` of a running elastic TrainJob (its own `elasticPolicy` makes the field
    mutable), 2 -> 1 -> 2: the operator resizes the JobSet each time (an Event, `status.elastic`), torchrun's agents
    re-rendezvous at world 1 then 2, training goes on from the checkpoint, every step done once, and RESTARTS stays
    0 (a resize is not a failure: `status.elastic.resizes` counts it)."""
    image = realnodes.load_image(kube.cluster, "torch")
    ckpt = fresh_checkpoint(namespace)
    try:
        kube.create(elastic_runtime(image, "torch-elastic", ckpt, NUMNODES_STEPS), namespace)
        created = start_training(kube, namespace, ckpt, "torch-elastic", elasticPolicy={"minNodes": 1, "maxNodes": 2})
        two = steps(ckpt)
        eventually(lambda: steps(ckpt) >= two + 3, "3 steps at world size 2", timeout=120)
        trained = time.monotonic()
        jobset_uid = (kube.get("jobset", "elastic", namespace) or {})["metadata"]["uid"]

        def resized_to(size: int) -> bool:
            job = kube.get("trainjob", "elastic", namespace) or {}
            rjob = ((kube.get("jobset", "elastic", namespace) or {}).get("spec") or {}).get("replicatedJobs") or [{}]
            elastic = (job.get("status") or {}).get("elastic") or {}
            return elastic.get("desiredNodes") == size and rjob[0]["template"]["spec"].get("parallelism") == size

        kube.run(
            "patch", "trainjob", "elastic", "-n", namespace, "--type=merge", "-p", '{"spec":{"trainer":{"numNodes":1}}}'
        )
        edited, at_edit, starts_at_edit = time.monotonic(), steps(ckpt), len(starts(ckpt))
        eventually(lambda: resized_to(1), "the operator shrinking the JobSet to 1", timeout=60)
        shrank = time.monotonic()
        eventually(
            lambda: any(s["world"] == "1" for s in starts(ckpt)[starts_at_edit:]), "training at world size 1", 120
        )
        alone = time.monotonic()
        eventually(lambda: steps(ckpt) >= at_edit + 3, "steps at world size 1", timeout=120)

        kube.run(
            "patch", "trainjob", "elastic", "-n", namespace, "--type=merge", "-p", '{"spec":{"trainer":{"numNodes":2}}}'
        )
        grown_at, starts_at_grow = time.monotonic(), len(starts(ckpt))
        eventually(lambda: resized_to(2), "the operator growing the JobSet to 2", timeout=60)
        grew = time.monotonic()
        eventually(
            lambda: any(s["world"] == "2" for s in starts(ckpt)[starts_at_grow:]), "training at world size 2 again", 180
        )
        regrown = time.monotonic()
        (ckpt / "fast").touch()
        job = finished(kube, "elastic", namespace, timeout=300)
        done = time.monotonic()
        assert condition(job, "Complete"), job.get("status")

        jobset = kube.get("jobset", "elastic", namespace) or {}
        assert jobset["metadata"]["uid"] == jobset_uid and int((jobset.get("status") or {}).get("restarts") or 0) == 0
        state = json.loads((ckpt / "state.json").read_text())
        assert [s for s, _, _ in state["done"]] == list(range(1, NUMNODES_STEPS + 1))
        worlds = [w for _, w, _ in state["done"]]
        assert 1 in worlds[at_edit:] and worlds[-1] == 2, worlds
        elastic = job["status"]["elastic"]
        assert (elastic["desiredNodes"], elastic["resizes"], elastic["scaling"]) == (2, 2, "Enabled"), elastic
        assert not job["status"].get("restarts"), job["status"]  # RESTARTS: failures only
        events = elastic_events(kube, namespace, "elastic")
        assert [e.split(":")[0] for e in events] == ["ElasticScaleDown", "ElasticScaleUp"], events
        assert "numNodes is 1" in events[0], events
        workers = worker_worlds(ckpt)
        # Index 0 saw 2, 1, 2; index 1 saw 2, then (a new pod after the growth) 2 again.
        assert workers["elastic-node-0-0"][-2:] == ["world=1", "world=2"], workers
        assert workers["elastic-node-0-1"][-1] == "world=2", workers
        print(
            f"elastic numNodes edit 2->1->2: world 2 {trained - created:.1f}s after create; edit to 1 at step "
            f"{at_edit}; JobSet at 1 after {shrank - edited:.1f}s, world 1 training after {alone - edited:.1f}s; "
            f"edit to 2: JobSet at 2 after {grew - grown_at:.1f}s, world 2 training after {regrown - grown_at:.1f}s; "
            f"Complete {done - regrown:.1f}s later, {NUMNODES_STEPS} steps each once; status.restarts "
            f"{job['status'].get('restarts')}, status.elastic.resizes {elastic['resizes']}; events {events}; "
            f"workers' world sizes {workers}"
        )
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


INDEX0_STEPS = 500
"""Steps of the run that loses index 0: at one a second until the test saw it grow back, then fast."""


@pytest.mark.timeout(1200)
def test_losing_index_0_moves_the_rendezvous_to_the_survivor_and_index_0_rejoins(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    """The rendezvous is not pinned to a pod that can disappear: the node of index 0 (whose store the rendezvous
    Service selects at first) is lost mid-run. Once its pod is evicted the operator moves the Service to index 1's
    store (every agent serves one); the survivor's torchrun, which lost the store, restarts in its container
    (one failure-restart) and trains alone from the checkpoint. The JobSet is not shrunk: an Indexed Job would drop
    index 1, the survivor. The node back, index 0's pending replacement is placed and joins the survivor's
    rendezvous, and the TrainJob completes with every step done once."""
    image = realnodes.load_image(kube.cluster, "torch")
    ckpt = fresh_checkpoint(namespace)
    try:
        runtime = elastic_runtime(image, "torch-elastic", ckpt, INDEX0_STEPS)
        container = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ][0]
        for env in container["env"]:
            if env["name"] == "PET_RDZV_CONF":  # notice a lost store after 20 s, not torch's 60
                env["value"] += ",read_timeout=20"
        kube.create(runtime, namespace)
        created = start_training(kube, namespace, ckpt, "torch-elastic")
        two = steps(ckpt)
        eventually(lambda: steps(ckpt) >= two + 3, "3 steps at world size 2", timeout=120)
        trained = time.monotonic()
        victim = next(
            p for p in pods_of(kube, namespace, "elastic") if p["metadata"]["name"].startswith("elastic-node-0-0")
        )
        index = int(victim["spec"]["nodeName"].rsplit("-", 1)[1])
        jobset_uid = (kube.get("jobset", "elastic", namespace) or {})["metadata"]["uid"]
        service = kube.get("service", "elastic-rdzv", namespace) or {}
        assert service["spec"]["selector"]["batch.kubernetes.io/job-completion-index"] == "0", service

        realnodes.kill_kubelet(kube.cluster, index)
        killed_tasks = kill_pod_containers(kube, index, namespace)
        killed, at_kill, starts_at_kill = time.monotonic(), steps(ckpt), len(starts(ckpt))
        try:

            def moved() -> dict[str, Any] | None:
                job = kube.get("trainjob", "elastic", namespace) or {}
                elastic = (job.get("status") or {}).get("elastic") or {}
                return job if elastic.get("rendezvousIndex") == 1 else None

            eventually(moved, "the operator moving the rendezvous to index 1", timeout=240)
            moved_at = time.monotonic()
            eventually(
                lambda: any(s["world"] == "1" for s in starts(ckpt)[starts_at_kill:]),
                "the survivor training alone",
                timeout=240,
            )
            alone = time.monotonic()
            eventually(lambda: steps(ckpt) >= at_kill + 3, "steps on the survivor", timeout=120)
            service = kube.get("service", "elastic-rdzv", namespace) or {}
            assert service["spec"]["selector"]["batch.kubernetes.io/job-completion-index"] == "1", service
            rjob = (kube.get("jobset", "elastic", namespace) or {})["spec"]["replicatedJobs"][0]
            assert rjob["template"]["spec"]["parallelism"] == 2  # not shrunk: that would drop index 1, the survivor
        finally:
            realnodes.restart_kubelet(kube.cluster, index)
        back = time.monotonic()
        regrown_at = len(starts(ckpt))
        eventually(
            lambda: any(s["world"] == "2" for s in starts(ckpt)[regrown_at:]), "training at world size 2 again", 300
        )
        regrown = time.monotonic()
        (ckpt / "fast").touch()
        job = finished(kube, "elastic", namespace, timeout=300)
        done = time.monotonic()
        assert condition(job, "Complete"), job.get("status")

        jobset = kube.get("jobset", "elastic", namespace) or {}
        assert jobset["metadata"]["uid"] == jobset_uid and int((jobset.get("status") or {}).get("restarts") or 0) == 0
        state = json.loads((ckpt / "state.json").read_text())
        assert [s for s, _, _ in state["done"]] == list(range(1, INDEX0_STEPS + 1))
        worlds = [w for _, w, _ in state["done"]]
        assert 1 in worlds[at_kill:] and worlds[-1] == 2, worlds
        stamps = [t for _, _, t in state["done"]]
        idle = max(b - a for a, b in itertools.pairwise(stamps))
        elastic = job["status"]["elastic"]
        assert (elastic["rendezvousIndex"], elastic["desiredNodes"], elastic["resizes"]) == (1, 2, 0), elastic
        events = elastic_events(kube, namespace, "elastic")
        assert [e.split(":")[0] for e in events] == ["ElasticRendezvousMoved"], events
        workers = worker_worlds(ckpt)
        assert "world=1" in workers["elastic-node-0-1"] and workers["elastic-node-0-1"][-1] == "world=2", workers
        assert workers["elastic-node-0-0"][-1] == "world=2", workers
        print(
            f"elastic torch 1..2, index 0 lost: world 2 {trained - created:.1f}s after create; node of index 0 "
            f"killed ({killed_tasks} tasks) at step {at_kill}; rendezvous moved to index 1 after "
            f"{moved_at - killed:.1f}s; survivor alone (world 1) after {alone - killed:.1f}s; kubelet back after "
            f"{back - killed:.1f}s; world 2 again {regrown - back:.1f}s after that; Complete {done - regrown:.1f}s "
            f"later, {INDEX0_STEPS} steps each once; longest pause between steps {idle:.1f}s; status.restarts "
            f"{job['status'].get('restarts')}, resizes {elastic['resizes']}; events {events}; workers' world sizes "
            f"{workers}"
        )
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
