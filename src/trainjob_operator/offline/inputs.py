"""The offline CLI's input: files, directories and stdin as kubectl reads them, their documents sorted by kind."""

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..api import constants as c
from ..api.legacy import legacy_shape
from ..codec import yamltext

PROG = "trainjob-operator"
STDIN = "-"
"""The file name that stands for the standard input, as in kubectl's `-f -`."""
FILE_EXTENSIONS = (".json", ".yaml", ".yml")


class UsageError(Exception):
    """Input the CLI cannot work with at all (exit 2)."""


@dataclass
class Document:
    source: str
    raw: dict[str, Any]

    @property
    def label(self) -> str:
        meta = self.raw.get("metadata") or {}
        name = meta.get("name", "<unnamed>") if isinstance(meta, dict) else "<unnamed>"
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        ref = f"{namespace}/{name}" if namespace else str(name)
        return f"{self.raw.get('kind')} {ref} ({self.source})"


def shown(path: str) -> str:
    """How a file is named in messages: stdin as kubectl names it."""
    return "STDIN" if path == STDIN else path


_stdin_text: list[str] = []
"""The standard input once read (it can be read only once; the workers' path and the one-process path both read
their files): emptied by `forget_stdin` before each command."""


def forget_stdin() -> None:
    _stdin_text.clear()


def read_text(path: str) -> str:
    try:
        if path == STDIN:
            if not _stdin_text:
                _stdin_text.append(sys.stdin.buffer.read().decode("utf-8"))
            return _stdin_text[0]
        with open(path, "rb") as stream:
            return stream.read().decode("utf-8")
    except OSError as err:
        raise UsageError(f"cannot read {shown(path)}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"{shown(path)}: not UTF-8 text (byte {err.start})") from err


def expand_paths(paths: Sequence[str], recursive: bool) -> list[str]:
    """The files that kubectl's `-f` reads for `paths`: a file as named, `-` (stdin, at most once), a directory's
    .json/.yaml/.yml files in lexical order (and those of its subdirectories with `recursive`, as `-R`)."""
    files: list[str] = []
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            files.append(path)
            continue
        found = list(_directory_files(path, recursive))
        if not found:
            deeper = "" if recursive else " (-R reads its subdirectories too)"
            raise UsageError(f"{path}: no {', '.join(FILE_EXTENSIONS)} file in the directory{deeper}")
        files += found
    if files.count(STDIN) > 1:
        raise UsageError("- (stdin) is given more than once; it can be read only once")
    return files


def _directory_files(directory: str, recursive: bool) -> Iterator[str]:
    try:
        entries = sorted(os.listdir(directory))
    except OSError as err:
        raise UsageError(f"cannot read {directory}: {err.strerror or err}") from err
    for entry in entries:
        path = os.path.join(directory, entry)
        if os.path.isdir(path):
            if recursive:
                yield from _directory_files(path, recursive)
        elif entry.endswith(FILE_EXTENSIONS):
            yield path


def load_documents(path: str) -> Iterator[Document]:
    """Every object of a YAML stream; `kind: List` objects are flattened."""
    text = read_text(path)
    try:
        docs = yamltext.load_all(text)
    except yamltext.YamlError as err:
        raise UsageError(f"{shown(path)}: {err}") from err
    return documents(path, docs)


def documents(path: str, docs: Iterable[Any], before: int = 0) -> Iterator[Document]:
    """The objects of the loaded documents of a stream (empty ones skipped, `kind: List` flattened), named by
    `path#number`; `before`: how many (non-empty) documents of the stream precede `docs`."""
    index = before
    name = shown(path)
    for doc in docs:
        if doc is None:
            continue
        index += 1
        if not isinstance(doc, dict):
            raise UsageError(f"{name}: document {index} is not a Kubernetes object (a mapping)")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item_number, item in enumerate(doc["items"], 1):
                if not isinstance(item, dict):
                    raise UsageError(f"{name}: item {item_number} of document {index} is not a mapping")
                yield Document(f"{name}#{index}.{item_number}", item)
        else:
            yield Document(f"{name}#{index}", doc)


@dataclass
class Inputs:
    trainjobs: list[Document] = field(default_factory=list)
    runtimes: list[Document] = field(default_factory=list)
    old: dict[tuple[str, str], Document] = field(default_factory=dict)
    """With `--old`: the stored TrainJobs an update replaces, by (namespace, name)."""


def refuse_legacy(doc: Document, path: str) -> None:
    """An older-shape object is named for what it is, with the command that converts it."""
    shape = legacy_shape(doc.raw)
    if shape is not None:
        raise UsageError(f"{doc.label} is {shape}; convert it with `{PROG} convert -f {path}` and use the output")


def read_inputs(trainjob_files: Sequence[str], runtime_files: Sequence[str], old_files: Sequence[str] = ()) -> Inputs:
    """Every object of every file, sorted by kind: a file may mix TrainJobs and runtimes (upstream's examples do)."""
    inputs = Inputs()
    found_in_f = 0
    for path, from_f in [(p, True) for p in trainjob_files] + [(p, False) for p in runtime_files]:
        for doc in load_documents(path):
            refuse_legacy(doc, path)
            kind = doc.raw.get("kind")
            if kind == c.TRAINJOB_KIND:
                inputs.trainjobs.append(doc)
            elif kind in c.RUNTIME_KINDS:
                inputs.runtimes.append(doc)
            else:
                raise UsageError(
                    f"{doc.source}: expected kind TrainJob, TrainingRuntime or ClusterTrainingRuntime, got {kind!r}"
                )
            found_in_f += from_f
    if trainjob_files and not found_in_f:
        raise UsageError(f"{', '.join(map(shown, trainjob_files))}: no TrainJob found")
    for path in old_files:
        for doc in load_documents(path):
            if doc.raw.get("kind") != c.TRAINJOB_KIND:
                raise UsageError(f"{doc.source}: expected kind TrainJob, got {doc.raw.get('kind')!r}")
            inputs.old[name_key(doc.raw)] = doc
    return inputs


def name_key(raw: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a TrainJob, by which `--old` matches the stored object an update replaces."""
    found = raw.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")
