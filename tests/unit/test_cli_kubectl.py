"""The CLI behaves as kubectl does where kubectl has a behaviour: `-f`/`-r` take files, directories (`-R`) and `-`;
unknown fields are a strict decoding error unless `--validate` says otherwise; a nameless object is refused; a bad
flag value is one line and exit 2; every flag says what it is for; an empty `$KUBECONFIG` is no `$KUBECONFIG`."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_cli import RT, TJ, Result, run

from trainjob_operator import cli
from trainjob_operator.controller import main as operator_main
from trainjob_operator.ui import server as ui_server

PROG = "trainjob-operator"
CEL_SKIPPED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)
RUNTIME = RT.ml_policy(num_nodes=1, torch={})


def dump(*docs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(list(docs), sort_keys=False)


def job(name: str) -> dict[str, Any]:
    return TJ.set("metadata.name", name).raw()


# ------------------------------------------------------------------------------------ -f / -r: files, dirs, stdin


@dataclass(frozen=True)
class SourcesCase:
    files: dict[str, str]
    """Relative path -> text, written under the test's directory."""
    argv: list[str]
    """`validate` arguments; `{d}` is the test's directory."""
    stdin: str = ""
    code: int = 0
    err: str = ""
    """The whole stderr; `{d}` as above."""


def tree(**docs: str) -> dict[str, str]:
    return {path.replace("__", "/").replace("_yaml", ".yaml").replace("_json", ".json"): t for path, t in docs.items()}


SOURCES_CASES = [
    pytest.param(
        SourcesCase(
            {
                "jobs/a.yaml": dump(job("a")),
                "jobs/b.yml": dump(job("b")),
                "jobs/notes.txt": "not YAML: {",
                "rt.yaml": dump(RUNTIME.raw()),
            },
            ["-f", "{d}/jobs", "-r", "{d}/rt.yaml"],
            err="valid: 2 TrainJob(s), 1 runtime(s)\n",
        ),
        id="a directory: its .yaml and .yml files, nothing else (kubectl's extensions)",
    ),
    pytest.param(
        SourcesCase(
            {
                "all/a.yaml": dump(job("a")),
                "all/deeper/b.json": '{"apiVersion": "trainer.kubeflow.org/v1alpha1",'
                ' "kind": "TrainJob", "metadata": {"name": "b"}, "spec": {"runtimeRef": {"name": "test-runtime", '
                '"kind": "TrainingRuntime"}}}',
                "all/rt/rt.yaml": dump(RUNTIME.raw()),
            },
            ["-R", "-f", "{d}/all"],
            err="valid: 2 TrainJob(s), 1 runtime(s)\n",
        ),
        id="-R: the subdirectories too, JSON files included, TrainJobs and runtimes mixed as kubectl apply -f allows",
    ),
    pytest.param(
        SourcesCase(
            {"all/a.yaml": dump(job("a")), "all/deeper/rt.yaml": dump(RUNTIME.raw())},
            ["-f", "{d}/all"],
            code=2,
            err=f"{PROG}: error: TrainJob default/a ({{d}}/all/a.yaml#1): runtime TrainingRuntime default/test-runtime "
            "not found in the -r files\n",
        ),
        id="without -R a subdirectory is not read",
    ),
    pytest.param(
        SourcesCase(
            {"rt.yaml": dump(RUNTIME.raw())},
            ["-f", "-", "-r", "{d}/rt.yaml"],
            stdin=dump(job("a"), job("b")),
            err="valid: 2 TrainJob(s), 1 runtime(s)\n",
        ),
        id="-f -: the TrainJobs from stdin",
    ),
    pytest.param(
        SourcesCase(
            {"tj.yaml": dump(job("a"))},
            ["-f", "{d}/tj.yaml", "-r", "-"],
            stdin=dump(RUNTIME.raw()),
            err="valid: 1 TrainJob(s), 1 runtime(s)\n",
        ),
        id="-r -: the runtimes from stdin",
    ),
    pytest.param(
        SourcesCase(
            {},
            ["-f", "-"],
            stdin=dump(TJ.raw()),
            code=2,
            err=f"{PROG}: error: TrainJob default/test-job (STDIN#1): runtime TrainingRuntime default/test-runtime not "
            "found in the -r files\n",
        ),
        id="a document from stdin is named STDIN, as kubectl names it",
    ),
    pytest.param(
        SourcesCase(
            {},
            ["-f", "-", "-r", "-"],
            code=2,
            err=f"{PROG}: error: - (stdin) is given more than once; it can be read only once\n",
        ),
        id="stdin twice is refused: it can be read once",
    ),
    pytest.param(
        SourcesCase(
            {"empty/notes.txt": "x", "empty/deeper/a.yaml": dump(job("a"))},
            ["-f", "{d}/empty"],
            code=2,
            err=f"{PROG}: error: {{d}}/empty: no .json, .yaml, .yml file in the directory (-R reads its "
            "subdirectories too)\n",
        ),
        id="a directory without such files is one line naming it, with the way to its subdirectories",
    ),
    pytest.param(
        SourcesCase(
            {"odd.txt": dump(job("a")), "rt.yaml": dump(RUNTIME.raw())},
            ["-f", "{d}/odd.txt", "-r", "{d}/rt.yaml"],
            err="valid: 1 TrainJob(s), 1 runtime(s)\n",
        ),
        id="a file named on its own is read whatever its extension",
    ),
]


@pytest.mark.parametrize("case", SOURCES_CASES)
def test_files_directories_and_stdin(
    case: SourcesCase, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for relative, text in case.files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(case.stdin.encode())))
    result = run(capsys, "validate", *(arg.format(d=tmp_path) for arg in case.argv))
    assert result == Result(case.code, "", case.err.format(d=tmp_path))


def test_render_reads_stdin_once_whatever_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long input from stdin goes to the forked workers; the one-process path would read it again: both see it."""
    runtime = tmp_path / "rt.yaml"
    runtime.write_text(dump(RUNTIME.raw()))
    text = dump(*(job(f"j{i}") for i in range(250)))
    said = {}
    for workers in ("1", "2"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
        said[workers] = run(capsys, "render", "-f", "-", "-r", str(runtime), "--workers", workers)
    assert said["1"] == said["2"]
    assert (said["1"].code, said["1"].out.count("kind: JobSet")) == (0, 250)


# ---------------------------------------------------------------------------------- unknown fields: --validate


@dataclass(frozen=True)
class UnknownFieldCase:
    flags: list[str]
    code: int
    err: str
    """`{tj}` is the TrainJob file."""


TYPO = TJ.trainer(numNode=2).set("spec.suspendd", True)
STRICT = (
    'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: unknown field '
    '"spec.suspendd", unknown field "spec.trainer.numNode"\n'
    "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n"
)
UNKNOWN_FIELD_CASES = [
    pytest.param(
        UnknownFieldCase([], 1, STRICT), id="kubectl's default: strict, the API server's refusal in its words"
    ),
    pytest.param(UnknownFieldCase(["--validate=strict"], 1, STRICT), id="--validate=strict"),
    pytest.param(UnknownFieldCase(["--validate=true"], 1, STRICT), id="--validate=true is strict, as in kubectl"),
    pytest.param(
        UnknownFieldCase(
            ["--validate", "warn"],
            0,
            'Warning: TrainJob default/test-job ({tj}#1): unknown field "spec.suspendd"\n'
            'Warning: TrainJob default/test-job ({tj}#1): unknown field "spec.trainer.numNode"\n'
            "valid: 1 TrainJob(s), 1 runtime(s)\n",
        ),
        id="--validate=warn: pruned as the API server prunes, one warning per field",
    ),
    pytest.param(
        UnknownFieldCase(["--validate=ignore"], 0, "valid: 1 TrainJob(s), 1 runtime(s)\n"),
        id="--validate=ignore: pruned silently",
    ),
    pytest.param(
        UnknownFieldCase(["--validate=False"], 0, "valid: 1 TrainJob(s), 1 runtime(s)\n"),
        id="--validate=false is ignore, in any case",
    ),
    pytest.param(
        UnknownFieldCase(
            ["--validate=loose"],
            2,
            f'{PROG} validate: error: argument --validate: "loose" is not one of strict, warn, ignore (or true, '
            f"false); see `{PROG} validate --help`\n",
        ),
        id="another value: one line, exit 2",
    ),
]


@pytest.mark.parametrize("case", UNKNOWN_FIELD_CASES)
def test_unknown_fields_follow_kubectls_validate(
    case: UnknownFieldCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tj, rt = tmp_path / "tj.yaml", tmp_path / "rt.yaml"
    tj.write_text(dump(TYPO.raw()))
    rt.write_text(dump(RUNTIME.raw()))
    result = run(capsys, "validate", "-f", str(tj), "-r", str(rt), *case.flags)
    assert result == Result(case.code, "", case.err.format(tj=tj))


def test_a_runtime_with_an_unknown_field_is_refused_and_its_trainjobs_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tj, rt = tmp_path / "tj.yaml", tmp_path / "rt.yaml"
    tj.write_text(dump(TJ.raw()))
    rt.write_text(dump(RUNTIME.set("spec.template.spec.schedulerName", "x").raw()))
    result = run(capsys, "render", "-f", str(tj), "-r", str(rt))
    assert (result.code, result.out) == (1, "")
    assert result.err.splitlines() == [
        'TrainingRuntime in version "v1alpha1" cannot be handled as a TrainingRuntime: strict decoding error: unknown '
        'field "spec.template.spec.schedulerName"',
        f"invalid: TrainingRuntime default/test-runtime ({rt}#1): 1 error(s)",
        'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org","kind":'
        '"TrainingRuntime"}: TrainingRuntime default/test-runtime is invalid (its errors are listed above): the API '
        "server would not have stored it",
        f"invalid: TrainJob default/test-job ({tj}#1): 1 error(s)",
    ]


# ------------------------------------------------------------------------------------------------ names


@dataclass(frozen=True)
class NameCase:
    command: str
    metadata: dict[str, Any]
    code: int
    err: str


NAME_CASES = [
    pytest.param(
        NameCase(
            "validate",
            {"namespace": "default"},
            1,
            "metadata.name: Required value: name or generateName is required\n"
            f"{CEL_SKIPPED}\n"
            "invalid: TrainJob default/<unnamed> ({tj}#1): 2 error(s)\n",
        ),
        id="no name: the API server's error, and its CEL rules skipped (as kubectl create --dry-run=server says)",
    ),
    pytest.param(
        NameCase(
            "render",
            {"name": ""},
            1,
            "metadata.name: Required value: name or generateName is required\n"
            f"{CEL_SKIPPED}\n"
            "invalid: TrainJob  ({tj}#1): 2 error(s)\n",
        ),
        id="an empty name is no name: nothing is rendered",
    ),
    pytest.param(
        NameCase("validate", {"generateName": "tune-"}, 0, "valid: 1 TrainJob(s), 1 runtime(s)\n"),
        id="generateName alone is valid (the API server names it)",
    ),
    pytest.param(
        NameCase(
            "render",
            {"generateName": "tune-"},
            2,
            f"{PROG}: error: TrainJob <unnamed> ({{tj}}#1): cannot build: metadata.name is not set: the objects are "
            "named after the name the API server generates from metadata.generateName; set metadata.name to render "
            "them\n",
        ),
        id="render needs the name: the children are named after it",
    ),
]


@pytest.mark.parametrize("case", NAME_CASES)
def test_a_trainjob_without_a_name(case: NameCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nameless = TJ.raw()
    nameless["metadata"] = case.metadata
    tj, rt = tmp_path / "tj.yaml", tmp_path / "rt.yaml"
    tj.write_text(dump(nameless))
    rt.write_text(dump(RUNTIME.set("metadata.namespace", None).raw()))
    result = run(capsys, case.command, "-f", str(tj), "-r", str(rt))
    assert result == Result(case.code, "", case.err.format(tj=tj))


# ------------------------------------------------------------------------------------------- flags


BAD_FLAGS = [
    pytest.param(
        ["run", "--log-level", "debugg"],
        "trainjob-operator run: error: argument --log-level: 'debugg' is "
        "not one of debug, info, warning, error, critical; see `trainjob-operator run --help`",
        id="run --log-level debugg",
    ),
    pytest.param(
        ["run", "--health-port", "70000"],
        "trainjob-operator run: error: argument --health-port: 70000 is "
        "not a TCP port (1-65535); see `trainjob-operator run --help`",
        id="run: a port out of range",
    ),
    pytest.param(
        ["run", "--concurrency", "0"],
        "trainjob-operator run: error: argument --concurrency: 0 is less than 1; see `trainjob-operator run --help`",
        id="run --concurrency 0",
    ),
    pytest.param(
        ["run", "--qps", "many"],
        "trainjob-operator run: error: argument --qps: invalid float value: 'many'; see `trainjob-operator run --help`",
        id="run --qps many",
    ),
    pytest.param(
        ["run", "--burst", "-1"],
        "trainjob-operator: error: client.burst: Input should be greater than or equal to 0",
        id="run: a value the settings refuse",
    ),
    pytest.param(
        ["run", "--log-format", "xml"],
        "trainjob-operator run: error: argument --log-format: invalid "
        "choice: 'xml' (choose from 'json', 'console'); see `trainjob-operator run --help`",
        id="run --log-format xml",
    ),
    pytest.param(
        ["run", "--no-such-flag"],
        "trainjob-operator run: error: unrecognized arguments: --no-such-flag; see `trainjob-operator run --help`",
        id="run: an unknown flag",
    ),
    pytest.param(
        ["ui", "--port", "http"],
        "trainjob-operator ui: error: argument --port: 'http' is not a whole number; see `trainjob-operator ui --help`",
        id="ui --port http",
    ),
    pytest.param(
        ["render", "-f", "x.yaml", "-o", "xml"],
        "trainjob-operator render: error: argument -o/--output: "
        "invalid choice: 'xml' (choose from 'yaml', 'json'); see `trainjob-operator render --help`",
        id="render -o xml",
    ),
    pytest.param(
        ["convert"],
        "trainjob-operator convert: error: the following arguments are required: "
        "-f/--filename; see `trainjob-operator convert --help`",
        id="convert without -f",
    ),
    pytest.param(
        ["explain"],
        "trainjob-operator: error: argument COMMAND: invalid choice: 'explain' (choose from "
        "'render', 'validate', 'convert', 'run', 'ui', 'goodput'); see `trainjob-operator --help`",
        id="an unknown command",
    ),
]


@pytest.mark.parametrize(("argv", "line"), BAD_FLAGS)
def test_a_bad_flag_value_is_one_line_and_exit_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(capsys, *argv)
    assert result == Result(2, "", line + "\n")


def parsers() -> dict[str, argparse.ArgumentParser]:
    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    found = {f"{PROG} {name}": sub for name, sub in commands.choices.items() if name not in ("run", "ui")}
    return {PROG: top, **found, f"{PROG} run": operator_main.parser(), f"{PROG} ui": ui_server.parser()}


@pytest.mark.parametrize("name", sorted(parsers()))
def test_every_flag_says_what_it_is_for(name: str) -> None:
    undocumented = [
        "/".join(action.option_strings) or action.dest
        for action in parsers()[name]._actions
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert undocumented == []


# --------------------------------------------------------------------------------------------- KUBECONFIG=


@dataclass(frozen=True)
class KubeconfigCase:
    env: dict[str, str]
    line: Callable[[Path], str]
    args: list[str] = field(default_factory=list)


KUBECONFIG_CASES = [
    pytest.param(
        KubeconfigCase(
            {"KUBECONFIG": ""},
            lambda home: "kubeconfig ~/.kube/config does not exist; pass --kubeconfig PATH or set $KUBECONFIG",
        ),
        id="KUBECONFIG= (empty) is not set: the default file is looked for, as kubectl does",
    ),
    pytest.param(
        KubeconfigCase(
            {"KUBECONFIG": "/nowhere/config"},
            lambda home: "kubeconfig /nowhere/config does not exist; pass --kubeconfig PATH or set $KUBECONFIG",
        ),
        id="KUBECONFIG names a file: that one",
    ),
]


@pytest.mark.parametrize("case", KUBECONFIG_CASES)
def test_an_empty_kubeconfig_variable_is_unset(case: KubeconfigCase, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), **case.env}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.k8s.kubeconfig", *case.args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr.strip().splitlines()[-1]) == (2, "", case.line(tmp_path))
