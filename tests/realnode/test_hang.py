"""A hang caught for real (issue 35): a 2-node torch TrainJob on the real nodes reports progress with the unmodified
kubeflow SDK (`update_trainjob_status()`: the lock's `kubeflow==0.5.0` and what it imports, the files this
checkout installed for Python 3.11, put on a shared volume beside the `torch` image's Python 3.11), then
rank 0 stops and rank 1 blocks in an all-reduce, so every pod stays Running and nothing reports. With
`stallPolicy: {progressTimeoutSeconds: 20, action: Restart}` the operator says Stalled within the limit plus a bounded
delay, sends one Warning Event naming the last report, deletes and rebuilds the JobSet (one restart, counted against
`failurePolicy.maxRestarts`); the second attempt (it finds the first one's marker on a shared volume) completes. The
goodput the status reports matches the phases this test timed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from real_runtimes import finished, real_node_runtime, real_trainjob

from cluster_fixtures import wait_for
from harness import images, realexamples, realnodes
from operator_fixtures import Kube, OperatorProcess, condition

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("torch",)

LIMIT = 20
#: Seconds allowed past the limit before Stalled shows: the requeue (about a second), the reconcile, the status
#: write, and this test's poll (0.5 s) on a loaded 2-core machine.
DETECTION_SLACK = 10.0
#: Seconds the goodput's phases may differ from what this test timed (its polls, the operator's reconciles, the
#: pod's clock against the operator's).
TOLERANCE = 8.0

SCRIPT = """
import os, time, torch, torch.distributed as dist
from kubeflow.trainer import update_trainjob_status
dist.init_process_group("gloo")
rank = dist.get_rank()
marker = "/shared/first-attempt"
first = not os.path.exists(marker)
dist.barrier()
if rank == 0 and first:
    open(marker, "w").write("hung here once")
steps = 6
for step in range(steps):
    if first and step == 3:
        if rank == 0:
            print("rank=0 stops reporting and leaves the collective", flush=True)
            time.sleep(3600)
        print(f"rank={rank} blocks in all_reduce", flush=True)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    if rank == 0:
        ok = update_trainjob_status(progress_percent=(step + 1) * 100 // steps,
                                    metrics={"step": step, "loss": round(1.0 / (step + 1), 3)})
        print(f"rank=0 step={step} reported={ok}", flush=True)
    time.sleep(5.2)  # the SDK sends at most one update per 5 s
print(f"rank={rank} done first={first}", flush=True)
dist.destroy_process_group()
"""


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def shared_dir(namespace: str) -> Iterator[Path]:
    path = Path("/tmp") / f"trainjob-realnode-stall-{namespace}"
    path.mkdir(mode=0o777, exist_ok=True)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sdk_into(directory: Path) -> None:
    """The kubeflow SDK and its dependencies as the lock installed them here, file for file (pure-Python wheels and
    manylinux ones for CPython 3.11, which the torch image's Debian Python 3.11 loads)."""
    text = images.lock_subset((images.REPO / "requirements" / "lock.txt").read_text(), ["kubeflow"])
    for line in text.splitlines():
        if not line or line[0].isspace() or line.startswith("#"):
            continue
        dist = metadata.distribution(re.split(r"[=<>!~;\s\[]", line, maxsplit=1)[0])
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if ".." in file.parts or not source.is_file():
                continue  # scripts installed outside site-packages
            target = directory / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


class States:
    """Every `status.state` the TrainJob was written with, in order, with when this test received it: a watch
    (`kubectl get --watch`), not a poll, which can miss a state that lasts less than its interval."""

    def __init__(self, kube: Kube, name: str, namespace: str) -> None:
        self.seen: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [
                str(kube.cluster.kubectl_path),
                *("get", "trainjob", name, "-n", namespace, "--watch"),
                *("-o", 'jsonpath={.status.state}{"\\n"}'),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "KUBECONFIG": str(kube.cluster.kubeconfig)},
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append((time.time(), line.strip() or "-"))

    def first(self, state: str, after: float = 0.0) -> float | None:
        """When `state` was first seen (at or after `after`)."""
        return next((at for at, s in list(self.seen) if s == state and at >= after), None)

    def stop(self) -> list[tuple[float, str]]:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        return self.seen


def runtime(image: str) -> dict[str, Any]:
    rt = real_node_runtime(image, "stall-real", torch_env=True)
    spec = rt["spec"]["template"]["spec"]
    spec["failurePolicy"] = {"maxRestarts": 1}
    pod = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    # beside the runtime's own (its writable /workspace, where the script is written)
    pod["volumes"] = [
        *pod.get("volumes", []),
        {"name": "shared", "persistentVolumeClaim": {"claimName": "stall-shared"}},
    ]
    container = pod["containers"][0]
    container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": "shared", "mountPath": "/shared"}]
    container["env"].append({"name": "PYTHONPATH", "value": "/shared/site-packages"})
    return rt


def test_a_rank_blocked_in_a_collective_is_stalled_restarted_and_the_second_attempt_completes(
    kube: Kube, operator: OperatorProcess, namespace: str, shared_dir: Path
) -> None:
    image = realnodes.load_image(kube.cluster, "torch")
    sdk_into(shared_dir / "site-packages")
    pv = f"stall-shared-{namespace}"
    kube.apply(*realexamples.shared_volume("stall-shared", namespace, str(shared_dir), pv))
    try:
        kube.create(runtime(image), namespace)
        job = real_trainjob(
            "hang",
            "stall-real",
            numNodes=2,
            command=["bash", "-c", f"cat > t.py <<'PY'\n{SCRIPT}PY\nexec torchrun t.py"],
        )
        job["spec"]["stallPolicy"] = {"progressTimeoutSeconds": LIMIT, "action": "Restart"}
        created = time.time()
        kube.create(job, namespace)
        states = States(kube, "hang", namespace)
        try:
            wait_for(
                lambda: bool(
                    condition(tj := kube.get("trainjob", "hang", namespace), "Complete") or condition(tj, "Failed")
                ),
                what="the TrainJob to stall, restart and finish",
                timeout=600,
                interval=1.0,
            )
            final = finished(kube, "hang", namespace, timeout=30)
        finally:
            written = states.stop()
        done = states.first("Complete") or time.time()
    finally:
        kube.delete("persistentvolume", pv)
    status = final["status"]
    assert condition(final, "Complete"), (status, operator.log()[-3000:])
    running, stalled = states.first("Running"), states.first("Stalled")
    assert running is not None and stalled is not None, (written, status)
    running_again = states.first("Running", after=stalled)
    assert running_again is not None, written

    # Stalled within the limit plus a bounded delay after the last report of the first attempt.
    goodput = status["goodput"]
    stalled_after = goodput["stalledReport"]
    detection = stalled - stamp(stalled_after) - LIMIT
    assert 0 <= detection + 1 <= DETECTION_SLACK, (detection, written, stalled_after)

    # One restart, counted against maxRestarts; the progress history kept; one Warning Event naming the report.
    job_set = (status.get("restartCounts") or {}).get("jobSet", status.get("restarts"))
    assert (job_set, goodput["stalls"]) == (1, 1), status
    assert status["trainerStatus"]["progressPercentage"] == 100
    events = [
        e
        for e in kube.items("events", namespace)
        if e.get("reason") == "TrainJobStalled" and e["involvedObject"]["name"] == "hang"
    ]
    assert len(events) == 1 and stalled_after in events[0]["message"] and "step" in events[0]["message"], events

    # The goodput matches the phases this test timed.
    total = sum(goodput[f"{p}Seconds"] for p in ("queued", "starting", "training", "restarting", "stalled"))
    timed = {
        "total": done - created,
        "starting": running - created,
        "stalled+restarting": running_again - stalled,
    }
    got = {
        "total": total,
        "starting": goodput["startingSeconds"],
        "stalled+restarting": goodput["stalledSeconds"] + goodput["restartingSeconds"],
    }
    for key, value in timed.items():
        assert abs(got[key] - value) <= TOLERANCE, (key, got, timed, goodput)
    assert goodput["phase"] == "Finished" and 0 < goodput["percent"] < 100
    assert (
        operator.metric(
            "trainjob_operator_stalls_total", trainjob_namespace=namespace, runtime="stall-real", action="Restart"
        )
        == 1
    )
    print(
        f"stall caught {detection + LIMIT:.1f}s after the last report (limit {LIMIT}s, +{detection:.1f}s); "
        f"goodput {goodput['percent']}%; timed { ({k: round(v, 1) for k, v in timed.items()}) } "
        f"reported {got}; states {[(round(at - created, 1), state) for at, state in written]}"
    )
