"""The offline CLI in forked workers: a long TrainJob file cut into runs of whole documents, each run loaded, checked
and rendered in its own process, must say byte for byte what one process says (stdout, stderr, exit code); whatever
the split cannot take goes through the one process, which then reports it.

The split is made to happen on small inputs by lowering `offline.workers.PER_WORKER`; a recorder around `forked.forked_map`
shows whether the workers did the work (without it, equal output would also follow from an unnoticed fallback).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator import cli
from trainjob_operator.api import constants as c
from trainjob_operator.codec import yamltext
from trainjob_operator.offline import forked, workers

RT = RuntimeBuilder.make(name="torch").ml_policy(num_nodes=1, torch={})


def trainjob(i: int, **changes: Any) -> dict[str, Any]:
    job = TrainJobBuilder.make(name=f"job-{i}", runtime="torch").trainer(
        numNodes=2, env=[{"name": "N", "value": str(i)}]
    )
    for path, value in changes.items():
        job = job.set(path.replace("__", "."), value)
    return job.raw()


def stream(*docs: dict[str, Any] | str) -> str:
    """A YAML stream: dicts as `---` documents, strings as written."""
    return "".join(d if isinstance(d, str) else "---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs)


def many(n: int, odd: Callable[[int], dict[str, Any] | str] | None = None, at: tuple[int, ...] = ()) -> str:
    return stream(*(odd(i) if odd is not None and i in at else trainjob(i) for i in range(n)))


# ------------------------------------------------------------------------------------------ yamltext.document_chunks


@dataclass(frozen=True)
class ChunkCase:
    text: str
    parts: int
    cut: bool


CHUNK_CASES = {
    "a stream of documents is cut into the parts asked for": ChunkCase(many(6), 3, True),
    "comments before the first document do not stop the cut": ChunkCase("# header\n\n" + many(4), 2, True),
    "a document before the first `---` is not cut (its number is unknown to the chunks)": ChunkCase(
        "a: 1\n" + many(4), 2, False
    ),
    "a directive belongs to the next document: not cut": ChunkCase(many(2) + "%YAML 1.1\n" + many(2), 2, False),
    "anchors: not cut (the whole text's way)": ChunkCase(many(2) + "---\na: &x 1\nb: *x\n" + many(2), 2, False),
    "fewer documents than parts: not cut": ChunkCase(many(2), 3, False),
    "one part: not cut": ChunkCase(many(4), 1, False),
}


@pytest.mark.parametrize("case", CHUNK_CASES.values(), ids=CHUNK_CASES.keys())
def test_document_chunks_load_to_the_whole_streams_documents(case: ChunkCase) -> None:
    chunks = yamltext.document_chunks(case.text, case.parts)
    if not case.cut:
        assert chunks is None
        return
    assert chunks is not None and len(chunks) == case.parts
    assert "".join(chunk.text for chunk in chunks) == case.text
    loaded = [yamltext.load_chunk(chunk) for chunk in chunks]
    assert [doc for docs in loaded for doc in docs] == yamltext.load_all(case.text)
    assert [chunk.first for chunk in chunks] == [sum(len(docs) for docs in loaded[:i]) for i in range(len(chunks))]
    assert sum(chunk.budget for chunk in chunks) <= yamltext.MAX_NODES


def test_a_chunk_loads_within_its_share_of_values_counted_exactly_when_the_estimate_is_over() -> None:
    text = many(6)
    chunk = yamltext.Chunk(text, 0, 6, budget=yamltext.check_events(text))
    assert not yamltext.plainly_few(text, chunk.budget)  # the character estimate alone would refuse it
    assert yamltext.load_chunk(chunk) == yamltext.load_all(text)
    with pytest.raises(yamltext.YamlError, match="more than its share of values"):
        yamltext.load_chunk(dataclasses.replace(chunk, budget=chunk.budget - 1))


def test_a_chunk_nested_too_deeply_refuses_to_load() -> None:
    deep = "---\na:\n" + "".join(" " * (i + 1) + "b:\n" for i in range(yamltext.MAX_DEPTH + 1))
    with pytest.raises(yamltext.YamlError, match="nested deeper"):
        yamltext.load_chunk(yamltext.Chunk(deep, 0, 1, budget=yamltext.MAX_NODES))


LOAD_FAILS = {
    "an empty document (`---` twice): the whole stream's numbering skips it": many(3) + "---\n" + many(3),
    "a document ended by `...` and another without `---`": many(3) + "---\na: 1\n...\nb: 2\n" + many(3),
    "a quoted scalar a chunk would cut": many(3) + '---\na: "x\n---\ny"\n' + many(3),
}


@pytest.mark.parametrize("text", LOAD_FAILS.values(), ids=LOAD_FAILS.keys())
def test_a_chunk_that_does_not_hold_one_document_per_start_refuses_to_load(text: str) -> None:
    chunks = yamltext.document_chunks(text, 7)
    assert chunks is not None
    with pytest.raises(yamltext.YamlError):
        for chunk in chunks:
            yamltext.load_chunk(chunk)


# ------------------------------------------------------------------------------------------------ forked.forked_map


def square_or_fail(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    if x == 4:
        os._exit(9)  # a worker that dies without a word
    return x * x


@pytest.mark.parametrize(
    ("slices", "expected"),
    [
        ([1, 2, 5, 6], [1, 4, 25, 36]),
        ([2], [4]),
        ([], []),
        ([1, 3, 5], None),  # an exception in a worker
        ([3, 1], None),  # an exception in the parent's own slice
        ([1, 4], None),  # a worker that died
    ],
)
def test_forked_map_gives_every_result_in_order_or_none(slices: list[int], expected: list[int] | None) -> None:
    assert forked.forked_map(square_or_fail, slices) == expected
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no worker is left behind


def test_workers_are_within_bounds() -> None:
    assert [forked.workers(n) for n in (0, 1, 3, 64)] == [1, 1, 3, forked.MAX_WORKERS]
    assert forked.workers(None) == min(forked.usable_cpus(), forked.MAX_WORKERS)


# ------------------------------------------------------------------------------------------- the CLI, both ways


@dataclass(frozen=True)
class Said:
    code: int
    out: str
    err: str


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each split run was done by the workers (True) or given back to the one process (False)."""
    monkeypatch.setattr(workers, "PER_WORKER", 2)
    done: list[bool] = []
    real = forked.forked_map

    def recording(fn: Any, slices: Any) -> Any:
        result = real(fn, slices)
        done.append(result is not None)
        return result

    monkeypatch.setattr(forked, "forked_map", recording)
    yield done


def cli_run(capsys: pytest.CaptureFixture[str], *argv: str) -> Said:
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return Said(code, captured.out, captured.err)


@dataclass(frozen=True)
class SplitCase:
    trainjobs: str
    in_workers: bool
    runtimes: str = stream(RT.raw())
    old: str | None = None
    flags: tuple[str, ...] = ()


def bad_env(i: int) -> dict[str, Any]:
    return trainjob(i, spec__trainer__numNodes=-1)


SPLIT_CASES = {
    "valid TrainJobs": SplitCase(many(9), True),
    "invalid TrainJobs here and there, the notes withheld": SplitCase(many(9, bad_env, (1, 7)), True),
    "a TrainJob whose runtime is missing (exit 2), the others rendered": SplitCase(
        many(9, lambda i: trainjob(i, spec__runtimeRef__name="gone"), (6,)), True
    ),
    "a TrainJob another controller manages: the build's warning in its place": SplitCase(
        many(9, lambda i: trainjob(i, spec__managedBy=c.MULTIKUEUE_MANAGED_BY), (5,)), True
    ),
    "unknown fields: the API server's strict decoding error each": SplitCase(
        many(9, lambda i: trainjob(i, spec__trainer__typo=1), (2, 8)), True
    ),
    "unknown fields with --validate=warn: pruned with a warning each": SplitCase(
        many(9, lambda i: trainjob(i, spec__trainer__typo=1), (2, 8)), True, flags=("--validate=warn",)
    ),
    "a run policy: its note": SplitCase(many(9, lambda i: trainjob(i, spec__activeDeadlineSeconds=60), (4,)), True),
    "a List among the documents: its items numbered": SplitCase(
        many(9, lambda i: {"apiVersion": "v1", "kind": "List", "items": [trainjob(i), trainjob(100 + i)]}, (6,)), True
    ),
    "the runtime among the TrainJobs: one process keeps the order": SplitCase(
        many(9, lambda i: RT.raw(), (6,)), False, runtimes=stream()
    ),
    "a TrainJob among the runtimes: one process": SplitCase(many(9), False, runtimes=stream(RT.raw(), trainjob(50))),
    "a YAML error late in the file: one process says where": SplitCase(
        many(9, lambda i: "---\nkind: [unclosed\n", (7,)), False
    ),
    "another kind late in the file: one process names it": SplitCase(
        many(9, lambda i: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, (7,)), False
    ),
    "an older API shape: one process says how to convert it": SplitCase(
        many(9, lambda i: {**trainjob(i), "apiVersion": "kubeflow.org/v2alpha1"}, (6,)), False
    ),
    "an empty document in the middle: one process numbers the rest": SplitCase(many(9, lambda i: "---\n", (4,)), False),
    "update rules against stored TrainJobs": SplitCase(
        many(9), True, old=many(9, lambda i: trainjob(i, spec__runtimeRef__name="other"), (3,))
    ),
}


COMMANDS = {
    "render -o json": ("render", "-o", "json"),
    "render -o yaml": ("render", "-o", "yaml"),
    "validate": ("validate",),
}


@pytest.mark.parametrize(
    ("case", "command"),
    [
        pytest.param(case, command, id=f"{name}: {label}")
        for name, case in SPLIT_CASES.items()
        for label, command in COMMANDS.items()
        if case.old is None or command == ("validate",)  # --old is a validate flag
    ],
)
def test_workers_say_what_one_process_says(
    case: SplitCase,
    command: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    forks: list[bool],
) -> None:
    (tmp_path / "tj.yaml").write_text(case.trainjobs)
    (tmp_path / "rt.yaml").write_text(case.runtimes)
    argv = [*command, "-f", str(tmp_path / "tj.yaml"), "-r", str(tmp_path / "rt.yaml"), *case.flags]
    if case.old is not None:
        (tmp_path / "old.yaml").write_text(case.old)
        argv += ["--old", str(tmp_path / "old.yaml")]
    alone = cli_run(capsys, *argv, "--workers", "1")
    assert forks == []
    together = cli_run(capsys, *argv, "--workers", "3")
    assert together == alone
    assert forks == ([True] if case.in_workers else [False] if forks else [])


@pytest.mark.parametrize(
    ("value", "says"),
    [("0", "argument --workers: 0 is less than 1"), ("two", "argument --workers: 'two' is not a whole number")],
)
def test_a_bad_worker_count_is_refused_naming_the_flag(
    value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    said = cli_run(capsys, "validate", "--workers", value, "-f", "unread.yaml")
    assert (said.code, said.out, said.err) == (
        2,
        "",
        f"trainjob-operator validate: error: {says}; see `trainjob-operator validate --help`\n",
    )


@pytest.mark.parametrize(
    ("sizes", "in_workers"),
    [
        pytest.param((9, 7), True, id="two long files: each cut, the runs spread over the workers"),
        pytest.param((9, 1), True, id="a long file and a one-TrainJob file: the short one whole"),
        pytest.param((1, 1), False, id="two one-TrainJob files: done before a worker is forked"),
    ],
)
def test_several_trainjob_files_both_ways(
    sizes: tuple[int, int],
    in_workers: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    forks: list[bool],
) -> None:
    argv = ["render", "-o", "yaml", "-r", str(tmp_path / "rt.yaml")]
    (tmp_path / "rt.yaml").write_text(stream(RT.raw()))
    for number, size in enumerate(sizes):
        path = tmp_path / f"tj{number}.yaml"
        path.write_text(stream(*(trainjob(100 * number + i) for i in range(size))))
        argv += ["-f", str(path)]
    alone = cli_run(capsys, *argv, "--workers", "1")
    together = cli_run(capsys, *argv, "--workers", "3")
    assert together == alone and alone.code == 0
    assert forks == ([True] if in_workers else [])


def test_a_file_past_the_whole_texts_character_estimate_is_still_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forks: list[bool]
) -> None:
    """4,500 TrainJobs: too many structural characters for `plainly_few` as a whole (the one process counts the
    events), each half within its share when counted."""
    one = stream(trainjob(0))
    text = "".join(one.replace("name: job-0", f"name: job-{i}") for i in range(4500))
    assert not yamltext.plainly_few(text)
    (tmp_path / "tj.yaml").write_text(text)
    (tmp_path / "rt.yaml").write_text(stream(RT.raw()))
    argv = ["validate", "-f", str(tmp_path / "tj.yaml"), "-r", str(tmp_path / "rt.yaml")]
    alone = cli_run(capsys, *argv, "--workers", "1")
    together = cli_run(capsys, *argv, "--workers", "2")
    assert together == alone == Said(0, "", "valid: 4500 TrainJob(s), 1 runtime(s)\n")
    assert forks == [True]
