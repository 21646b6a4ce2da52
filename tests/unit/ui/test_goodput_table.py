"""Issue 35: `trainjob-operator goodput` reads the TrainJobs with the kubeconfig and prints the table (against the
fake API server)."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_apiserver import FakeApiServer, Kind
from trainjob_operator import cli

TRAINJOBS = Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")


def test_a_kubeconfig_that_does_not_exist_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["goodput", "--kubeconfig", str(tmp_path / "none")]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("trainjob-operator goodput: error:")


def test_goodput_is_a_command() -> None:
    assert "goodput" in cli.parser().format_help()


def finished(namespace: str, name: str, state: str, **seconds: int) -> dict[str, Any]:
    """A TrainJob whose accounting is closed (phase Finished: its figures do not depend on the time it is read)."""
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"state": state, "goodput": {"phase": "Finished", "since": "2026-11-28T12:00:00Z", **seconds}},
    }


HUNG = finished(
    "team-a",
    "hung",
    "Complete",
    startingSeconds=30,
    trainingSeconds=600,
    stalledSeconds=20,
    restartingSeconds=10,
    accelerators=8,
    idleAcceleratorSeconds=480,
    firstProgressSeconds=45,
    stalls=1,
)
QUEUED = finished(
    "team-a", "queued", "Failed", queuedSeconds=3600, startingSeconds=60, trainingSeconds=1140, accelerators=4
)
OTHER = finished("team-b", "other", "Complete", startingSeconds=5, trainingSeconds=95, idleAcceleratorSeconds=0)
LEGACY = {"metadata": {"name": "legacy", "namespace": "team-b"}, "spec": {}, "status": {"state": "Running"}}
"""Written by an operator before issue 35 (or another controller): no accounting."""


def goodput(
    tmp_path: Path, *args: str, answer: int | None = None, trainjobs: tuple[dict[str, Any], ...] = ()
) -> tuple[int, list[str]]:
    """Run `trainjob-operator goodput ARGS` against a fake API server holding `trainjobs` (its list of TrainJobs
    answered `answer` when given): the exit code and the paths the command requested."""

    async def body() -> tuple[int, list[str]]:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.add(TRAINJOBS, *trainjobs)
            if answer is not None:
                fake.answer(lambda seen: seen.path.endswith("/trainjobs"), answer, message="trainjobs is forbidden")
            config = tmp_path / "kubeconfig"
            config.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "current-context": "fake",
                        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
                        "users": [{"name": "me", "user": {"token": "t"}}],
                    }
                )
            )
            # The command runs its own event loop (asyncio.run), in a thread while this loop serves it.
            code = await asyncio.to_thread(cli.main, ["goodput", "--kubeconfig", str(config), *args])
            return code, [seen.path for seen in fake.seen]

    return asyncio.run(body())


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    def call(*args: str, **kw: Any) -> tuple[int, list[str], list[str]]:
        code, paths = goodput(tmp_path, *args, **kw)
        return code, capsys.readouterr().out.rstrip("\n").splitlines(), paths

    return call


def cells(line: str) -> list[str]:
    return line.split()


def test_every_namespace_one_row_per_trainjob_in_order_then_the_sum(run: Any) -> None:
    code, lines, paths = run(trainjobs=(OTHER, HUNG, LEGACY, QUEUED))
    assert code == 0, lines
    assert cells(lines[0])[:4] == ["NAMESPACE", "NAME", "STATE", "PHASE"]
    assert [cells(line) for line in lines[1:]] == [
        # NAMESPACE NAME STATE PHASE QUEUED STARTING TRAINING RESTARTING STALLED GOODPUT ACCEL-H FIRST STALLS
        ["team-a", "hung", "Complete", "Finished", "0s", "30s", "10m00s", "10s", "20s", "90%", "0.13", "45s", "1"],
        ["team-a", "queued", "Failed", "Finished", "1h00m", "1m00s", "19m00s", "0s", "0s", "23%", "-", "-", "0"],
        ["team-b", "legacy", "Running", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
        ["team-b", "other", "Complete", "Finished", "0s", "5s", "1m35s", "0s", "0s", "95%", "0.00", "-", "0"],
        # 1,835 training seconds of 5,560 in all (percentages rounded down); 480 accelerator-seconds not training
        ["ALL", "1h00m", "1m35s", "30m35s", "10s", "20s", "33%", "0.13"],
    ]
    assert [p for p in paths if p.endswith("/trainjobs")] == ["/apis/trainer.kubeflow.org/v1alpha1/trainjobs"]


def test_one_namespace_lists_only_that_namespace(run: Any) -> None:
    code, lines, paths = run("-n", "team-b", trainjobs=(OTHER, HUNG, LEGACY, QUEUED))
    assert code == 0, lines
    assert [cells(line)[:2] for line in lines[1:-1]] == [["team-b", "legacy"], ["team-b", "other"]]
    assert cells(lines[-1]) == ["ALL", "0s", "5s", "1m35s", "0s", "0s", "95%", "0.00"]
    assert [p for p in paths if p.endswith("/trainjobs")] == [
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-b/trainjobs"
    ]


def test_no_trainjob_prints_the_header_and_an_empty_sum(run: Any) -> None:
    code, lines, _ = run()
    assert code == 0
    assert [cells(line) for line in lines[1:]] == [["ALL", "0s", "0s", "0s", "0s", "0s", "-", "0.00"]]


def test_a_list_refused_is_one_line_and_exit_1(run: Any) -> None:
    code, lines, _ = run(answer=403, trainjobs=(HUNG,))
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("trainjob-operator goodput: error: cannot list TrainJobs:"), lines
    assert "forbidden" in lines[0]
