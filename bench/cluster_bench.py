"""Operator benchmarks on the local control plane: ceiling, burst, status latency and steady state, for our
operator and (when built) upstream Kubeflow Trainer v2.3, alternating runs, medians, side by side.

  python bench/cluster_bench.py --smoke            # N = 50, ours only, one run: keeps the harness alive in CI
  python bench/cluster_bench.py                    # the full run (make bench): N = 1000 and 5000, 3 runs each,
                                                   # then Kueue admission at N = 1000 on a cluster with Kueue
  python bench/cluster_bench.py --kueue-only --kueue-sizes 100   # only the Kueue admission section
  python bench/cluster_bench.py --running-only --running 5000    # only N running TrainJobs with their pods:
                                                   # restarts and a pod burst, each contender in turn
  python bench/cluster_bench.py --baseline-tree /tmp/bench-before  # and the operator of another checkout too

--baseline-tree DIR adds a further contender, "before": the operator of another checkout of this repository (say
`git worktree add /tmp/bench-before <commit>`, then `make install` there for its own .venv), run from that tree
with its venv, alternating with ours and upstream; its medians print beside ours, and so do the ours/before ratios.

The JobSet controller is stopped for the runs so JobSets stay inert: the numbers are the operators' own.
Results: bench/results/cluster-<stamp>.json and .md, printed as tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
os.environ.setdefault("TRAINJOB_CLUSTER_DIR", "/tmp/tjo-bench")
os.environ.setdefault("TRAINJOB_CLUSTER_NAME", "tjo-bench")
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "hack"))
sys.path.insert(0, str(BENCH))

import kueue_shapes  # noqa: E402
from loadgen import programs_cpu  # noqa: E402

from harness import cluster  # noqa: E402
from trainjob_operator.runtime.split import split_for  # noqa: E402

TORCH_RUNTIME = json.loads((BENCH / "runtime.json").read_text())
WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE")


def say(text: str) -> None:
    print(f"bench: {text}", flush=True)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Settings:
    name: str
    qps: float | None = None
    burst: int | None = None
    concurrency: int | None = None
    pinned: bool = False
    """The contender pinned to one core (taskset) beside a busy neighbour on that core."""
    streaming_lists: str | None = None
    """Ours only: the `client.streaming_lists` setting ("off": paged LISTs, the way before streaming lists)."""
    status_server: bool = True
    """Ours only: the progress status server (on by default, docs/compatibility.md D8). Off, ours runs with
    upstream's feature defaults: its TrainJobStatus gate is off, so upstream makes no `<tj>-tls-config` ConfigMap and
    injects no status env or token volume."""


DEFAULTS = Settings("defaults")
EQUAL = Settings("equal (qps 100, burst 200, 5 workers)", qps=100, burst=200, concurrency=5)
PINNED = Settings("defaults, one core shared with a busy neighbour", pinned=True)
PAGED = Settings("defaults, streaming lists off (paged LISTs)", streaming_lists="off")
GATES = Settings(
    "upstream's feature defaults (ours: status server off, as upstream's TrainJobStatus gate)", status_server=False
)
CEILING_CONCURRENCY = (16, 64, 256)


class Neighbour:
    """A busy loop pinned to core 0, and the contender's threads pinned there too: CPU is scarce, both alike."""

    def __init__(self, pid: int) -> None:
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True, capture_output=True)
        self.proc = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@dataclass
class Process:
    proc: subprocess.Popen[bytes]
    metrics_url: str
    reconcile_metric: str

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def own_requests(self) -> dict[str, float]:
        """The requests the process counted itself, by "VERB resource" (ours: `trainjob_operator_api_requests_total`;
        empty for a process without that metric, upstream's): beside the API server's count of every client's."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return {}
        counted = kueue_shapes.counters(text, "trainjob_operator_api_requests_total", ("verb", "resource"))
        return {f"{verb} {resource}": value for (verb, resource), value in counted.items()}

    def reconciles(self) -> float:
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return 0.0
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(self.reconcile_metric) and not line.startswith("#")
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Contender:
    name: str
    start: Callable[[cluster.ClusterInfo, Settings, Path], Process]


def operator_starter(name: str, python: Path, tree: Path) -> Callable[[cluster.ClusterInfo, Settings, Path], Process]:
    """Starts the operator of the checkout `tree` with the interpreter `python` (its venv): ours, or a baseline."""

    def start(info: cluster.ClusterInfo, settings: Settings, logs: Path) -> Process:
        return start_operator(name, python, tree, info, settings, logs)

    return start


def start_operator(
    name: str, python: Path, tree: Path, info: cluster.ClusterInfo, settings: Settings, logs: Path
) -> Process:
    port = free_port()
    config: dict[str, Any] = {
        "log_format": "json",
        "log_level": "WARNING",
        "health": {"port": port},
        # on (the default) but on a port of its own: another operator on the machine may hold the default 10443
        "status_server": {"port": free_port()} if settings.status_server else {"enabled": False},
        "webhook": {"enabled": False},
        "leader_election": {"enabled": False},
    }
    if settings.qps is not None:
        config["client"] = {"qps": settings.qps, "burst": settings.burst}
    if settings.concurrency is not None:
        config["concurrency"] = settings.concurrency
    if settings.streaming_lists is not None:
        config.setdefault("client", {})["streaming_lists"] = settings.streaming_lists
    path = logs / f"{name}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [
            str(python),
            "-m",
            "trainjob_operator.cli",
            "run",
            "--kubeconfig",
            str(info.kubeconfig),
            "--config",
            str(path),
        ],
        stdout=(logs / f"{name}.log").open("ab"),
        stderr=subprocess.STDOUT,
        cwd=tree,
    )
    process = Process(proc, f"http://127.0.0.1:{port}/metrics", "trainjob_operator_reconcile_duration_seconds_count")
    wait(lambda: http_ok(f"http://127.0.0.1:{port}/readyz"), f"{name} ready", 300, proc)
    return process


start_ours = operator_starter("ours", Path(sys.executable), REPO)


BASELINE = "before"
"""The contender of --baseline-tree: the operator of another checkout, shown beside ours with ours/before ratios."""


def baseline_python(tree: Path) -> Path:
    """The interpreter of the checkout `tree`'s own venv; a one-line SystemExit naming the option when `tree` is no
    installed checkout of this repository."""
    if not (tree / "src" / "trainjob_operator").is_dir():
        raise SystemExit(
            f"bench: --baseline-tree {str(tree)!r}: no src/trainjob_operator there (a checkout of this repo?)"
        )
    python = tree / ".venv" / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"bench: --baseline-tree {str(tree)!r}: no .venv/bin/python there (run `make install` in it)")
    return python


def tree_commit(tree: Path) -> str:
    """The commit checked out in `tree` (with `+dirty` when it has changes), for the report."""
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True)
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def upstream_contender() -> Contender | None:
    """Upstream's controller, when hack/harness has built it and knows how to start it."""
    sys.path.insert(0, str(REPO / "hack"))
    try:
        from harness import upstream_run  # type: ignore[import-not-found]
    except ImportError:
        return None
    if not upstream_run.available():
        return None

    def start(info: cluster.ClusterInfo, settings: Settings, logs: Path) -> Process:
        port = free_port()
        proc = upstream_run.start(
            info, metrics_port=port, qps=settings.qps, burst=settings.burst, concurrency=settings.concurrency, logs=logs
        )
        process = Process(
            proc,
            f"http://127.0.0.1:{port}/metrics",
            'controller_runtime_reconcile_total{controller="trainjob_controller"',
        )
        wait(lambda: upstream_run.ready(info, proc), "upstream ready", 120, proc)
        return process

    return Contender("upstream", start)


def contenders_for(skip_upstream: bool, why_not: str, baseline: Path | None = None) -> list[Contender]:
    """Ours, the baseline checkout's operator when given, and upstream unless skipped or not built (saying so, with
    `why_not`): the order in which each run alternates them."""
    contenders = [Contender("ours", start_ours)]
    if baseline is not None:
        contenders.append(Contender(BASELINE, operator_starter(BASELINE, baseline_python(baseline), baseline)))
    upstream = None if skip_upstream else upstream_contender()
    if upstream is not None:
        contenders.append(upstream)
    else:
        say(f"upstream is not part of this run ({why_not})")
    return contenders


def bench_logs() -> Path:
    """The contenders' logs, beside the benchmark's cluster."""
    logs = Path(os.environ["TRAINJOB_CLUSTER_DIR"]) / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    return logs


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def wait(fn: Callable[[], bool], what: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"bench: {what}: the process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}")
        time.sleep(0.25)


def apiserver_requests(info: cluster.ClusterInfo) -> dict[tuple[str, str], float]:
    """apiserver_request_total summed by (verb, resource), from the API server's own metrics."""
    text = info.kubectl("get", "--raw", "/metrics", timeout=60).stdout
    return {
        (verb, resource): v
        for (verb, resource), v in kueue_shapes.counters(text, "apiserver_request_total", ("verb", "resource")).items()
    }


def apiserver_requests_by_subresource(info: cluster.ClusterInfo) -> dict[str, float]:
    """apiserver_request_total summed by "VERB resource[/subresource]" (every client's; a huge section's column
    runs alone on its control plane, so the columns' differences are their contenders')."""
    text = info.kubectl("get", "--raw", "/metrics", timeout=60).stdout
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_terminated_watchers_total{"):  # a watcher too slow to read its events
            labels_text, value = line[len("apiserver_terminated_watchers_total{") :].rsplit("} ", 1)
            labels = {
                k: v.strip('"') for k, v in (part.split("=", 1) for part in labels_text.split(",") if "=" in part)
            }
            key = f"watches closed as unresponsive: {labels.get('resource', '')}"
            totals[key] = totals.get(key, 0.0) + float(value)
            continue
        sent = next((what for prefix, what in WATCH_SENT if line.startswith(prefix + "{")), None)
        if sent is not None:  # what the API server sent its watchers, every watcher's, by kind
            labels_text, value = line.split("{", 1)[1].rsplit("} ", 1)
            labels = {
                k: v.strip('"') for k, v in (part.split("=", 1) for part in labels_text.split(",") if "=" in part)
            }
            key = f"{sent}: {labels.get('kind', labels.get('resource', ''))}"
            totals[key] = totals.get(key, 0.0) + float(value)
            continue
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = {k: v.strip('"') for k, v in (part.split("=", 1) for part in labels_text.split(",") if "=" in part)}
        sub = labels.get("subresource", "")
        key = f"{labels.get('verb', '')} {labels.get('resource', '')}{'/' + sub if sub else ''}"
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


WATCH_SENT = (
    ("apiserver_watch_events_total", "watch events sent"),
    ("apiserver_watch_events_sizes_sum", "watch event bytes sent"),
)


def request_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The requests counted between two readings, largest first (the API server counts a WATCH when it ends: the
    watches that ended, not events)."""
    counts = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return dict(sorted(((k, v) for k, v in counts.items() if v > 0), key=lambda kv: -kv[1]))


CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller", "jobset")


def control_plane_cpu() -> dict[str, float]:
    """CPU seconds (user + system) so far of this control plane's processes, by program (those whose command line
    names the cluster's directory)."""
    return programs_cpu(os.environ["TRAINJOB_CLUSTER_DIR"].encode(), CONTROL_PLANE)


def loadgen(
    info: cluster.ClusterInfo,
    mode: str,
    namespace: str,
    n: int = 0,
    concurrency: int = 64,
    extra: tuple[str, ...] = (),
    timeout: float = 3600,
    during: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Runs a load generator's mode and returns its JSON; `during`: called about ten times a second while it runs
    (to sample a process's CPU beside it)."""
    argv = [
        sys.executable,
        str(BENCH / "loadgen.py"),
        mode,
        "--kubeconfig",
        str(info.kubeconfig),
        "--namespace",
        namespace,
        "--n",
        str(n),
        "--concurrency",
        str(concurrency),
        *extra,
    ]
    if during is None:
        stdout = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=timeout).stdout
    else:
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
            deadline = time.monotonic() + timeout
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise SystemExit(f"bench: loadgen {mode} ran past {timeout:.0f} s")
                during()
                time.sleep(0.1)
            stdout = proc.communicate()[0]
            if proc.returncode:
                raise subprocess.CalledProcessError(proc.returncode, argv, stdout)
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def namespace(info: cluster.ClusterInfo, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    info.kubectl("create", "namespace", name)
    return name


def drop_namespace(info: cluster.ClusterInfo, name: str, n: int = 0) -> None:
    """Delete a namespace and wait for it to go (`n` objects of each kind in it: 600 s, or 20 ms per object)."""
    wait_s = max(600, n // 50)
    info.kubectl("delete", "namespace", name, "--wait=true", f"--timeout={wait_s}s", check=False, timeout=wait_s + 100)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


OPERATOR_RESOURCES = frozenset({"jobsets", "configmaps", "secrets", "podgroups", "events", "trainjobs"})


def per_trainjob(
    before: dict[tuple[str, str], float],
    after: dict[tuple[str, str], float],
    n: int,
    resources: frozenset[str] = OPERATOR_RESOURCES,
) -> dict[str, float]:
    """The requests per TrainJob by verb and resource (the operator's, and Kueue's too on a cluster with Kueue);
    the load generator's own TrainJob creates are removed."""
    verbs: dict[str, float] = {}
    for (verb, resource), value in after.items():
        if resource in resources and verb not in ("WATCH", "LIST"):
            delta = value - before.get((verb, resource), 0.0)
            if verb == "POST" and resource == "trainjobs":
                delta -= n
            verbs[f"{verb} {resource}"] = verbs.get(f"{verb} {resource}", 0.0) + delta
    return {verb: round(value / n, 2) for verb, value in sorted(verbs.items()) if value > 0}


OPERATOR_WRITES = ("jobsets", "configmaps", "secrets", "podgroups", "events", "trainjobs")
"""What the operator writes (the control plane's own lease and endpoint writes are not counted)."""
STEADY_WINDOW_S = 60.0
STEADY_SETTLE_S = 15.0


def steady_burst_timeout(n: int) -> float:
    """The unmeasured burst's bound on its wait for the JobSets: 900 s, or 60 ms per TrainJob (upstream made about
    48 JobSets per second at 5,000; 50,000 would overrun a fixed 900 s and leave JobSets for the first restart)."""
    return max(900.0, n * 0.06)


def steady_resync_timeout(n: int) -> float:
    """A restart's bound on its resync: 900 s, or 30 ms per TrainJob."""
    return max(900.0, n * 0.03)


def steady_state(
    info: cluster.ClusterInfo,
    contender: Contender,
    settings: Settings,
    n: int,
    logs: Path,
    then: Callable[[Process], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """With `n` TrainJobs present: a fresh process's time to resync them all, then its idle memory and CPU; `then`
    measures more with the same process before it stops (its figures join the result)."""
    before = apiserver_requests(info)
    started = time.monotonic()  # from the process's start: a restart's resync includes starting up
    process = contender.start(info, settings, logs)
    try:
        wait(
            lambda: process.reconciles() >= n,
            f"{contender.name} resyncing {n} TrainJobs",
            steady_resync_timeout(n),
            process.proc,
        )
        resync = time.monotonic() - started
        resync_cpu = process.cpu_seconds()
        requests = resync_requests(before, apiserver_requests(info))
        own = process.own_requests()
        time.sleep(STEADY_SETTLE_S)  # one-off work after a resync (idle workers exiting, a heap trim) is not idle
        cpu_before = process.cpu_seconds()
        time.sleep(STEADY_WINDOW_S)  # the measurement window itself, not a synchronisation
        result = {
            "resync_s": resync,
            "idle_cpu_s_per_min": (process.cpu_seconds() - cpu_before) * 60 / STEADY_WINDOW_S,
            "idle_rss_mib": process.rss_mib(),
            "peak_rss_mib": process.peak_rss_mib(),
            "resync_writes": float(
                sum(
                    v
                    for k, v in requests.items()
                    if k.split()[0] in (*WRITE_VERBS, "APPLY") and k.split()[-1] in OPERATOR_WRITES
                )
            ),
            "resync_lists": float(sum(v for k, v in requests.items() if k.startswith("LIST "))),
            "resync_gets": float(sum(v for k, v in requests.items() if k.startswith("GET "))),
            "resync_own_gets": float(sum(v for k, v in own.items() if k.startswith("GET "))) if own else None,
            "resync_cpu_s": resync_cpu,
            "load_average": load_average(),
        }
        say(
            f"steady state, {n} TrainJobs, {contender.name}: "
            + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items())
            + f"; API requests during the resync: {requests}"
        )
        result["resync_requests"] = requests
        result["resync_own_requests"] = own
        if then is not None:
            result.update(then(process))
        return result
    finally:
        process.stop()


def resync_requests(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict[str, float]:
    """Every request the API server counted between two readings, by verb and resource (the restarted operator's
    initial listings, reads and writes; nothing else runs during a steady-state measurement)."""
    counts = {
        f"{verb} {resource}": value - before.get((verb, resource), 0.0) for (verb, resource), value in after.items()
    }
    return {k: v for k, v in sorted(counts.items()) if v > 0 and k.split()[0] not in ("WATCH",)}


def steady_medians(steadies: list[dict[str, Any]]) -> dict[str, float]:
    """The median of each measured number of some steady-state runs; what is not a number (the load average, the
    requests by verb) stays in the runs themselves."""
    return {k: statistics.median(s[k] for s in steadies) for k, v in steadies[0].items() if isinstance(v, float)}


def steady_only(
    info: cluster.ClusterInfo,
    contender: Contender,
    n: int,
    runs: int,
    logs: Path,
    paged: bool = True,
    drop: bool = True,
) -> dict[str, Any]:
    """`n` TrainJobs created by one burst of `contender` (not measured), then `runs` restarts over them (ours: each
    restart also with paged LISTs unless not `paged`). Without `drop` the namespace stays (the last contender's,
    when the control plane goes down next anyway)."""
    ns = namespace(info, f"steady-{contender.name}")
    process = contender.start(info, DEFAULTS, logs)
    try:
        say(f"steady-only: {contender.name} creating {n} TrainJobs (unmeasured burst); {load_average()}")
        started = time.monotonic()
        bound = steady_burst_timeout(n)
        result = loadgen(info, "trainjobs", ns, n, extra=("--timeout", str(bound)), timeout=bound + 600)
        say(
            f"steady-only: {n} TrainJobs and {result['jobsets']} JobSets created by {contender.name} in "
            f"{time.monotonic() - started:.0f} s; {load_average()}"
        )
        if result["jobsets"] < n:
            raise SystemExit(f"bench: {contender.name} made {result['jobsets']} of {n} JobSets within {bound:.0f} s")
        process.stop()
        out: dict[str, Any] = {"burst_s": time.monotonic() - started}
        # ours: the same restarts with paged LISTs too, alternating, so the streaming lists' gain is in one run
        both = contender.name == "ours" and paged
        variants = {"steady": DEFAULTS, "steady_paged": PAGED} if both else {"steady": DEFAULTS}
        measured: dict[str, list[dict[str, Any]]] = {key: [] for key in variants}
        for r in range(runs):
            for key, settings in variants.items():
                say(f"steady-only: {contender.name} restart {r + 1} of {runs} ({key}); {load_average()}")
                measured[key].append(steady_state(info, contender, settings, n, logs))
        for key, steadies in measured.items():
            out[key] = steady_medians(steadies)
            out[f"{key}_runs"] = steadies
        return out
    finally:
        process.stop()
        if drop:
            say(f"steady-only: deleting the namespace of {contender.name}")
            drop_namespace(info, ns, n)


def burst_run(
    info: cluster.ClusterInfo, contender: Contender, settings: Settings, n: int, logs: Path, steady: bool = False
) -> dict[str, Any]:
    ns = namespace(info, f"burst-{contender.name}")
    process = contender.start(info, settings, logs)
    neighbour = Neighbour(process.proc.pid) if settings.pinned else None
    try:
        cpu_before = process.cpu_seconds()
        before = apiserver_requests(info)
        result = loadgen(info, "trainjobs", ns, n)
        after = apiserver_requests(info)
        lat = result.pop("latencies")
        out = {
            "n": n,
            "jobsets": result["jobsets"],
            "all_jobsets_s": result["all_jobsets_seconds"],
            "trainjobs_per_s": n / result["all_jobsets_seconds"] if result["all_jobsets_seconds"] else None,
            "p50_ms": percentile(lat, 50) * 1000,
            "p95_ms": percentile(lat, 95) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            "cpu_s": process.cpu_seconds() - cpu_before,
            "peak_rss_mib": process.peak_rss_mib(),
            "requests_per_trainjob": per_trainjob(before, after, n),
            "probe_p99_ms": (result.get("probe_p99_s") or 0) * 1000,
            "probe_errors": result.get("probe_errors"),
        }
        if neighbour is not None:
            neighbour.stop()
            neighbour = None
        if n <= 1000 and settings is DEFAULTS:
            status = loadgen(info, "complete", ns)
            slat = status.pop("latencies")
            out["status"] = {
                "n": status["n"],
                "complete": status["complete"],
                "all_complete_s": status["all_complete_seconds"],
                "p50_ms": percentile(slat, 50) * 1000,
                "p99_ms": percentile(slat, 99) * 1000,
            }
        process.stop()
        if steady:
            out["steady"] = steady_state(info, contender, settings, n, logs)
        return out
    finally:
        if neighbour is not None:
            neighbour.stop()
        process.stop()
        drop_namespace(info, ns)


def ceiling_run(info: cluster.ClusterInfo, n: int, concurrency: int) -> dict[str, Any]:
    """No operator: the load generator creates the TrainJobs and does the operator's writes itself."""
    ns = namespace(info, "ceiling")
    try:
        result = loadgen(info, "ceiling", ns, n, concurrency)
        lat = result.pop("latencies")
        return {
            "n": n,
            "concurrency": concurrency,
            "jobsets": result["jobsets"],
            "all_jobsets_s": result["all_jobsets_seconds"],
            "trainjobs_per_s": n / result["all_jobsets_seconds"] if result["all_jobsets_seconds"] else None,
            "p50_ms": percentile(lat, 50) * 1000,
            "p95_ms": percentile(lat, 95) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            "probe_p99_ms": (result.get("probe_p99_s") or 0) * 1000,
            "probe_errors": result.get("probe_errors"),
        }
    finally:
        drop_namespace(info, ns)


def best_concurrency(info: cluster.ClusterInfo, n: int) -> int:
    """The ceiling's concurrency: the fastest of a few, on up to 1,000 TrainJobs."""
    times = {}
    for concurrency in CEILING_CONCURRENCY:
        times[concurrency] = ceiling_run(info, min(n, 1000), concurrency)["all_jobsets_s"]
        say(f"ceiling probe: concurrency {concurrency}: {times[concurrency]:.1f}s for {min(n, 1000)} TrainJobs")
    return min(times, key=lambda k: times[k])


KUEUE_WAVE_MAX = 200


def kueue_wave(n: int, wave: int | None) -> int:
    """TrainJobs admitted per wave: five waves, of at most 200, unless told."""
    return wave or max(1, min(KUEUE_WAVE_MAX, n // 5))


def kueue_run(info: cluster.ClusterInfo, contender: Contender, n: int, wave: int, logs: Path) -> dict[str, Any]:
    """Kueue admission (defaults): `n` queued TrainJobs, admitted `wave` at a time by raising the ClusterQueue's
    quota; per TrainJob, Kueue's unsuspend of it to its JobSet unsuspended (see loadgen.py kueue)."""
    ns = namespace(info, f"kueue-{contender.name}")
    process = contender.start(info, DEFAULTS, logs)
    try:
        before = apiserver_requests(info)
        result = loadgen(info, "kueue", ns, n, extra=("--wave", str(wave), "--operator-pid", str(process.proc.pid)))
        after = apiserver_requests(info)
        lat = result["latencies"]
        return {
            "n": n,
            "wave": wave,
            "unsuspended": result["unsuspended"],
            "p50_ms": percentile(lat, 50) * 1000,
            "p95_ms": percentile(lat, 95) * 1000,
            "p99_ms": percentile(lat, 99) * 1000,
            "max_ms": max(lat) * 1000 if lat else None,
            "wave_s": statistics.median(result["wave_seconds"]),
            "admission_s": result["admission_seconds"],
            "queued_s": result["queued_seconds"],
            "cpu_s": result["operator_cpu_seconds"],
            "requests_per_trainjob": per_trainjob(before, after, n, OPERATOR_RESOURCES | {"workloads"}),
        }
    finally:
        process.stop()
        drop_namespace(info, ns)
        info.kubectl("delete", "clusterqueue", ns, "--ignore-not-found", "--wait=false", check=False)


def kueue_section(
    info: cluster.ClusterInfo, contenders: list[Contender], sizes: list[int], wave: int | None, runs: int, logs: Path
) -> list[dict[str, Any]]:
    """Kueue admission at each size, contenders alternating run by run; medians."""
    scenarios = []
    for n in sizes:
        results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
        for r in range(runs):
            for contender in contenders:
                result = kueue_run(info, contender, n, kueue_wave(n, wave), logs)
                results[contender.name].append(result)
                say(
                    f"Kueue N={n} waves of {result['wave']} {contender.name} run {r + 1}: unsuspend→JobSet p50 "
                    f"{result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms, wave {result['wave_s']:.1f}s, "
                    f"CPU {result['cpu_s']:.1f}s, {result['unsuspended']}/{n} unsuspended, "
                    f"{result['requests_per_trainjob']}"
                )
        scenario: dict[str, Any] = {"n": n, "wave": kueue_wave(n, wave)}
        for name, runs_of in results.items():
            scenario[name] = {key: median_of(runs_of, key) for key, _ in KUEUE_ROWS}
            scenario[name]["requests_per_trainjob"] = runs_of[-1]["requests_per_trainjob"]
        scenarios.append(scenario)
    return scenarios


def prepare(info: cluster.ClusterInfo) -> None:
    """Our CRDs and the torch runtime; the JobSet controller and its webhooks stopped so JobSets stay inert (Kueue's
    webhooks, when it runs, stay: they suspend queued TrainJobs)."""
    jobset = info.controllers.get("jobset")
    if jobset:
        cluster.stop_controller("jobset", jobset)
    for kind, name in info.webhook_configurations:
        if not name.startswith("kueue-"):
            info.kubectl("delete", kind, name, "--ignore-not-found", check=False)
    info.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    wait(lambda: cluster.crds_established(info, "trainer.kubeflow.org", 3), "our CRDs established", 60)
    info.kubectl("apply", "-f", "-", input=json.dumps(TORCH_RUNTIME))


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


BURST_ROWS = (
    ("all_jobsets_s", "time to all JobSets (s)"),
    ("trainjobs_per_s", "TrainJobs/s"),
    ("p50_ms", "create→JobSet p50 (ms)"),
    ("p95_ms", "p95 (ms)"),
    ("p99_ms", "p99 (ms)"),
    ("probe_p99_ms", "probe client p99 during the burst (ms)"),
    ("cpu_s", "operator CPU (s)"),
    ("peak_rss_mib", "peak RSS (MiB)"),
)


KUEUE_ROWS = (
    ("p50_ms", "Kueue's unsuspend→JobSet unsuspended p50 (ms)"),
    ("p95_ms", "p95 (ms)"),
    ("p99_ms", "p99 (ms)"),
    ("max_ms", "max (ms)"),
    ("wave_s", "a wave: quota raised→its last JobSet unsuspended, median (s)"),
    ("admission_s", "all waves (s)"),
    ("cpu_s", "operator CPU during the waves (s)"),
    ("queued_s", "before the waves: N TrainJobs created→N suspended JobSets and Workloads (s)"),
)


STEADY_ROWS = (
    ("resync_s", "resync after restart (s)"),
    ("idle_rss_mib", "idle RSS (MiB)"),
    ("peak_rss_mib", "peak RSS during resync (MiB)"),
    ("idle_cpu_s_per_min", "idle CPU (s per minute)"),
    ("resync_writes", "API writes during the resync"),
)


STATUS_ROWS = (
    ("all_complete_s", "all TrainJobs Complete (s)"),
    ("p50_ms", "Completed→Complete p50 (ms)"),
    ("p99_ms", "p99 (ms)"),
)


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and a and b else "-"


def contender_columns(report: dict[str, Any]) -> list[str]:
    """The contenders' columns, ours first, the baseline's ("before") beside it when the run had one."""
    return ["ours", BASELINE, "upstream"] if report.get("baseline") else ["ours", "upstream"]


def compare_table(
    rows: Sequence[tuple[str, str]],
    values: Mapping[str, Mapping[str, Any]],
    columns: Sequence[str],
    extra: tuple[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """A markdown table: a row per (key, label); a column per name in `columns` (its medians in `values`), then
    ours/<name> for each further column, then the `extra` column (heading, values) when given."""
    ours, others = columns[0], columns[1:]
    heads = [*columns, *(f"{ours}/{other}" for other in others), *([extra[0]] if extra else [])]
    lines = ["| metric | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for key, label in rows:
        mine = values.get(ours, {}).get(key)
        cells = [_fmt(values.get(name, {}).get(key)) for name in columns]
        cells += [_ratio(mine, values.get(other, {}).get(key)) for other in others]
        cells += [_fmt(extra[1].get(key))] if extra else []
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def requests_row(label: str, values: Mapping[str, Mapping[str, Any]], contenders: Sequence[str], blanks: int) -> str:
    """The row of API requests per TrainJob (a dict per contender, '-' for none), `blanks` empty cells after it."""
    cells = [str(values.get(name, {}).get("requests_per_trainjob", "-")) for name in contenders]
    return f"| {label} | " + " | ".join(cells) + " |" + " |" * blanks


def markdown(report: dict[str, Any]) -> str:
    contenders = contender_columns(report)
    lines = [
        f"# Operator benchmarks ({report['stamp']})",
        "",
        f"Machine: {report['machine']}",
        "",
        f"Load average before/after the run: {report.get('load_before', '-')} / {report.get('load_after', '-')} "
        "(other work shared the machine: compare the columns of one table, not across runs)",
    ]
    if report.get("baseline"):
        baseline = report["baseline"]
        lines += [
            "",
            f"ours: this checkout at {baseline['ours_commit']}; before: the operator of {baseline['tree']} at "
            f"{baseline['commit']} (its own venv), alternating with ours run by run.",
        ]
    if report["burst"]:
        lines += [
            "",
            "Ceiling: no operator; the load generator creates the TrainJobs and does the operator's writes itself "
            "(snapshot ConfigMap create, status-server CA ConfigMap apply, JobSet apply; bodies from the operator's "
            "pipeline) at the best of "
            f"concurrency {', '.join(map(str, CEILING_CONCURRENCY))}.",
        ]
    for scenario in report["burst"]:
        if scenario["ours"].get("all_jobsets_s") is None:  # --steady-only
            continue
        ceiling = scenario.get("ceiling") or {}
        columns = [*contenders, "ceiling"]
        lines += [
            "",
            f"## Burst N={scenario['n']}, {scenario['settings']}"
            + (f" (ceiling at concurrency {ceiling.get('concurrency')})" if ceiling else ""),
            "",
            *compare_table(BURST_ROWS, {**scenario, "ceiling": ceiling}, columns),
            requests_row("API requests per TrainJob", scenario, contenders, 2 * len(columns) - 1 - len(contenders)),
        ]
    for scenario in report["burst"]:
        if "steady" not in scenario["ours"]:
            continue
        steady = {name: (scenario.get(name) or {}).get("steady", {}) for name in contenders}
        paged = scenario["ours"].get("steady_paged", {})
        lines += [
            "",
            f"## Steady state with {scenario['n']} TrainJobs present (defaults)",
            "",
            *compare_table(STEADY_ROWS, steady, contenders, ("ours, paged LISTs (`streaming_lists: off`)", paged)),
        ]
    if report.get("status"):
        lines += [
            "",
            f"## Status: N={report['status'].get('ours', {}).get('n')} JobSets marked Completed at once (defaults)",
            "",
            *compare_table(STATUS_ROWS, report["status"], contenders),
        ]
    for scenario in report.get("kueue", []):
        lines += [
            "",
            f"## Kueue admission: N={scenario['n']} queued TrainJobs admitted in waves of {scenario['wave']} (defaults)",
            "",
            "Kueue v0.19 as a local process with its webhooks; the TrainJobs (2 nodes of 1 CPU) created suspended "
            "behind a ClusterQueue with no quota, their JobSets created suspended, then the quota raised by one "
            "wave's worth at a time once the previous wave's JobSets are unsuspended. Times from the load "
            "generator's watches: the TrainJob seen with `spec.suspend: false` (Kueue's update, with its "
            "runtimePatches) to its JobSet seen with `spec.suspend` false.",
            "",
            *compare_table(KUEUE_ROWS, {name: scenario.get(name) or {} for name in contenders}, contenders),
            requests_row(
                "API requests per TrainJob, the operator's and Kueue's, whole run",
                {name: scenario.get(name) or {} for name in contenders},
                contenders,
                len(contenders) - 1,
            ),
        ]
    if report.get("huge"):
        lines += huge_markdown(report["huge"])
    if report.get("running"):
        lines += running_markdown(report["running"])
    return "\n".join(lines) + "\n"


SETTINGS = {"defaults": DEFAULTS, "equal": EQUAL, "pinned": PINNED, "gates": GATES}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine() -> str:
    """CPU model, cores, memory, Python and the control plane's versions: what the numbers were measured on."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or platform.machine(),
    )
    mem = next(
        (
            int(line.split()[1]) // 1024 // 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    return (
        f"{model}, {os.cpu_count()} cores, {mem} GiB, {platform.machine()}, Python {platform.python_version()}; "
        "kube-apiserver v1.36.3 + etcd v3.6.16 (local processes, loopback), operator and upstream v2.3.0 "
        "controller as local processes, webhooks and leader election off, JobSet controller stopped"
    )


def write(report: dict[str, Any], out: Path, stamp: str, smoke: bool) -> str:
    out.mkdir(parents=True, exist_ok=True)
    base = out / f"cluster-{'smoke-' if smoke else ''}{stamp}"
    base.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report) + kueue_shapes.markdown(report.get("kueue_shapes"))
    base.with_suffix(".md").write_text(text)
    return text


def burst_section(
    info: cluster.ClusterInfo,
    args: argparse.Namespace,
    contenders: list[Contender],
    sizes: list[int],
    runs: int,
    report: dict[str, Any],
    logs: Path,
) -> None:
    """Ceiling, burst, status and steady state at each size and setting; each scenario lands in `report["burst"]`
    and the partial report is written as soon as it does."""
    chosen = [SETTINGS[name] for name in args.settings.split(",")]
    if args.steady_only:
        n = max(sizes)
        restarts: dict[str, Any] = {"n": n, "settings": DEFAULTS.name}
        report["burst"].append(restarts)
        for i, contender in enumerate(contenders):
            last = i == len(contenders) - 1 and not args.keep_cluster
            restarts[contender.name] = steady_only(
                info, contender, n, runs, logs, paged=not args.steady_no_paged, drop=not last
            )
            report["load_after"] = load_average()
            write(report, args.out, report["stamp"], args.smoke)  # a partial report survives an interrupted run
        return
    for n in sizes:
        concurrency = (
            args.ceiling_concurrency
            if args.ceiling_concurrency is not None
            else (64 if args.smoke else best_concurrency(info, n))
        )
        for settings in [DEFAULTS] if args.smoke else chosen:
            results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
            ceilings: list[dict[str, Any]] = []
            for r in range(runs):
                if settings is not PINNED and concurrency:
                    ceilings.append(ceiling_run(info, n, concurrency))
                    say(
                        f"N={n} ceiling run {r + 1}: {ceilings[-1]['all_jobsets_s']:.1f}s, "
                        f"p99 {ceilings[-1]['p99_ms']:.0f} ms, probe p99 {ceilings[-1]['probe_p99_ms']:.0f} ms"
                    )
                for contender in contenders:  # alternate: ceiling, ours, upstream, ceiling, ...
                    steady = not args.smoke and n == max(sizes) and settings is DEFAULTS and not args.no_steady
                    result = burst_run(info, contender, settings, n, logs, steady)
                    results[contender.name].append(result)
                    say(
                        f"N={n} {settings.name} {contender.name} run {r + 1}: "
                        f"{result['all_jobsets_s']:.1f}s, p99 {result['p99_ms']:.0f} ms, probe p99 "
                        f"{result['probe_p99_ms']:.0f} ms, CPU {result['cpu_s']:.1f}s, "
                        f"{result['requests_per_trainjob']}"
                    )
            scenario: dict[str, Any] = {"n": n, "settings": settings.name}
            if ceilings:
                scenario["ceiling"] = {k: median_of(ceilings, k) for k in ceilings[0] if k != "probe_errors"}
            for name, runs_of in results.items():
                scenario[name] = {
                    k: median_of(runs_of, k)
                    for k in (
                        "all_jobsets_s",
                        "trainjobs_per_s",
                        "p50_ms",
                        "p95_ms",
                        "p99_ms",
                        "probe_p99_ms",
                        "cpu_s",
                        "peak_rss_mib",
                    )
                }
                scenario[name]["requests_per_trainjob"] = runs_of[-1]["requests_per_trainjob"]
                steadies = [x["steady"] for x in runs_of if x.get("steady")]
                if steadies:
                    scenario[name]["steady"] = steady_medians(steadies)
                statuses = [x["status"] for x in runs_of if x.get("status")]
                if statuses:
                    report.setdefault("status", {})[name] = {
                        k: statistics.median(s[k] for s in statuses if s[k] is not None) for k in statuses[0]
                    }
            report["burst"].append(scenario)
            report["load_after"] = load_average()
            write(report, args.out, report["stamp"], args.smoke)  # a partial report survives an interrupted run


HUGE_ROWS = (
    ("jobset_s", "created→JobSet (s)"),
    ("first_job_s", "created→first Job (s)"),
    ("first_pod_s", "created→first pod (s)"),
    ("last_pod_s", "created→last pod (s)"),
    ("all_running_s", "created→all pods Running (s)"),
    ("cpu_s", "operator CPU (s)"),
    ("jobs", "trainer Jobs"),
)
HUGE_WARMUP = 1000
"""Pods made and dropped before the first measured column. A fresh API server's watch cache is small, and so is each
watcher's buffer: in the first column on a new control plane (ours, in every run so far), our operator's pod
watch, slower to read a burst of pod events than the Go controllers, was closed as unresponsive 67-91 times and
resumed, and the resumes sent events again (issue 37, third session: 197 against 162 MB of pod events sent for
ours' later columns); the second column's contender saw 5 closes, the later columns none."""
HUGE_PODS_PER_NODE = 100
"""kwok nodes allow 110 pods each; the huge section makes one node per 100 pods, and two more."""


CUT_PREFIX = "ours-cut("


@dataclass(frozen=True)
class Cut:
    """A huge section's column: ours building the TrainJob annotated `max-nodes-per-job: bound`, its trainer cut
    into Jobs of at most `bound` pods by the operator (runtime/plugins/trainer_split.py)."""

    bound: int

    @property
    def name(self) -> str:
        return f"{CUT_PREFIX}{self.bound})"


HugeColumn = Contender | Cut | int | None
"""A huge section's column: a contender; ours building a cut TrainJob; the JobSet alone cut into that many Jobs;
None, the ceiling."""


def huge_columns(
    contenders: Sequence[Contender], nodes: int, splits: Sequence[int], bounds: Sequence[int]
) -> list[HugeColumn]:
    """One round's columns at numNodes `nodes`, in the order they run: ours; ours building the TrainJob cut at each
    bound that cuts `nodes` (`split_for`: a bound of `nodes` or more, or one with no equal cut, leaves one Job: ours
    again); the other contenders; the ceiling; the JobSet alone cut into each K of `splits` that divides `nodes`."""
    ours = [contender for contender in contenders if contender.name == "ours"]
    cuts = [Cut(bound) for bound in dict.fromkeys(bounds) if ours and split_for(nodes, bound).cut]
    others = [contender for contender in contenders if contender.name != "ours"]
    return [*ours, *cuts, *others, None, *(k for k in dict.fromkeys(splits) if nodes % k == 0)]


def huge_column_name(column: HugeColumn) -> str:
    if isinstance(column, int):
        return f"JobSet alone, {column} Job(s)"
    return column.name if column is not None else "ceiling"


def huge_column_order(names: Sequence[str]) -> list[str]:
    """A size's report columns: ours first (the ratios' numerator), ours cut, the baseline, upstream, the ceiling,
    then the JobSet alone's."""
    order = [
        "ours",
        *sorted((n for n in names if n.startswith(CUT_PREFIX)), key=lambda n: int(n[len(CUT_PREFIX) : -1])),
        BASELINE,
        "upstream",
        "ceiling",
    ]
    return [n for n in order if n in names] + [n for n in names if n.startswith("JobSet alone")]


def huge_run(
    info: cluster.ClusterInfo, contender: Contender | None, nodes: int, logs: Path, bound: int | None = None
) -> dict[str, Any]:
    """One TrainJob of `nodes` nodes, created→all its pods Running on kwok nodes, with the JobSet controller and
    the kube-controller-manager's Job controller at work; `bound`: the TrainJob annotated max-nodes-per-job (its
    trainer cut by the operator); `contender` None: the ceiling, the same trainer pods created directly by a client
    (64 at once), no TrainJob, JobSet or Job."""
    label = (contender.name if contender else "ceiling") + (f"-cut{bound}" if bound is not None else "")
    ns = namespace(info, f"huge-{label}")
    process = contender.start(info, DEFAULTS, logs) if contender is not None else None
    try:
        cpu_before = process.cpu_seconds() if process is not None else 0.0
        before = costs_now(info)
        extra = ("--timeout", "1800", *(("--max-nodes-per-job", str(bound)) if bound is not None else ()))
        out = loadgen(info, "huge" if contender is not None else "huge-ceiling", ns, nodes, 64, extra)
        if process is not None:
            out["cpu_s"] = process.cpu_seconds() - cpu_before
        out.update(costs_since(info, before))
        out["load"] = load_average()
        return out
    finally:
        if process is not None:
            process.stop()
        drop_huge_namespace(info, ns)


def drop_huge_namespace(info: cluster.ClusterInfo, name: str) -> None:
    """Delete a huge column's namespace, its pods at once: kwok's controller confirms each pod's graceful deletion
    at about 30 a second, so a namespace of 10,000 pods took 10 minutes to go (not measured, but between columns).
    Once the namespace is terminating no pod can be created in it (the Job controller cannot replace one), so its pods
    are deleted with no grace period, then the namespace is awaited as any other."""
    info.kubectl("delete", "namespace", name, "--wait=false", check=False)
    info.kubectl(
        "delete", "pods", "--all", "-n", name, "--grace-period=0", "--force", "--wait=false", check=False, timeout=600
    )
    drop_namespace(info, name)


def costs_now(info: cluster.ClusterInfo) -> tuple[dict[str, float], dict[str, float]]:
    return apiserver_requests_by_subresource(info), control_plane_cpu()


def costs_since(info: cluster.ClusterInfo, before: tuple[dict[str, float], dict[str, float]]) -> dict[str, Any]:
    """What a huge column cost the control plane: its requests by verb and resource, and each program's CPU."""
    requests, cpu = costs_now(info)
    return {
        "requests": request_delta(before[0], requests),
        "control_plane_cpu": {k: round(v - before[1].get(k, 0.0), 2) for k, v in sorted(cpu.items())},
    }


def huge_jobset_run(info: cluster.ClusterInfo, nodes: int, split: int) -> dict[str, Any]:
    """No operator: the TrainJob's JobSet created directly, its trainer cut into `split` Jobs (1: as built)."""
    ns = namespace(info, f"huge-js{split}")
    try:
        before = costs_now(info)
        out = loadgen(info, "huge-jobset", ns, nodes, 64, ("--timeout", "1800", "--split", str(split)))
        out.update(costs_since(info, before))
        out["load"] = load_average()
        return out
    finally:
        drop_huge_namespace(info, ns)


def controller_manager_args() -> str:
    """The kube-controller-manager's client settings as it runs (its QPS bounds the Job controller's pod creates)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"kube-controller-manager")
            and os.environ["TRAINJOB_CLUSTER_DIR"].encode() in b" ".join(argv)
        ):
            flags = [a.decode() for a in argv if a.startswith((b"--kube-api-", b"--concurrent-job"))]
            return " ".join(flags) or "defaults (--kube-api-qps 20, --kube-api-burst 30, --concurrent-job-syncs 5)"
    return "unknown"


def huge_section(
    contenders: list[Contender],
    sizes: list[int],
    runs: int,
    logs: Path,
    splits: Sequence[int] = (),
    checkpoint: Callable[[dict[str, Any]], None] = lambda _: None,
    bounds: Sequence[int] = (),
) -> dict[str, Any]:
    """Huge TrainJobs (issue 37, item 1): per size, ours, upstream (when built) and the ceiling alternate, `runs`
    times each, on a control plane of their own whose JobSet controller runs (the other sections stop it); `bounds`:
    also ours building the TrainJob annotated max-nodes-per-job B, its trainer cut by the operator; `splits`: also
    the JobSet alone, created directly with its trainer cut into that many Jobs (no operator)."""
    say(f"huge TrainJobs: numNodes {sizes}, {runs} run(s) each, on a control plane with the JobSet controller running")
    info = cluster.up(nodes=max(sizes) // HUGE_PODS_PER_NODE + 2)
    info.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    wait(lambda: cluster.crds_established(info, "trainer.kubeflow.org", 3), "our CRDs established", 60)
    info.kubectl("apply", "-f", "-", input=json.dumps(TORCH_RUNTIME))
    section: dict[str, Any] = {
        "sizes": sizes,
        "load_before": load_average(),
        "controller_manager": controller_manager_args(),
        "scenarios": [],
    }
    say(f"kube-controller-manager: {section['controller_manager']}")
    warm = min(min(sizes), HUGE_WARMUP)
    say(f"warm-up, not measured: the ceiling's {warm} pods")
    huge_run(info, None, warm, logs)
    for nodes in sizes:
        scenario: dict[str, Any] = {"n": nodes, "runs": {}}
        for _ in range(runs):
            for column in huge_columns(contenders, nodes, splits, bounds):
                name = huge_column_name(column)
                if isinstance(column, int):
                    result = huge_jobset_run(info, nodes, column)
                elif isinstance(column, Cut):
                    ours = next(contender for contender in contenders if contender.name == "ours")
                    result = huge_run(info, ours, nodes, logs, column.bound)
                else:
                    result = huge_run(info, column, nodes, logs)
                scenario["runs"].setdefault(name, []).append(result)
                checkpoint({**section, "scenarios": [*section["scenarios"], scenario], "load_after": load_average()})
                say(
                    f"huge {name} numNodes={nodes}: JobSet {_fmt(result.get('jobset_s'))}s, last pod "
                    f"{_fmt(result.get('last_pod_s'))}s, all Running {_fmt(result.get('all_running_s'))}s "
                    f"({result.get('running')}/{nodes}), operator CPU {_fmt(result.get('cpu_s'))}s (load {result['load']})"
                )
                say(f"  control plane CPU {result.get('control_plane_cpu')}")
                say(f"  requests {dict(list(result.get('requests', {}).items())[:12])}")
        scenario["medians"] = huge_medians(scenario["runs"])
        section["scenarios"].append(scenario)
    section["load_after"] = load_average()
    return section


def huge_medians(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    return {name: {key: median_of(results, key) for key, _ in HUGE_ROWS} for name, results in runs.items()}


def huge_markdown(section: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Huge TrainJobs: created→all pods Running on kwok nodes (medians)",
        "",
        "A control plane of its own, whose JobSet controller and kube-controller-manager run (unlike the bursts').",
        "",
        f"Load average before/after: {section['load_before']} / {section['load_after']}",
    ]
    if section.get("controller_manager"):
        lines += [f"kube-controller-manager client: {section['controller_manager']}"]
    for scenario in section["scenarios"]:
        medians = scenario.get("medians") or huge_medians(scenario["runs"])  # a checkpoint's: not computed yet
        columns = huge_column_order(list(medians))
        lines += ["", f"### numNodes {scenario['n']}", "", *compare_table(HUGE_ROWS, medians, columns)]
        lines += huge_cost_tables(scenario, columns)
    return lines


def huge_cost_tables(scenario: dict[str, Any], columns: Sequence[str]) -> list[str]:
    """Each run's figures and load, then the control plane's CPU by program and the API requests by verb and
    resource (medians over the runs; runs from before this was measured have neither)."""
    runs = scenario["runs"]
    lines = [
        "",
        "| column | run | created→last pod (s) | all Running (s) | operator CPU (s) | load after |",
        "|---" * 6 + "|",
    ]
    for name in columns:
        for i, r in enumerate(runs.get(name, []), 1):
            lines.append(
                f"| {name} | {i} | {_fmt(r.get('last_pod_s'))} | {_fmt(r.get('all_running_s'))} | "
                f"{_fmt(r.get('cpu_s'))} | {r.get('load', '-')} |"
            )
    measured = [n for n in columns if any("control_plane_cpu" in r for r in runs.get(n, []))]
    if not measured:
        return lines

    def med(name: str, field: str, key: str) -> float | None:
        values = [r[field].get(key, 0.0) for r in runs[name] if field in r]
        return statistics.median(values) if values else None

    programs = sorted({k for n in measured for r in runs[n] for k in r.get("control_plane_cpu", {})})
    lines += [
        "",
        "| control plane CPU (s), median | " + " | ".join(measured) + " |",
        "|---" * (len(measured) + 1) + "|",
    ]
    for program in programs:
        lines.append(
            f"| {program} | " + " | ".join(_fmt(med(n, "control_plane_cpu", program)) for n in measured) + " |"
        )
    keys = {k for n in measured for r in runs[n] for k in r.get("requests", {})}
    top = sorted(keys, key=lambda k: -max(med(n, "requests", k) or 0.0 for n in measured))[:20]
    lines += [
        "",
        "| API requests, median (top 20) | " + " | ".join(measured) + " |",
        "|---" * (len(measured) + 1) + "|",
    ]
    for key in top:
        lines.append(f"| {key} | " + " | ".join(f"{med(n, 'requests', key) or 0:.0f}" for n in measured) + " |")
    return lines


# --- 5,000 running TrainJobs with their pods (issue 37, item 2's second half) ---------------------------------------

RUNNING_QUIET_S = 2.0
"""A pod burst's work is over once the operator's CPU has not moved for this long after the last poke was seen."""
UNWATCHED_PODS = frozenset({"upstream"})
"""Contenders that watch no pods (upstream v2.3.0): a pod burst's CPU and RSS are reported for them, not its events."""
RUNNING_SETTLE_S = 5.0
"""Before the restarts: the first process's reconciles unchanged this long (the pods' states followed)."""


def work_end(samples: Sequence[tuple[float, float]], after: float) -> float | None:
    """From (time, CPU seconds so far) samples of a process: the time of the last sample after `after` whose CPU
    rose since the one before (one clock tick or more), i.e. when its work ended; None when it did none."""
    last = None
    for (_, before), (at, cpu) in itertools.pairwise(samples):
        if at > after and cpu > before:
            last = at
    return last


def spread(values: Sequence[float | None]) -> str:
    """The median of some runs' values with their range, "12.3 (11.0-14.0)"; "-" for none."""
    present = [v for v in values if isinstance(v, int | float)]
    if not present:
        return "-"
    median = statistics.median(present)
    if len(present) == 1:
        return _fmt(median)
    return f"{_fmt(median)} ({_fmt(min(present))}-{_fmt(max(present))})"


def pod_burst(
    info: cluster.ClusterInfo, ns: str, process: Process, value: str, pods: int, watches_pods: bool = True
) -> dict[str, Any]:
    """One annotation patch on each of the namespace's `pods` pods (one pod watch event each, nothing the operator
    keeps of a pod: no TrainJob queued), while the process's CPU is sampled; what it took the process to handle them
    (its last CPU tick after the first patch; not for a process that does not `watches_pods`, whose ticks are not the
    events'), and what the burst cost it and the API server."""
    samples: list[tuple[float, float]] = []

    def sample() -> None:
        samples.append((time.time(), process.cpu_seconds()))

    sample()
    reconciles = process.reconciles()
    before = costs_now(info)
    poked = loadgen(info, "poke", ns, pods, 64, ("--value", value, "--timeout", "600"), timeout=900, during=sample)
    first, seen = poked["first_patch_at"], poked["last_seen_at"] or poked["last_patch_at"]
    deadline = time.time() + 120
    while time.time() - max(seen, work_end(samples, first) or first) < RUNNING_QUIET_S and time.time() < deadline:
        sample()
        time.sleep(0.1)
    costs = costs_since(info, before)
    end = work_end(samples, first) if watches_pods else None
    handled = end - first if end is not None else None
    cpu = samples[-1][1] - samples[0][1]
    return {
        "burst_pods_poked": float(poked["seen"]),
        "burst_pod_events_seen": float(poked["events"]),
        "burst_patch_s": poked["last_patch_at"] - first,
        "burst_seen_s": seen - first,
        "burst_handled_s": handled,
        "burst_events_per_s": pods / handled if handled else None,
        "burst_lag_s": end - seen if end is not None else None,
        "burst_cpu_s": cpu,
        "burst_cpu_us_per_event": cpu / pods * 1e6 if pods else None,
        "burst_reconciles": process.reconciles() - reconciles,
        "burst_rss_mib": process.rss_mib(),
        "burst_peak_rss_mib": process.peak_rss_mib(),
        "burst_apiserver_cpu_s": costs["control_plane_cpu"].get("kube-apiserver"),
        "burst_watch_closed": costs["requests"].get("watches closed as unresponsive: pods", 0.0),
        "burst_load": load_average(),
    }


def wait_quiet(process: Process, quiet_s: float, timeout: float) -> None:
    """Until the process's reconcile count has not moved for `quiet_s` (or `timeout` passed)."""
    last, since, deadline = process.reconciles(), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.5)
        now = process.reconciles()
        if now != last:
            last, since = now, time.monotonic()


def running_contender(
    info: cluster.ClusterInfo, contender: Contender, n: int, runs: int, logs: Path, drop: bool
) -> dict[str, Any]:
    """`n` TrainJobs of one node made by `contender` (unmeasured), their JobSets' pods created Running on kwok nodes
    while it runs, then `runs` restarts as the steady state's, each followed by a pod burst with the same process."""
    ns = namespace(info, f"running-{contender.name}")
    process = contender.start(info, DEFAULTS, logs)
    try:
        bound = steady_burst_timeout(n)
        started = time.monotonic()
        made = loadgen(
            info, "trainjobs", ns, n, extra=("--timeout", str(bound), "--num-nodes", "1"), timeout=bound + 600
        )
        if made["jobsets"] < n:
            raise SystemExit(f"bench: {contender.name} made {made['jobsets']} of {n} JobSets within {bound:.0f} s")
        pods = loadgen(info, "pods", ns, n, 64, ("--timeout", "900"), timeout=1500)
        if pods["running"] < pods["pods"]:
            raise SystemExit(f"bench: {pods['running']} of {pods['pods']} pods Running within 900 s")
        say(
            f"running: {n} TrainJobs by {contender.name} in {made['all_jobsets_seconds']:.0f} s, their {pods['pods']} "
            f"pods Running in {pods['all_running_seconds']:.0f} s; {load_average()}"
        )
        wait_quiet(process, RUNNING_SETTLE_S, 600)
        process.stop()
        out: dict[str, Any] = {
            "setup_s": time.monotonic() - started,
            "pods": pods["pods"],
            "pods_running_s": pods["all_running_seconds"],
            "runs": [],
        }
        for r in range(runs):
            say(f"running: {contender.name} restart {r + 1} of {runs}; {load_average()}")

            def burst(proc: Process, value: str = f"{contender.name}-{r}") -> dict[str, Any]:
                return pod_burst(info, ns, proc, value, pods["pods"], contender.name not in UNWATCHED_PODS)

            out["runs"].append(steady_state(info, contender, DEFAULTS, n, logs, then=burst))
            say(
                f"running: {contender.name} restart {r + 1}: { ({k: v for k, v in out['runs'][-1].items() if k.startswith('burst')}) }"
            )
        return out
    finally:
        process.stop()
        if drop:
            say(f"running: deleting the namespace of {contender.name}")
            drop_namespace(info, ns, 3 * n)


def running_section(
    contenders: list[Contender], n: int, runs: int, logs: Path, checkpoint: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Issue 37, item 2's second half: `n` running TrainJobs with their pods on kwok nodes (JobSet controller
    stopped, so the JobSets stay as made; the pods are created as its Jobs' would be), restarts and pod bursts per
    contender in turn, on a control plane of its own with a node per 100 pods."""
    nodes = n // HUGE_PODS_PER_NODE + 2
    say(f"running TrainJobs: {n}, {runs} restart(s) per contender, {nodes} kwok nodes")
    info = cluster.up(nodes=nodes)
    prepare(info)
    section: dict[str, Any] = {"n": n, "nodes": nodes, "load_before": load_average()}
    for i, contender in enumerate(contenders):
        section[contender.name] = running_contender(info, contender, n, runs, logs, drop=i < len(contenders) - 1)
        section["load_after"] = load_average()
        checkpoint(section)
    return section


RUNNING_ROWS = (
    ("resync_s", "restart: process start → every TrainJob reconciled (s)"),
    ("resync_cpu_s", "CPU from the process start to the resync (s)"),
    ("peak_rss_mib", "peak RSS, start to idle (MiB)"),
    ("idle_rss_mib", "idle RSS (MiB)"),
    ("idle_cpu_s_per_min", "idle CPU (s per minute, after a 15 s settle)"),
    ("resync_lists", "LIST requests during the resync, every client's"),
    ("resync_gets", "GET requests during the resync, every client's"),
    ("resync_own_gets", "GET requests the operator counted itself (ours only: its client's metric)"),
    ("resync_writes", "writes to the operator's kinds during the resync"),
    ("burst_patch_s", "pod burst: first patch → last patch acknowledged (s)"),
    ("burst_seen_s", "first patch → last event seen by a plain client's watch (s)"),
    ("burst_handled_s", "first patch → the operator's last CPU tick (s)"),
    ("burst_events_per_s", "pod events handled per second (pods / the line above)"),
    ("burst_lag_s", "the operator's last CPU tick after the plain watch's last event (s)"),
    ("burst_cpu_s", "operator CPU over the burst (s)"),
    ("burst_cpu_us_per_event", "operator CPU per pod event (µs)"),
    ("burst_reconciles", "reconciles the burst caused"),
    ("burst_peak_rss_mib", "peak RSS after the burst (MiB)"),
    ("burst_apiserver_cpu_s", "kube-apiserver CPU over the burst (s)"),
    ("burst_watch_closed", "pod watches closed as unresponsive during the burst"),
)


POD_WATCH_ROWS = frozenset({"burst_handled_s", "burst_events_per_s", "burst_lag_s"})
"""What a process's CPU ticks say of its pod events: blank for a contender that watches no pods."""


def running_markdown(section: dict[str, Any]) -> list[str]:
    columns = [name for name in ("ours", BASELINE, "upstream") if name in section]
    lines = [
        "",
        f"## {section['n']} running TrainJobs with their pods: restarts and a pod burst (medians, min-max)",
        "",
        f"{section['nodes']} kwok nodes; JobSet controller stopped, each JobSet's pods created directly and Running. "
        "Each restart is followed, in the same process, by one annotation patch on every pod (one pod event each). "
        f"Load average before/after: {section['load_before']} / {section.get('load_after', '-')}",
        "",
        "| " + " | ".join(["metric", *columns, *(f"ours/{c}" for c in columns[1:])]) + " |",
        "|---" * (2 * len(columns)) + "|",
    ]
    for key, label in RUNNING_ROWS:
        handled = key in POD_WATCH_ROWS
        values = {
            name: [None if handled and name in UNWATCHED_PODS else r.get(key) for r in section[name]["runs"]]
            for name in columns
        }
        medians = {name: median_of([{key: v} for v in values[name]], key) for name in columns}
        ratios = [_ratio(medians[columns[0]], medians[name]) for name in columns[1:]]
        lines.append("| " + " | ".join([label, *(spread(values[name]) for name in columns), *ratios]) + " |")
    lines += ["", "| contender | run | load at the restart's end | load at the burst's end |", "|---|---|---|---|"]
    for name in columns:
        for i, r in enumerate(section[name]["runs"], 1):
            lines.append(f"| {name} | {i} | {r.get('load_average', '-')} | {r.get('burst_load', '-')} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="N=50, one run, ours only (CI); no Kueue section")
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--ours-only", action="store_true", help="skip upstream even when it is built")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="another checkout of this repository with its own .venv (make install there): its operator runs too, "
        "as 'before', alternating with ours; tables get its column and ours/before ratios",
    )
    parser.add_argument(
        "--settings",
        default="defaults,equal,pinned",
        help="comma-separated: defaults, equal (upstream's settings for both), pinned (one core, busy neighbour), "
        "gates (upstream's feature defaults: ours with its status server off)",
    )
    parser.add_argument(
        "--ceiling-concurrency",
        type=int,
        help="skip the search for the ceiling's best concurrency (0: no ceiling runs)",
    )
    parser.add_argument("--no-steady", action="store_true", help="skip the steady-state (restart, idle) measurement")
    parser.add_argument(
        "--kueue-sizes",
        default="1000",
        help="Kueue admission section: numbers of queued TrainJobs, comma-separated (empty: skip the section)",
    )
    parser.add_argument(
        "--kueue-wave", type=int, help="Kueue admission: TrainJobs admitted per wave (default N/5, at most 200)"
    )
    parser.add_argument("--kueue-only", action="store_true", help="run only the Kueue admission section")
    parser.add_argument(
        "--kueue-shapes", action="store_true", help="run only Kueue's baseline shapes (kueue_shapes.py)"
    )
    parser.add_argument("--kueue-scale", type=float, default=0.02, help="Kueue's shapes: fraction of its 15,000")
    parser.add_argument(
        "--kueue-profile",
        type=float,
        default=0.0,
        help="Kueue's shapes: restart Kueue with pprof and metrics on 127.0.0.1 and take a CPU profile of this many "
        "seconds in each column, with Kueue's reconciles and the API requests of TrainJobs, JobSets and Workloads",
    )
    parser.add_argument(
        "--kueue-concurrency",
        default="",
        help="Kueue's shapes, with --kueue-profile: Kueue's controller.groupKindConcurrency for the experiment, "
        "comma-separated Kind.group=N (say TrainJob.trainer.kubeflow.org=5; empty: 1 per controller, as the harness)",
    )
    parser.add_argument(
        "--kueue-profile-after",
        type=float,
        default=20.0,
        help="Kueue's shapes: seconds into a column the profile starts",
    )
    parser.add_argument(
        "--huge-nodes",
        default="",
        help="huge TrainJobs section: numNodes of one TrainJob, comma-separated (issue 37 asks 1000,5000,10000; "
        "empty: skip the section)",
    )
    parser.add_argument("--huge-only", action="store_true", help="run only the huge TrainJobs section")
    parser.add_argument(
        "--huge-splits",
        default="",
        help="huge TrainJobs: also the JobSet alone (no operator) with its trainer cut into K Jobs, comma-separated "
        "K (1: one Indexed Job as built; a K that does not divide numNodes is skipped)",
    )
    parser.add_argument(
        "--huge-max-nodes-per-job",
        default="",
        help="huge TrainJobs: also ours building the TrainJob annotated max-nodes-per-job B (its trainer cut by the "
        "operator into Jobs of at most B pods), a column ours-cut(B) per comma-separated B (a B that leaves one Job "
        "at a size is skipped there)",
    )
    parser.add_argument(
        "--steady-only",
        action="store_true",
        help="only the steady state: per contender, one unmeasured burst of the largest size, then --runs restarts",
    )
    parser.add_argument(
        "--steady-no-paged",
        action="store_true",
        help="steady state: ours' restarts with the defaults only, not also with paged LISTs (halves ours' restarts)",
    )
    parser.add_argument(
        "--running",
        type=int,
        default=0,
        help="N running TrainJobs of one node with their pods on kwok nodes: restarts and a pod burst per contender "
        "(issue 37 asks 5000; 0: skip the section)",
    )
    parser.add_argument("--running-only", action="store_true", help="run only the running TrainJobs section")
    args = parser.parse_args()
    sizes = [50] if args.smoke else [int(s) for s in args.sizes.split(",")]
    kueue_sizes = [] if args.smoke or args.steady_only else [int(s) for s in args.kueue_sizes.split(",") if s.strip()]
    runs = 1 if args.smoke else args.runs
    contenders = contenders_for(
        args.smoke or args.ours_only, "smoke mode, or hack/harness has not built it", args.baseline_tree
    )
    logs = bench_logs()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report: dict[str, Any] = {
        "stamp": stamp,
        "runs": runs,
        "machine": machine(),
        "burst": [],
        "load_before": load_average(),
    }
    if args.baseline_tree is not None:
        report["baseline"] = {
            "tree": str(args.baseline_tree),
            "commit": tree_commit(args.baseline_tree),
            "ours_commit": tree_commit(REPO),
        }
    huge_sizes = [] if args.smoke else [int(s) for s in args.huge_nodes.split(",") if s.strip()]
    try:
        if args.kueue_shapes:  # issue 37 item 3, on a control plane with Kueue of its own: bench/kueue_shapes.py
            report["kueue_shapes"] = kueue_shapes.section(
                cluster,
                prepare,
                contenders,
                args.kueue_scale,
                runs,
                logs,
                DEFAULTS,
                (args.kueue_profile, args.kueue_profile_after, kueue_shapes.concurrency(args.kueue_concurrency))
                if args.kueue_profile > 0
                else None,
            )
            print(write(report, args.out, stamp, args.smoke))
            return 0
        if args.running and not args.smoke:

            def keep(partial: dict[str, Any]) -> None:  # written after each contender: an interrupted run keeps ours
                report["running"] = partial
                report["load_after"] = load_average()
                write(report, args.out, stamp, args.smoke)

            report["running"] = running_section(contenders, args.running, runs, logs, keep)
            text = write(report, args.out, stamp, args.smoke)
            if args.running_only:
                print(text)
                return 0
        if huge_sizes:
            splits = [int(k) for k in args.huge_splits.split(",") if k.strip()]
            bounds = [int(b) for b in args.huge_max_nodes_per_job.split(",") if b.strip()]

            def checkpoint(partial: dict[str, Any]) -> None:  # a long run interrupted keeps the columns it has
                report["huge"] = partial
                write(report, args.out, stamp, args.smoke)

            report["huge"] = huge_section(contenders, huge_sizes, runs, logs, splits, checkpoint, bounds)
            write(report, args.out, stamp, args.smoke)
            if args.huge_only:
                text = write(report, args.out, stamp, args.smoke)
                print(text)
                return 0
        if not args.kueue_only:
            say("starting a dedicated control plane in " + os.environ["TRAINJOB_CLUSTER_DIR"])
            info = cluster.up()
            prepare(info)
            burst_section(info, args, contenders, sizes, runs, report, logs)
        if kueue_sizes:
            # A cluster of its own: Kueue's controller would otherwise take CPU from the sections above.
            say("starting a control plane with Kueue in " + os.environ["TRAINJOB_CLUSTER_DIR"])
            info = cluster.up(kueue=True)
            prepare(info)
            report["kueue"] = kueue_section(info, contenders, kueue_sizes, args.kueue_wave, runs, logs)
            report["load_after"] = load_average()
        text = write(report, args.out, stamp, args.smoke)
        print(text)
        return 0
    finally:
        if not args.keep_cluster:
            cluster.down()


if __name__ == "__main__":
    sys.exit(main())
