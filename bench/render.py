"""Render throughput of the pure pipeline: N TrainJobs against the torch, MPI and initializer runtimes.

Each TrainJob is parsed from its wire dict and rendered to every object the operator would apply, as the
reconciler does. Prints TrainJobs/s and µs per TrainJob, the median of RUNS runs, per scenario.
Usage: python bench/render.py [--jobs 2000] [--runs 5] [--json PATH]

With --baseline-tree DIR (another checkout of this repository with its own .venv: `git worktree add DIR <commit>`,
`make install` there), this file does not measure in-process: it runs that tree's own bench/render.py with its venv
and this tree's with ours as subprocesses, alternating, --rounds times, and prints per scenario the median of the
rounds' medians, before and after, and the after/before ratio.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from builders import RuntimeBuilder, TrainJobBuilder, container, replicated_job
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.keys import FRESH_KEYS
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import ObjectRef, Observed
from trainjob_operator.runtime.pipeline import Framework

CTR = c.CLUSTER_TRAINING_RUNTIME_KIND


def torch_runtime() -> RuntimeSource:
    return (
        RuntimeBuilder.make("torch-distributed", CTR)
        .jobs([replicated_job("node", "trainer", [container("node", "pytorch/pytorch:2.13.0")])])
        .ml_policy(num_nodes=1, torch={})
        .source()
    )


def mpi_runtime() -> RuntimeSource:
    node = replicated_job("node", None, [container("node", "deepspeed", command=["/usr/sbin/sshd", "-De"])])
    launcher = replicated_job(
        "launcher", "trainer", [container("node", "deepspeed")], dependsOn=[{"name": "node", "status": "Ready"}]
    )
    return (
        RuntimeBuilder.make("deepspeed-distributed", CTR)
        .jobs([node, launcher])
        .ml_policy(
            num_nodes=1, mpi={"numProcPerNode": 1, "sshAuthMountPath": "/home/mpiuser/.ssh", "runLauncherAsNode": True}
        )
        .source()
    )


def initializer_runtime() -> RuntimeSource:
    return RuntimeBuilder.make("torch-with-initializers", CTR).ml_policy(num_nodes=1, torch={}).coscheduling().source()


def job_dicts(n: int, runtime: str, **trainer: Any) -> list[dict[str, Any]]:
    base = TrainJobBuilder.make(runtime=runtime, kind=CTR).trainer(**trainer)
    return [base.set("metadata.name", f"job-{i}").set("metadata.uid", f"uid-{i}").raw() for i in range(n)]


def mpi_secrets(n: int) -> frozenset[ObjectRef]:
    """Every job's MPI SSH Secret, known to exist."""
    return frozenset(ObjectRef("v1", "Secret", f"job-{i}-mpi-ssh-auth") for i in range(n))


def scenario(
    framework: Framework, runtime: RuntimeSource, jobs: list[dict[str, Any]], observed: Observed
) -> Callable[[], None]:
    def run() -> None:
        for raw in jobs:
            framework.desired_objects(TrainJob.model_validate(raw), runtime, observed)

    return run


def measure(fn: Callable[[], None], n: int, runs: int) -> dict[str, float]:
    durations = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        durations.append(time.perf_counter() - start)
    median = statistics.median(durations)
    return {
        "jobs_per_s": n / median,
        "us_per_job": median / n * 1e6,
        "median_s": median,
        "min_s": min(durations),
        "max_s": max(durations),
    }


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout with its own .venv, measured alternately")
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline-tree: alternating rounds per tree")
    return parser.parse_args(argv)


def render_once(python: Path, script: Path, jobs: int, runs: int) -> dict[str, dict[str, float]]:
    """One subprocess run of a tree's bench/render.py: its results per scenario."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "render.json"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run(
            [str(python), str(script), "--jobs", str(jobs), "--runs", str(runs), "--json", str(out)],
            check=True,
            cwd=script.parents[1],
            env=env,
            stdout=subprocess.DEVNULL,
            timeout=1800,
        )
        results: dict[str, dict[str, float]] = json.loads(out.read_text())["results"]
        return results


def compare(
    after: list[dict[str, dict[str, float]]], before: list[dict[str, dict[str, float]]]
) -> dict[str, dict[str, float | None]]:
    """Per scenario of either tree: the median over rounds of TrainJobs/s after and before, and after/before (None
    where a tree lacks the scenario)."""

    def median_rate(rounds: list[dict[str, dict[str, float]]], name: str) -> float | None:
        rates = [r[name]["jobs_per_s"] for r in rounds if name in r]
        return statistics.median(rates) if rates else None

    names = list(dict.fromkeys(name for r in [*after, *before] for name in r))
    table: dict[str, dict[str, float | None]] = {}
    for name in names:
        a, b = median_rate(after, name), median_rate(before, name)
        table[name] = {"after": a, "before": b, "ratio": a / b if a and b else None}
    return table


def comparison_lines(table: dict[str, dict[str, float | None]]) -> list[str]:
    """The before/after comparison as a markdown table (TrainJobs/s, medians of the rounds)."""

    def cell(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines = ["| scenario | before (TrainJobs/s) | after (TrainJobs/s) | after/before |", "|---|---|---|---|"]
    for name, row in table.items():
        lines.append(
            f"| {name} | {cell(row['before'], ',.0f')} | {cell(row['after'], ',.0f')} | {cell(row['ratio'], '.2f')} |"
        )
    return lines


def baseline_main(args: argparse.Namespace) -> int:
    """Both trees' render benchmarks, alternating round by round (before, after), as subprocesses."""
    tree = args.baseline_tree
    python = tree / ".venv" / "bin" / "python"
    script = tree / "bench" / "render.py"
    if not python.is_file() or not script.is_file():
        raise SystemExit(f"render: --baseline-tree {str(tree)!r}: needs bench/render.py and .venv/bin/python there")
    after: list[dict[str, dict[str, float]]] = []
    before: list[dict[str, dict[str, float]]] = []
    print(f"render benchmark, before ({tree}) and after (this tree): {args.jobs} TrainJobs, median of {args.runs}")
    for r in range(args.rounds):
        before.append(render_once(python, script, args.jobs, args.runs))
        after.append(render_once(Path(sys.executable), Path(__file__).resolve(), args.jobs, args.runs))
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"  round {r + 1} of {args.rounds} done, load average {load}", flush=True)
    table = compare(after, before)
    print("\n".join(comparison_lines(table)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "jobs": args.jobs,
                    "runs": args.runs,
                    "rounds": args.rounds,
                    "before": before,
                    "after": after,
                    "compared": table,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


def main() -> int:
    args = arguments()
    if args.baseline_tree is not None:
        return baseline_main(args)
    framework = Framework.from_registry()
    n = args.jobs
    scenarios = {
        "torch (2 nodes, 4 GPUs)": scenario(
            framework,
            torch_runtime(),
            job_dicts(n, "torch-distributed", numNodes=2, resourcesPerNode={"limits": {"nvidia.com/gpu": 4}}),
            Observed(),
        ),
        "mpi (deepspeed, 4 nodes, Secret exists)": scenario(
            framework,
            mpi_runtime(),
            job_dicts(n, "deepspeed-distributed", numNodes=4),
            Observed(existing=mpi_secrets(n)),
        ),
        "initializers + coscheduling": scenario(
            framework,
            initializer_runtime(),
            [
                {
                    **raw,
                    "spec": {
                        **raw["spec"],
                        "initializer": {"dataset": {"storageUri": "hf://d"}, "model": {"storageUri": "hf://m"}},
                    },
                }
                for raw in job_dicts(n, "torch-with-initializers", numNodes=2)
            ],
            Observed(),
        ),
        "mpi first build (new ECDSA P-521 key)": scenario(
            framework,
            mpi_runtime(),
            job_dicts(max(n // 10, 1), "deepspeed-distributed", numNodes=4),
            Observed(keys=FRESH_KEYS),
        ),
    }
    print(
        f"render benchmark: {n} TrainJobs per run, median of {args.runs} runs, "
        f"Python {platform.python_version()} on {platform.machine()}",
        flush=True,
    )
    results = {}
    for name, fn in scenarios.items():
        count = max(n // 10, 1) if "first build" in name else n
        fn()  # warm-up
        result = measure(fn, count, args.runs)
        results[name] = result
        print(
            f"  {name:42s} {result['jobs_per_s']:9.0f} TrainJobs/s  {result['us_per_job']:8.1f} µs/TrainJob", flush=True
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"jobs": n, "runs": args.runs, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
