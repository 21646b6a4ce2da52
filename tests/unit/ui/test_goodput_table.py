"""Issue 35: `trainjob-operator goodput` reads the TrainJobs with the kubeconfig and prints the table (against the
fake API server)."""

from pathlib import Path

import pytest

from trainjob_operator import cli


def test_a_kubeconfig_that_does_not_exist_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["goodput", "--kubeconfig", str(tmp_path / "none")]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("trainjob-operator goodput: error:")


def test_goodput_is_a_command() -> None:
    assert "goodput" in cli.parser().format_help()
