"""`make test`'s background build of the real nodes' parts and images (hack/harness/realnode_prebuild.py): `wait`
says what happened, in one line, from the state the background build left."""

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import realnode_prebuild


@dataclass(frozen=True)
class WaitCase:
    files: dict[str, str]
    exit_code: int
    says: str


WAIT_CASES = {
    "the build succeeded": WaitCase({"pid": "1", "rc": "0"}, 0, "real-node parts and images ready"),
    "the build failed: its log's last lines are shown": WaitCase(
        {"pid": "1", "rc": "2", "build.log": "step 1\nrunc: cgo: libseccomp not found\n"},
        1,
        "real-node build FAILED (exit 2)",
    ),
    "the machine cannot run real nodes": WaitCase(
        {"skipped": "real nodes cannot run here: real nodes need root"}, 0, "no real-node build to wait for"
    ),
    "start was never called": WaitCase({}, 1, "never started"),
    "the build is not over by the deadline": WaitCase({"pid": "1"}, 1, "not over after 0 s"),
}


@pytest.mark.parametrize("case", sorted(WAIT_CASES))
def test_wait(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = WAIT_CASES[case]
    for name, text in {**spec.files, "started": f"{time.time()}\n"}.items():
        (tmp_path / name).write_text(text)
    assert realnode_prebuild.wait(tmp_path, timeout_s=0) == spec.exit_code
    said = capsys.readouterr()
    assert spec.says in said.out + said.err
    if "build.log" in spec.files:
        assert "libseccomp not found" in said.err


def test_the_build_is_the_session_images_beside_the_node_parts_then_the_control_plane_kubelet_and_operator_image() -> (
    None
):
    command = realnode_prebuild.build_command("/venv/bin/python")
    nodes, images = command.split(" & pid=$!; ", 1)
    steps = nodes.removeprefix("{ ").removesuffix("; }").split(" && ")
    assert [step.split()[0:2] for step in steps] == [
        ["bash", "hack/harness/tools/build-nodes.sh"],
        ["bash", "hack/harness/tools/build.sh"],
        ["make", "--no-print-directory"],
        ["/venv/bin/python", "-c"],
    ]
    assert steps[0].endswith("--without-kubelet") and steps[2].endswith("tools-nodes")
    assert "images.build_operator" in steps[3]
    assert images.startswith("/venv/bin/python hack/harness/images.py --jobs 2 tensorflow torch ")


def test_the_demos_build_is_its_images_with_the_node_parts_but_the_kubelet_beside_them() -> None:
    """The demo's foreground builds the control plane, kubelet and kube-proxy, and any node part the background
    could not: the background's status is its images'."""
    command = realnode_prebuild.build_command("/venv/bin/python", ("torch", "pause"), images_only=True)
    nodes, images = command.split(" & pid=$!; ", 1)
    assert nodes == "{ bash hack/harness/tools/build-nodes.sh --without-kubelet || true; }"
    assert images.startswith("/venv/bin/python hack/harness/images.py --jobs 2 torch pause; rc=$?; wait $pid")
    assert "build.sh" not in command and "build_operator" not in command


@pytest.mark.parametrize(
    ("sentence", "images_rc", "nodes_rc", "rc"),
    [
        ("both passed", 0, 0, 0),
        ("the images failed: their status", 3, 0, 3),
        ("the node parts failed: theirs", 0, 2, 2),
        ("both failed: the images'", 3, 2, 3),
    ],
)
def test_the_builds_status(sentence: str, images_rc: int, nodes_rc: int, rc: int) -> None:
    """The command's own shell, with each stream replaced by an exit code."""
    images = realnode_prebuild.build_command("py").split(" & pid=$!; ", 1)[1]
    script = f"{{ exit {nodes_rc}; }} & pid=$!; " + images.replace(images.split(";")[0], f"(exit {images_rc})", 1)
    assert subprocess.run(["bash", "-c", script], check=False).returncode == rc, sentence


def test_wait_reports_how_long_the_build_took_not_how_long_ago_it_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The build ended 100 s after it started, an hour ago: `wait` says 100 s (a cold run printed the time since the
    start, 2,688 s, for a build that had taken 1,452 s)."""
    started = time.time() - 3600
    (tmp_path / "started").write_text(f"{started}\n")
    (tmp_path / "pid").write_text("1")
    (tmp_path / "rc").write_text("0")
    os.utime(tmp_path / "rc", (started + 100, started + 100))
    assert realnode_prebuild.wait(tmp_path, timeout_s=0) == 0
    assert "built in 100 s, waited 0 s" in capsys.readouterr().out
