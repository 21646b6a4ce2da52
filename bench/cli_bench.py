"""The offline CLI end to end, as a user waits for it: `render -o json`, `render -o yaml` and `validate` of a file of
N TrainJobs, and `--help`, each a whole process (interpreter start, imports and model building included).

Every row gives the whole-process figures first (the big file, and one TrainJob: the start-up), then the same with
the start-up subtracted (the cost per TrainJob). Wall time and CPU time (the process's and its forked workers') are
medians of --runs. Each command runs with the defaults (one worker process per usable CPU for a long file) and with
`--workers 1` (one process: its rate is the CPU cost per TrainJob, what a one-core machine gets).

A baseline is measured in the same run, alternating run by run with ours (A B A B ...), and the ratio ours/baseline
is the median of the runs' own ratios, so a machine whose load drifts moves both alike:
- `--baseline-rev REV`: that commit's `src/` and `crds/` (`git archive`) run with this venv's interpreter;
- `--baseline-src DIR`: another tree's `src/` (its `../crds` beside it), with this venv's interpreter;
- `--baseline-tree DIR`: another checkout with its own `.venv` (its own dependencies and their bytecode too).
Both source trees are byte-compiled first (as an install does), so the code is compared, not whether an earlier
run left `__pycache__` behind; whether each interpreter's dependencies have bytecode is printed, since without it
(PYTHONDONTWRITEBYTECODE set, an install that compiled nothing) every start compiles pydantic from source again.

`--guard` is the start-up guard of `make test`'s smoke run: `--help` and `render` of one TrainJob against a
yardstick measured in the same run, alternating (a fixed pure-Python loop in a fresh interpreter); it fails when the
CPU ratio is over twice the one recorded here (`GUARD_REFERENCE`), that is when start-up has doubled.

Usage: python bench/cli_bench.py [--jobs 2000] [--runs 7] [--baseline-rev REV | --baseline-src DIR |
       --baseline-tree DIR] [--json PATH]
       python bench/cli_bench.py --guard
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNTIMES = REPO / "examples" / "runtimes.yaml"
COMMANDS = (
    ("render -o json", ["render", "-o", "json"]),
    ("render -o yaml", ["render", "-o", "yaml"]),
    ("validate", ["validate"]),
)
YARDSTICK = "x = 0\nfor i in range(2_000_000):\n    x += i * i\n"
"""The guard's fixed reference: CPU-bound Python in an interpreter without site (no import of ours or of any
dependency), so it moves with the machine's speed and load but not with our code or our venv."""
GUARD_REFERENCE = {"--help": 0.32, "render one TrainJob": 1.45}
"""CPU time of each start-up over the yardstick's, in the same run (28 November 2026, 171f2f3 plus this change,
bytecode compiled, load average 13-15 on the shared 2-core machine; medians of 7). The guard fails above twice."""


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


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass(frozen=True)
class Tree:
    """A source tree to run the CLI from, with the interpreter that runs it."""

    label: str
    python: Path
    src: Path | None
    """On PYTHONPATH (None: the interpreter's own installation of the package)."""

    def command(self, args: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        env = dict(os.environ)
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src)
        return [str(self.python), "-m", "trainjob_operator.cli", *args], env


def run_once(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process and the children it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


Sample = dict[str, list[float]]


def alternating(runners: dict[str, Callable[[], tuple[float, float]]], runs: int) -> dict[str, Sample]:
    """Each runner `runs` times, in turn (one unmeasured warm-up each first): {label: {"wall": [...], "cpu": [...]}}."""
    for runner in runners.values():
        runner()
    out: dict[str, Sample] = {label: {"wall": [], "cpu": []} for label in runners}
    for _ in range(runs):
        for label, runner in runners.items():
            wall, cpu = runner()
            out[label]["wall"].append(wall)
            out[label]["cpu"].append(cpu)
    return out


def median_ratio(a: list[float], b: list[float]) -> float:
    """The median of the pairs' ratios (run i of A over run i of B, measured one after the other)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True) if y > 0)


def has_bytecode(python: Path) -> bool:
    """Whether `python`'s pydantic has bytecode beside its sources (else each start compiles it, when
    PYTHONDONTWRITEBYTECODE is set)."""
    probe = "import importlib.util, os, pydantic.main as m; print(os.path.exists(importlib.util.cache_from_source(m.__file__)))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=env)
    return out.stdout.strip() == "True"


def compile_tree(python: Path, src: Path) -> None:
    subprocess.run([str(python), "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL)


def baseline(args: argparse.Namespace, tmp: Path) -> Tree | None:
    if args.baseline_rev:
        dest = tmp / "baseline"
        dest.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.baseline_rev, "src", "crds"], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return Tree(f"baseline {args.baseline_rev}", Path(sys.executable), dest / "src")
    if args.baseline_src:
        return Tree(f"baseline {args.baseline_src}", Path(sys.executable), args.baseline_src.resolve())
    if args.baseline_tree:
        python = args.baseline_tree / ".venv" / "bin" / "python"
        if not python.is_file():
            raise SystemExit(f"cli_bench: --baseline-tree {str(args.baseline_tree)!r}: no .venv/bin/python there")
        return Tree(f"baseline {args.baseline_tree}", python, args.baseline_tree.resolve() / "src")
    return None


def row(samples: dict[str, Sample], big: str, one: str, n: int) -> dict[str, float]:
    """Medians of the whole processes (the big file, one TrainJob) and of the start-up-subtracted cost."""
    b, s = samples[big], samples[one]
    per_wall = statistics.median(x - y for x, y in zip(b["wall"], s["wall"], strict=True))
    per_cpu = statistics.median(x - y for x, y in zip(b["cpu"], s["cpu"], strict=True))
    return {
        "whole_wall_s": statistics.median(b["wall"]),
        "whole_cpu_s": statistics.median(b["cpu"]),
        "startup_wall_s": statistics.median(s["wall"]),
        "startup_cpu_s": statistics.median(s["cpu"]),
        "subtracted_wall_s": per_wall,
        "subtracted_cpu_s": per_cpu,
        "per_s_cpu": (n - 1) / per_cpu if per_cpu > 0 else float("inf"),
    }


def bench(args: argparse.Namespace) -> int:
    cpus = len(os.sched_getaffinity(0))
    print(
        f"CLI benchmark: {args.jobs} TrainJobs, medians of {args.runs} whole processes (start-up included), "
        f"alternating with the baseline; {cpus} usable CPUs; load average {load()}",
        flush=True,
    )
    results: dict[str, Any] = {"jobs": args.jobs, "runs": args.runs, "usable_cpus": cpus, "load_before": load()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        trees = [Tree("ours", Path(sys.executable), REPO / "src")]
        base = baseline(args, tmp)
        if base is not None:
            trees.append(base)
        for tree in trees:
            assert tree.src is not None
            compile_tree(tree.python, tree.src)
            compiled = has_bytecode(tree.python)
            print(
                f"  {tree.label}: {tree.python} (dependencies' bytecode: "
                f"{'compiled' if compiled else 'NONE: each start compiles them from source'})",
                flush=True,
            )
            results.setdefault("bytecode", {})[tree.label] = compiled
        big, one = tmp / "big.yaml", tmp / "one.yaml"
        big.write_text(trainjobs(args.jobs))
        one.write_text(trainjobs(1))

        def runner(tree: Tree, cmd: list[str]) -> Callable[[], tuple[float, float]]:
            argv, env = tree.command(cmd)
            return lambda: run_once(argv, env)

        help_samples = alternating({t.label: runner(t, ["--help"]) for t in trees}, args.runs)
        line = f"  {'--help':24s} " + "; ".join(
            f"{t.label} {statistics.median(help_samples[t.label]['wall']):.3f}s wall "
            f"{statistics.median(help_samples[t.label]['cpu']):.3f}s CPU"
            for t in trees
        )
        if base is not None:
            line += (
                f"; ours/baseline x{median_ratio(help_samples['ours']['wall'], help_samples[base.label]['wall']):.2f}"
                f" wall x{median_ratio(help_samples['ours']['cpu'], help_samples[base.label]['cpu']):.2f} CPU"
            )
        print(line + f"  (load {load()})", flush=True)
        results["--help"] = {t.label: help_samples[t.label] for t in trees}

        for label, cmd in COMMANDS:
            for workers in ([], ["--workers", "1"]):
                name = label + (" --workers 1" if workers else "")
                runners = {}
                for tree in trees:
                    files = ["-r", str(RUNTIMES), *workers]
                    runners[f"{tree.label}|big"] = runner(tree, [*cmd, "-f", str(big), *files])
                    runners[f"{tree.label}|one"] = runner(tree, [*cmd, "-f", str(one), *files])
                samples = alternating(runners, args.runs)
                rows = {t.label: row(samples, f"{t.label}|big", f"{t.label}|one", args.jobs) for t in trees}
                out = f"  {name:24s} "
                out += "; ".join(
                    f"{t.label}: whole {rows[t.label]['whole_wall_s']:.2f}s wall {rows[t.label]['whole_cpu_s']:.2f}s CPU"
                    f" (start-up {rows[t.label]['startup_wall_s']:.2f}s/{rows[t.label]['startup_cpu_s']:.2f}s), "
                    f"start-up subtracted {rows[t.label]['subtracted_wall_s']:.2f}s wall "
                    f"{rows[t.label]['subtracted_cpu_s']:.2f}s CPU ({rows[t.label]['per_s_cpu']:.0f} TrainJobs/s CPU)"
                    for t in trees
                )
                entry: dict[str, Any] = {"rows": rows, "samples": samples}
                if base is not None:
                    ratios = {
                        "whole_wall": median_ratio(samples["ours|big"]["wall"], samples[f"{base.label}|big"]["wall"]),
                        "whole_cpu": median_ratio(samples["ours|big"]["cpu"], samples[f"{base.label}|big"]["cpu"]),
                        "startup_cpu": median_ratio(samples["ours|one"]["cpu"], samples[f"{base.label}|one"]["cpu"]),
                        "subtracted_cpu": rows["ours"]["subtracted_cpu_s"] / rows[base.label]["subtracted_cpu_s"],
                    }
                    entry["ours_over_baseline"] = ratios
                    out += (
                        f"\n  {'':24s} ours/baseline: whole x{ratios['whole_wall']:.2f} wall x{ratios['whole_cpu']:.2f} "
                        f"CPU, start-up x{ratios['startup_cpu']:.2f} CPU, start-up subtracted "
                        f"x{ratios['subtracted_cpu']:.2f} CPU"
                    )
                results[name] = entry
                print(out + f"  (load {load()})", flush=True)
    results["load_after"] = load()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def guard(runs: int) -> int:
    """The start-up guard (`make test`): each start-up's CPU over the yardstick's, alternating in this run; fails
    when one is over twice its `GUARD_REFERENCE`. A failure is measured once more, with more runs, before it counts:
    one burst of load on a shared machine must not fail CI."""
    ours = Tree("ours", Path(sys.executable), REPO / "src")
    yardstick = [sys.executable, "-I", "-S", "-c", YARDSTICK]
    with tempfile.TemporaryDirectory() as tmp_name:
        one = Path(tmp_name) / "one.yaml"
        one.write_text(trainjobs(1))
        starts = {
            "--help": ours.command(["--help"]),
            "render one TrainJob": ours.command(["render", "-o", "json", "-f", str(one), "-r", str(RUNTIMES)]),
        }
        failed = []
        for label, (argv, env) in starts.items():
            for attempt, n in enumerate((runs, 2 * runs + 1)):
                samples = alternating(
                    {"start": lambda a=argv, e=env: run_once(a, e), "yardstick": lambda: run_once(yardstick)}, n
                )
                ratio = median_ratio(samples["start"]["cpu"], samples["yardstick"]["cpu"])
                limit = 2 * GUARD_REFERENCE[label]
                print(
                    f"start-up guard: {label}: {statistics.median(samples['start']['cpu']):.3f}s CPU, "
                    f"{statistics.median(samples['start']['wall']):.3f}s wall; yardstick "
                    f"{statistics.median(samples['yardstick']['cpu']):.3f}s CPU; ratio {ratio:.2f} "
                    f"(reference {GUARD_REFERENCE[label]:.2f}, limit {limit:.2f}; median of {n}; load {load()})",
                    flush=True,
                )
                if ratio <= limit:
                    break
                if attempt == 1:
                    failed.append(label)
    if failed:
        print(
            f"start-up guard: FAILED for {', '.join(failed)}: start-up has doubled against the yardstick (an import "
            "that builds more at start, a dependency without bytecode?); profile with `python -X importtime`",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--baseline-rev", help="a commit whose src/ and crds/ run with this venv, alternating")
    group.add_argument("--baseline-src", type=Path, help="another source tree's src/, with this venv, alternating")
    group.add_argument("--baseline-tree", type=Path, help="another checkout with its own .venv, alternating")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--guard", action="store_true", help="the start-up guard of make test's smoke run")
    args = parser.parse_args(argv)
    if args.guard:
        return guard(min(args.runs, 7))
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
