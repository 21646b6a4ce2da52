"""`make deps-latest`: the newest dependencies pyproject.toml allows, in a separate virtualenv, with the unit suite
and the linters run against them, and one report of what changed and what broke, so an upgrade is a decision taken
by reading it (then `make lock WITH_UPGRADE=1`), never a surprise of a fresh machine.

The project's own `.venv` and the lock are not touched.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    seconds: float
    detail: list[str]


def pins(path: Path) -> dict[str, str]:
    """name -> version of a requirements file written by `uv pip compile`."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line[:1].isalnum() and "==" in line:
            name, _, rest = line.partition("==")
            found[name.strip().lower()] = rest.split(";")[0].split()[0].strip(" \\")
    return found


def changes(locked: dict[str, str], latest: dict[str, str]) -> list[str]:
    both = sorted(locked.keys() & latest.keys())
    lines = [f"  {name}: {locked[name]} -> {latest[name]}" for name in both if locked[name] != latest[name]]
    lines += [f"  {name}: new, {latest[name]}" for name in sorted(latest.keys() - locked.keys())]
    lines += [f"  {name}: no longer needed (lock has {locked[name]})" for name in sorted(locked.keys() - latest.keys())]
    return lines


def run(step: Step, junit: Path | None = None) -> Result:
    started = time.monotonic()
    done = subprocess.run(step.argv, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode == 0:
        return Result(step.name, True, seconds, [])
    detail = (done.stdout + done.stderr).strip().splitlines()[-15:]
    if junit is not None and junit.exists():
        failed = [
            f"{case.get('classname')}::{case.get('name')}"
            for case in ET.parse(junit).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        ]
        detail = failed[:40] + ([f"... and {len(failed) - 40} more"] if len(failed) > 40 else []) or detail
    return Result(step.name, False, seconds, detail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-latest")
    parser.add_argument("--lock", type=Path, default=REPO / "requirements" / "lock.txt")
    parser.add_argument("--uv", default=str(REPO / ".venv" / "bin" / "uv"))
    args = parser.parse_args()
    venv = args.venv if args.venv.is_absolute() else REPO / args.venv
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)

    build_requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    with tempfile.TemporaryDirectory() as scratch:
        latest_file = Path(scratch) / "latest.txt"
        print(f">> resolving the newest versions pyproject.toml allows for {python}")
        subprocess.run(
            [args.uv, "pip", "compile", "--quiet", "--upgrade", "--universal", "--python-version", "3.11",
             "pyproject.toml", "-", "--extra", "dev", "-o", str(latest_file)],  # as `make lock` resolves
            input="\n".join(build_requires), text=True, cwd=REPO, check=True,
        )  # fmt: skip
        subprocess.run([args.uv, "pip", "sync", "--quiet", "--python", str(python), str(latest_file)], check=True)
        latest = pins(latest_file)
    subprocess.run(
        [args.uv, "pip", "install", "--quiet", "--python", str(python), "--no-deps", "--no-build-isolation", "-e", "."],
        cwd=REPO,
        check=True,
    )

    bin_dir = venv / "bin"
    junit = venv / "unit.xml"
    junit.unlink(missing_ok=True)
    steps = [
        (Step("unit tests", [str(python), "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider",
                             f"--junitxml={junit}"]), junit),
        (Step("ruff check", [str(bin_dir / "ruff"), "check", "src", "tests", "bench", "hack/trainjob_dev", "hack/harness"]), None),
        (Step("ruff format", [str(bin_dir / "ruff"), "format", "--check", "src", "tests", "bench", "hack"]), None),
        (Step("mypy", [str(bin_dir / "mypy")]), None),
        (Step("import-linter", [str(bin_dir / "lint-imports"), "--no-cache"]), None),
    ]  # fmt: skip
    results = []
    for step, report in steps:
        print(f">> {step.name} against the newest dependencies")
        results.append(run(step, report))

    print("\n== make deps-latest: the newest versions pyproject.toml allows, against requirements/lock.txt ==")
    moved = changes(pins(args.lock), latest)
    print("\n".join(moved) if moved else "  none: the lock already holds the newest allowed versions")
    for result in results:
        print(f"{'ok    ' if result.ok else 'BROKEN'} {result.name} ({result.seconds:.0f} s)")
        for line in result.detail:
            print(f"         {line}")
    broken = [r.name for r in results if not r.ok]
    if broken:
        print(
            f"\nThe newest versions break: {', '.join(broken)}. Keep the lock, or fix and `make lock WITH_UPGRADE=1`."
        )
        return 1
    print("\nNothing breaks: `make lock WITH_UPGRADE=1` takes these versions.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
