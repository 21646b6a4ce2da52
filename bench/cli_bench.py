"""The offline CLI end to end: `render -o json`, `render -o yaml` and `validate` of a file of N TrainJobs.

Process start is excluded by subtracting the same command on a one-TrainJob file. Both wall time and CPU time (the
process's and its forked workers') are reported. Each command runs twice: with the defaults (one worker process per
usable CPU for a long file) and with `--workers 1` (one process: its rate is the CPU cost per TrainJob, what a
one-core machine gets). With --baseline-src, the same commands run from another source tree (say, an older commit's
`src/` and `crds/` from `git archive`) in the same run, alternating, for a ratio.

Usage: python bench/cli_bench.py [--jobs 2000] [--runs 5] [--baseline-src DIR] [--json PATH]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNTIMES = REPO / "examples" / "runtimes.yaml"
COMMANDS = (
    ("render -o json", ["render", "-o", "json"]),
    ("render -o yaml", ["render", "-o", "yaml"]),
    ("validate", ["validate"]),
)


def trainjobs(n: int) -> str:
    """N torch TrainJobs as a practitioner writes them, one YAML document each."""
    return "".join(
        f"""---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: job-{i}
  namespace: team-{i % 7}
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    resourcesPerNode:
      limits:
        nvidia.com/gpu: 4
    env:
      - name: EPOCHS
        value: "3"
"""
        for i in range(n)
    )


def run_once(src: Path, args: list[str], path: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one CLI process."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trainjob_operator.cli", *args, "-f", str(path), "-r", str(RUNTIMES)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        cwd=src.parent,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(src: Path, args: list[str], big: Path, small: Path, n: int, runs: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(runs):
        wall_big, cpu_big = run_once(src, args, big)
        wall_small, cpu_small = run_once(src, args, small)
        walls.append(wall_big - wall_small)
        cpus.append(cpu_big - cpu_small)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return {"wall_s": wall, "cpu_s": cpu, "per_s_wall": (n - 1) / wall, "per_s_cpu": (n - 1) / cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path, help="another source tree's src/ to compare with")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    cpus = len(os.sched_getaffinity(0))
    print(
        f"CLI benchmark: {args.jobs} TrainJobs, median of {args.runs} runs, process start subtracted; "
        f"{cpus} usable CPUs; load average {load}",
        flush=True,
    )
    results: dict[str, Any] = {"jobs": args.jobs, "runs": args.runs, "usable_cpus": cpus, "load_before": load}
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big.yaml", Path(tmp) / "one.yaml"
        big.write_text(trainjobs(args.jobs))
        small.write_text(trainjobs(1))
        for label, cmd in COMMANDS:
            ours = measure(REPO / "src", cmd, big, small, args.jobs, args.runs)
            alone = measure(REPO / "src", [*cmd, "--workers", "1"], big, small, args.jobs, args.runs)
            row = {"ours": ours, "ours_one_process": alone}
            line = (
                f"  {label:16s} {ours['per_s_wall']:7.0f} TrainJobs/s wall, {ours['per_s_cpu']:7.0f}/s CPU "
                f"({ours['cpu_s']:.2f}s CPU); one process {alone['per_s_wall']:6.0f}/s wall"
            )
            if args.baseline_src:
                base = measure(args.baseline_src, cmd, big, small, args.jobs, args.runs)
                row["baseline"] = base
                line += (
                    f"; baseline {base['per_s_wall']:6.0f}/s wall, {base['per_s_cpu']:6.0f}/s CPU; "
                    f"speed-up x{base['cpu_s'] / ours['cpu_s']:.2f} (CPU)"
                )
            results[label] = row
            print(line, flush=True)
    results["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
