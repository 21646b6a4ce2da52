"""Pod start latency on the real nodes (issue 23): TrainJob created → every pod Running in containerd, our operator
against upstream Kubeflow Trainer v2.3.0's controller on the same two real nodes, the same runtime, alternating runs,
medians side by side; then, with `--torch-runs`, the real torch run (2 nodes x 2 processes, gloo all-reduce): its
wall time from created to Complete, per contender.

  flock /tmp/trainjob-realnode.lock python bench/realnode_bench.py            # make bench-realnodes: 7 runs each
  flock /tmp/trainjob-realnode.lock python bench/realnode_bench.py --runs 3 --torch-runs 0

Needs root and the node parts (`make tools-nodes-debs tools-nodes`) and upstream's controller (`make
tools-upstream`; without it only ours is measured, saying so). Brings up its own cluster with 2 real nodes
(`TRAINJOB_CLUSTER_DIR`, default /tmp/tjo-bench-real) and tears it down. One real-node cluster per machine: hold the
machine lock. Results: bench/results/realnode-<stamp>.json and .md, printed as a table.

What is timed: from just before the TrainJob's POST to the watch event that shows the last of its pods Running
(the kubelet has started the container in containerd and reported it). In between: the contender's reconcile
(JobSet), the JobSet and Job controllers (Jobs, pods), the scheduler, the kubelet (sandbox, CNI, container). Each
contender runs alone (the other stopped), with webhooks and leader election off, the same client settings as in
bench/cluster_bench.py; the runtime is the shipped torch-distributed shape with the busybox image (no import
cost), one pod per real node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
os.environ.setdefault("TRAINJOB_CLUSTER_DIR", "/tmp/tjo-bench-real")
os.environ.setdefault("TRAINJOB_CLUSTER_NAME", "tjo-bench-real")
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "hack"))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "realnode"))

import cluster_bench  # noqa: E402
import kubeclient  # noqa: E402
from real_runtimes import busybox_runtime, real_node_runtime, real_trainjob, shell_trainjob  # noqa: E402
from test_torch import DDP  # noqa: E402

from harness import cluster, images, realnodes  # noqa: E402

NAMESPACE = "bench-real"
#: What a run may take before it counts as a failure of the harness, not a slow number.
RUN_TIMEOUT_S = 180.0


def say(text: str) -> None:
    print(f"bench-realnodes: {text}", flush=True)


def _running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return (
        pod.get("status", {}).get("phase") == "Running"
        and bool(statuses)
        and all("running" in (s.get("state") or {}) for s in statuses)
    )


def time_to_running(info: cluster.ClusterInfo, trainjob: dict[str, Any], pods: int) -> float:
    """Seconds from just before the TrainJob's POST to the watch event showing its `pods` pods all Running."""
    return asyncio.run(_time_to_running(info, trainjob, pods))


async def _time_to_running(info: cluster.ClusterInfo, trainjob: dict[str, Any], pods: int) -> float:
    client = kubeclient.connect(str(info.kubeconfig))
    try:
        return await _watched(client, info, trainjob, pods)
    finally:
        await client.close()


async def _watched(client: Any, info: cluster.ClusterInfo, trainjob: dict[str, Any], pods: int) -> float:
    name = trainjob["metadata"]["name"]
    listed = asyncio.Event()
    running: set[str] = set()

    async def watch() -> float:
        async for _type, pod, at in kubeclient.watch(client, "v1", "Pod", NAMESPACE, listed):
            if pod["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") != name:
                continue
            if _running(pod):
                running.add(pod["metadata"]["name"])
            if len(running) >= pods:
                return at
        raise RuntimeError("the pod watch ended")

    watcher = asyncio.create_task(watch())
    await listed.wait()
    t0 = time.monotonic()
    await asyncio.to_thread(info.kubectl, "create", "-n", NAMESPACE, "-f", "-", input=json.dumps(trainjob))
    try:
        return await asyncio.wait_for(watcher, RUN_TIMEOUT_S) - t0
    finally:
        watcher.cancel()


def _finished_after(info: cluster.ClusterInfo, name: str, t0: float) -> tuple[str, float]:
    deadline = t0 + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        job = info.kubectl_json("get", "trainjob", name, "-n", NAMESPACE)
        for c in job.get("status", {}).get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return c["type"], time.monotonic() - t0
        time.sleep(0.2)
    raise SystemExit(f"bench-realnodes: TrainJob {name} did not finish within {RUN_TIMEOUT_S:.0f}s")


def _delete_trainjob(info: cluster.ClusterInfo, name: str) -> None:
    """Delete it and wait until its pods are gone, so the next run starts on idle nodes."""
    info.kubectl("delete", "trainjob", name, "-n", NAMESPACE, "--wait=true", "--timeout=120s", check=False)
    cluster_bench.wait(
        lambda: (
            not info.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", f"jobset.sigs.k8s.io/jobset-name={name}").get(
                "items"
            )
        ),
        f"the pods of {name} gone",
        120,
    )


def pod_start_runs(
    info: cluster.ClusterInfo, contenders: list[cluster_bench.Contender], runs: int, logs: Path
) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {c.name: [] for c in contenders}
    for run in range(runs):
        # Alternating, so a change of load on the shared machine falls on both.
        for contender in contenders if run % 2 == 0 else contenders[::-1]:
            process = contender.start(info, cluster_bench.DEFAULTS, logs)
            try:
                name = f"start-{contender.name}-{run}"
                job = shell_trainjob(name, "busybox-real", "exec sleep 600")
                seconds = time_to_running(info, job, pods=2)
                results[contender.name].append(seconds)
                say(f"run {run + 1}/{runs} {contender.name}: created → 2 pods Running {seconds:.2f}s")
                _delete_trainjob(info, name)
            finally:
                process.stop()
    return results


def torch_runs(
    info: cluster.ClusterInfo, contenders: list[cluster_bench.Contender], runs: int, logs: Path
) -> dict[str, list[dict[str, float]]]:
    image = realnodes.load_image(info, "torch")
    info.kubectl(
        "apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(real_node_runtime(image, "torch-real", torch_env=True))
    )
    script = f"cat > /workspace/ddp.py <<'EOF'\n{DDP}\nEOF\nexec torchrun /workspace/ddp.py"
    results: dict[str, list[dict[str, float]]] = {c.name: [] for c in contenders}
    for run in range(runs):
        for contender in contenders if run % 2 == 0 else contenders[::-1]:
            process = contender.start(info, cluster_bench.DEFAULTS, logs)
            try:
                name = f"ddp-{contender.name}-{run}"
                job = real_trainjob(name, "torch-real", numNodes=2, numProcPerNode=2, command=["bash", "-c", script])
                t0 = time.monotonic()
                running = time_to_running(info, job, pods=2)
                outcome, wall = _finished_after(info, name, t0)
                if outcome != "Complete":
                    raise SystemExit(f"bench-realnodes: the torch TrainJob {name} {outcome}")
                results[contender.name].append({"running_s": running, "complete_s": wall})
                say(f"torch run {run + 1}/{runs} {contender.name}: pods Running {running:.2f}s, Complete {wall:.2f}s")
                _delete_trainjob(info, name)
            finally:
                process.stop()
    return results


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def markdown(report: dict[str, Any]) -> str:
    names = list(report["pod_start"])
    lines = [
        f"# Real nodes: pod start latency ({report['stamp']})",
        "",
        f"{report['machine']}; load average before {report['load_before']}, after {report['load_after']}.",
        "",
        f"TrainJob created → both pods Running (2 real nodes, busybox, the torch-distributed shape), {report['runs']} "
        "runs each, alternating.",
        "",
        "| contender | median | min | max | runs (s) |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        values = report["pod_start"][name]
        lines.append(
            f"| {name} | {_median(values):.2f} s | {min(values):.2f} s | {max(values):.2f} s | "
            + ", ".join(f"{v:.2f}" for v in values)
            + " |"
        )
    if len(names) == 2:
        a, b = (_median(report["pod_start"][n]) for n in names)
        lines += ["", f"Ratio of medians {names[1]} / {names[0]}: {(b or 0) / (a or 1):.2f}"]
    torch = report.get("torch") or {}
    if any(torch.values()):
        lines += [
            "",
            "Real torch run (torchrun 2 nodes x 2 processes, gloo all-reduce; image imported before):",
            "",
            "| contender | created → pods Running (median) | created → Complete (median) | runs (s) |",
            "|---|---|---|---|",
        ]
        for name, rows in torch.items():
            lines.append(
                f"| {name} | {_median([r['running_s'] for r in rows]):.2f} s | "
                f"{_median([r['complete_s'] for r in rows]):.2f} s | "
                + ", ".join(f"{r['complete_s']:.1f}" for r in rows)
                + " |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="pod start runs per contender")
    parser.add_argument("--torch-runs", type=int, default=1, help="real torch runs per contender (0: none)")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--ours-only", action="store_true", help="skip upstream even when it is built")
    parser.add_argument("--keep-cluster", action="store_true")
    args = parser.parse_args()
    contenders = cluster_bench.contenders_for(args.ours_only, "--ours-only, or `make tools-upstream` has not built it")
    logs = cluster_bench.bench_logs()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report: dict[str, Any] = {
        "stamp": stamp,
        "runs": args.runs,
        "machine": cluster_bench.machine().replace(", JobSet controller stopped", ", JobSet controller running")
        + "; 2 real nodes (kubelet, containerd 2, runc) on this machine",
        "load_before": cluster_bench.load_average(),
    }
    try:
        say("starting a control plane with 2 real nodes in " + os.environ["TRAINJOB_CLUSTER_DIR"])
        info = cluster.up(real_nodes=2)
        info.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
        cluster_bench.wait(lambda: cluster.crds_established(info, "trainer.kubeflow.org", 3), "our CRDs", 60)
        info.kubectl("create", "namespace", NAMESPACE)
        cluster_bench.wait(
            lambda: info.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
            "the default ServiceAccount",
            60,
        )
        # grace 1: a deleted run's `sleep` (PID 1 ignores SIGTERM) is killed at once, the next run starts on idle nodes
        runtime = busybox_runtime("busybox-real", grace=1)
        info.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(runtime))
        images.ensure(["busybox"])
        report["pod_start"] = pod_start_runs(info, contenders, args.runs, logs)
        if args.torch_runs:
            report["torch"] = torch_runs(info, contenders, args.torch_runs, logs)
        report["load_after"] = cluster_bench.load_average()
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        base = out / f"realnode-{stamp}"
        base.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        text = markdown(report)
        base.with_suffix(".md").write_text(text)
        print(text)
        return 0
    finally:
        if not args.keep_cluster:
            cluster.down()


if __name__ == "__main__":
    sys.exit(main())
