"""The Makefile builds every tool before the first command that uses it, for every target.

A fresh machine has an empty tool cache; a warm one hides ordering mistakes (`make test` once failed on a fresh
machine because `lint` rendered the chart with helm before anything had built helm, while CI stayed green on a
machine with a warm cache). `make -n TARGET` prints the commands in the order they would run, recursing into
sub-makes, without running anything, so the order can be checked on any machine, warm or cold.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@dataclass(frozen=True)
class Need:
    """Commands matching `uses` need a prior command matching `built_by`."""

    tool: str
    uses: re.Pattern[str]
    built_by: re.Pattern[str]


CONTROL_PLANE = re.compile(r"hack/harness/tools/build\.sh")
NEEDS = (
    Need(
        "helm",
        re.compile(
            r"render-manifests\.py(?! --help)|pytest tests/chart|pytest tests/unit tests/chart|pytest tests/realnode"
        ),
        re.compile(r"hack/harness/tools/build\.sh.*--with-helm"),
    ),
    Need(
        "the control plane",
        re.compile(
            r"pytest .*tests/(integration|e2e|realnode)|cluster_bench\.py|hack/harness/demo\.py(?! down)"
            r"|harness/cluster\.py up"
        ),
        CONTROL_PLANE,
    ),
    Need("Kueue", re.compile(r"CLUSTER_KUEUE=1 .*pytest"), re.compile(r"hack/harness/tools/build\.sh.*--with-kueue")),
    Need(
        "upstream's controller",
        re.compile(r"DIFFERENTIAL=1 .*pytest|cluster_bench\.py(?! --(ours-only|smoke))"),
        re.compile(r"hack/harness/tools/build-upstream\.sh"),
    ),
    Need(
        "the real nodes' parts",
        re.compile(r"pytest .*tests/realnode|cluster\.py up .*--real-nodes"),
        re.compile(r"hack/harness/tools/build-nodes\.sh"),
    ),
    Need(
        "Chromium (the UI's browser test)",
        re.compile(r"pytest .*tests/integration(?=\s|$)"),
        re.compile(r"apt-get install .*chromium-driver"),
    ),
)


def targets() -> list[str]:
    """Every phony target of the Makefile and the files it includes (the documented entry points and the rest)."""
    names: set[str] = set()
    for makefile in [REPO / "Makefile", *sorted((REPO / "hack").rglob("*.mk"))]:
        for line in makefile.read_text().splitlines():
            if line.startswith(".PHONY:"):
                names.update(line.split(":", 1)[1].split())
    assert {"test", "lint", "demo", "cluster-test", "test-differential"} <= names, names
    return sorted(names - {"clean", "demo-down", "cluster-down"})


def dry_run(target: str) -> list[str]:
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "-n", target], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # Join continuation lines: a recipe line may span several physical lines.
    return done.stdout.replace("\\\n", " ").splitlines()


def ordering_mistakes(commands: list[str]) -> list[str]:
    """Each command that uses a tool before any command built it, as `needs <tool>: <command>`."""
    mistakes = []
    for need in NEEDS:
        built = False
        for command in commands:
            if need.built_by.search(command):
                built = True
            elif need.uses.search(command) and not built:
                mistakes.append(f"needs {need.tool} before anything built it: {command.strip()}")
    return mistakes


@pytest.mark.parametrize("target", targets())
def test_every_target_builds_the_tools_it_uses_first(target: str) -> None:
    assert ordering_mistakes(dry_run(target)) == []


@pytest.mark.parametrize(
    ("sentence", "commands", "expected"),
    [
        (
            "lint rendering the chart before helm is built is caught",
            [
                "ruff check src",
                ".venv/bin/python hack/render-manifests.py --check",
                "bash hack/harness/tools/build.sh --with-helm",
            ],
            ["needs helm before anything built it: .venv/bin/python hack/render-manifests.py --check"],
        ),
        (
            "helm built first is fine",
            ["bash hack/harness/tools/build.sh  --with-helm", ".venv/bin/python hack/render-manifests.py --check"],
            [],
        ),
        (
            "an e2e session with Kueue needs a build with Kueue, not just any build",
            [
                "bash hack/harness/tools/build.sh",
                "TRAINJOB_OPERATOR_CLUSTER_KUEUE=1 .venv/bin/python -m pytest tests/e2e -q",
            ],
            [
                "needs Kueue before anything built it: TRAINJOB_OPERATOR_CLUSTER_KUEUE=1 .venv/bin/python -m pytest "
                "tests/e2e -q"
            ],
        ),
        (
            "the differential session needs upstream's controller",
            [
                "bash hack/harness/tools/build.sh --with-kueue",
                "TRAINJOB_OPERATOR_DIFFERENTIAL=1 .venv/bin/python -m pytest x",
            ],
            [
                "needs upstream's controller before anything built it: TRAINJOB_OPERATOR_DIFFERENTIAL=1 "
                ".venv/bin/python -m pytest x"
            ],
        ),
    ],
)
def test_the_check_itself(sentence: str, commands: list[str], expected: list[str]) -> None:
    assert ordering_mistakes(commands) == expected, sentence
