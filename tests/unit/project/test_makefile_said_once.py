"""The Makefile says each thing once (issue 38): every test session is one target whose recipe holds its pytest
command, and `make test`'s lanes call those targets instead of repeating the command with other flags; every target
has a `## help` line (`make help` lists them by group); every on/off switch is spelled WITH_*."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MAKEFILES = [REPO / "Makefile", *sorted((REPO / "hack").rglob("*.mk"))]
RULE = re.compile(r"^([a-zA-Z][a-zA-Z0-9_-]*):(?!=)(.*)$")
PYTEST = re.compile(r"\$\((?:CLUSTER_)?PYTEST\)|-m pytest\b")
#: Flags that change how a session reports, not what it runs.
OUTPUT_FLAGS = re.compile(r"^(-q|-v|-s|-rxX|-ra|--junitxml=.*|\$\(call junit,.*\)|\$\(if .*-s\))$")


def rules(text: str) -> dict[str, tuple[str, list[str]]]:
    """target -> (the rest of its rule line, its recipe lines with continuations joined)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    lines = text.replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("\t") and current is not None:
            found[current][1].append(line.strip())
            continue
        match = RULE.match(line)
        current = match.group(1) if match else None
        if match:
            found[match.group(1)] = (match.group(2), [])
    return found


def all_rules() -> dict[str, tuple[str, list[str]]]:
    merged: dict[str, tuple[str, list[str]]] = {}
    for makefile in MAKEFILES:
        merged.update(rules(makefile.read_text()))
    return merged


def phony(text: str) -> set[str]:
    names: set[str] = set()
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith(".PHONY:"):
            names.update(line.split(":", 1)[1].split())
    return names


def pytest_command(recipe_line: str) -> str | None:
    """What a recipe line's pytest runs (its arguments without output flags), or None when it runs no pytest."""
    match = PYTEST.search(recipe_line)
    if not match:
        return None
    rest = recipe_line[match.end() :]
    rest = re.sub(r"\$\((call junit|if [^()]*)[^()]*\)", " ", rest)
    words = shlex.split(rest.replace("$$", "$"), posix=True)
    return " ".join(w for w in words if not OUTPUT_FLAGS.match(w))


def sessions(found: dict[str, tuple[str, list[str]]]) -> dict[str, list[str]]:
    """pytest command -> the targets whose recipes run it."""
    where: dict[str, list[str]] = {}
    for target, (_, recipe) in found.items():
        for line in recipe:
            command = pytest_command(line)
            if command is not None:
                where.setdefault(command, []).append(target)
    return where


@pytest.mark.parametrize(
    ("sentence", "text", "expected"),
    [
        (
            "a session and a lane that repeats it with a report flag are the same session twice",
            "test-unit: x ## h\n\t@$(PYTEST) tests/unit -q\nlane: ## h\n\t@$(PYTEST) tests/unit -q --junitxml=$(R)/u.xml\n",
            {"tests/unit": ["test-unit", "lane"]},
        ),
        (
            "another marker is another session",
            "a: ## h\n\t@$(PYTEST) tests/chart -q -m cluster\nb: ## h\n\t@$(PYTEST) tests/chart -m 'not cluster'\n",
            {"tests/chart -m cluster": ["a"], "tests/chart -m not cluster": ["b"]},
        ),
        (
            "a continuation line is part of its recipe line",
            "a: ## h\n\t@X=1 $(PYTEST) tests/e2e \\\n\t\t-q $(call junit,2-e2e)\n",
            {"tests/e2e": ["a"]},
        ),
    ],
)
def test_the_parser(sentence: str, text: str, expected: dict[str, list[str]]) -> None:
    assert sessions(rules(text)) == expected, sentence


def test_each_pytest_command_is_in_one_recipe_only() -> None:
    twice = {command: targets for command, targets in sessions(all_rules()).items() if len(targets) > 1}
    assert twice == {}, "define the session once, as a target, and call that target"


def test_the_lanes_and_make_test_call_sessions_and_run_no_pytest_themselves() -> None:
    found = all_rules()
    lanes = ["test", *sorted(t for t in found if t.startswith("test-lane-"))]
    assert len(lanes) == 5
    for lane in lanes:
        assert [line for line in found[lane][1] if pytest_command(line) is not None] == [], lane


def test_every_target_has_help() -> None:
    found = all_rules()
    targets = set().union(*(phony(m.read_text()) for m in MAKEFILES))
    assert {"test", "demo", "tools", "test-realnodes"} <= targets
    assert sorted(t for t in targets if "## " not in found.get(t, ("", []))[0]) == []


def test_every_help_line_is_in_a_group() -> None:
    for makefile in MAKEFILES:
        text = makefile.read_text()
        first_group = text.find("\n##@ ")
        first_help = re.search(r"^[a-zA-Z][a-zA-Z0-9_-]*:.*## ", text, re.M)
        assert first_help is None or 0 <= first_group < first_help.start(), makefile.name


def test_every_switch_is_spelled_with() -> None:
    switches = {
        name
        for makefile in MAKEFILES
        for name in re.findall(r"^([A-Z][A-Z0-9_]*) \?= [01]$", makefile.read_text(), re.M)
    }
    assert {"WITH_KUEUE", "WITH_UPGRADE"} <= switches
    assert sorted(s for s in switches if not s.startswith("WITH_")) == []


def test_ci_runs_every_real_node_test() -> None:
    """Session 4 selects `-m realnode` (all of tests/realnode), not a subset."""
    found = all_rules()
    (command,) = [c for line in found["test-realnodes"][1] if (c := pytest_command(line))]
    assert command == "tests/realnode -m realnode"
    assert any("test-realnodes" in line for line in found["test-lane-a"][1])


#: Every session `make test` runs, each in some lane (a lane line that expands to nothing runs nothing, silently:
#: `$(call session,test-e2e)` with no `session` defined did so until the merge of issue 38's Makefile).
SESSIONS = (
    "test-unit",
    "test-unit-py313",
    "test-integration",
    "test-chaos",
    "test-e2e",
    "test-differential",
    "test-multikueue",
    "test-realnodes",
    "bench-smoke",
    "bench-cli-guard",
)


def test_the_lanes_run_every_session_through_make() -> None:
    found = all_rules()
    lanes = [line for name in ("test-lane-a", "test-lane-b", "test-lane-c", "test-lane-d") for line in found[name][1]]
    called = {m.group(1) for line in lanes for m in re.finditer(r"\$\(MAKE\) --no-print-directory ([a-z0-9-]+)", line)}
    assert sorted(set(SESSIONS) - called) == []
    assert [
        line for line in lanes if "$(call " in line and not re.search(r"\$\(call (lane_cluster|junit),", line)
    ] == []
    assert all(s in found for s in SESSIONS)
