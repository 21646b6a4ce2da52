"""The CLI (`cli.py`) refuses hostile files with exit 2 and renders YAML timestamps as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builders import billion_laughs

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"\xff\xfe\x00binary", "not UTF-8 text", id="binary input"),
        pytest.param(
            ("[" * 300_000 + "]" * 300_000).encode(),
            "nested deeper than 100 levels",
            id="nesting that segfaulted libyaml's composer",
        ),
        pytest.param(billion_laughs(14).encode(), "aliases are expanded", id="billion laughs that hung"),
        pytest.param(
            b"kind: TrainJob\nspec: {activeDeadlineSeconds: " + b"9" * 5000 + b"}",
            "integer string conversion",
            id="a ValueError of int conversion",
        ),
    ],
)
def test_the_cli_refuses_hostile_files_with_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    """In a child process: a segmentation fault or a hang would otherwise take the test run down with it."""
    path = tmp_path / "in.yaml"
    path.write_bytes(content)
    done = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.cli", "validate", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert (done.returncode, done.stderr.count("\n"), message in done.stderr) == (2, 1, True), done.stderr


def test_the_cli_renders_yaml_timestamps_as_json(tmp_path: Path) -> None:
    """A YAML timestamp in an annotation used to reach json.dump as a datetime (TypeError)."""
    from builders import RuntimeBuilder

    jobs, runtimes = tmp_path / "jobs.yaml", tmp_path / "runtimes.yaml"
    jobs.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: a\n"
        "  namespace: default\n  annotations:\n    when: 2026-01-01T00:00:00Z\nspec:\n  runtimeRef:\n"
        "    name: test-runtime\n    kind: TrainingRuntime\n  trainer:\n    image: x\n"
        "    resourcesPerNode: {requests: {cpu: 2}}\n"
    )
    runtimes.write_text(json.dumps(RuntimeBuilder.make().ml_policy(1, torch={}).raw()))
    done = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.cli", "render", "-f", str(jobs), "-r", str(runtimes), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert {o["kind"] for o in items} >= {"ConfigMap", "JobSet"}
