"""A long input cut into runs of whole documents, each checked and rendered in a forked worker; the outcomes merged
in input order (`forked.forked_map`)."""

from collections.abc import Sequence

from ..api import constants as c
from ..codec import yamltext
from ..runtime.pipeline import Framework
from . import forked
from .check import Checked, check_runtimes, check_trainjobs, crd_schema
from .forked import PER_WORKER
from .inputs import Document, UsageError, documents, read_inputs, read_text, refuse_legacy
from .outcome import Outcome, outcome

Unit = tuple[str, yamltext.Chunk | str]
"""Part of a TrainJob file: its path and a run of its documents, or its whole text."""


def in_workers(
    trainjob_files: Sequence[str],
    runtime_files: Sequence[str],
    old_files: Sequence[str],
    framework: Framework,
    output: str | None,
    workers: int,
    unknown_fields: str = "strict",
) -> Outcome | None:
    """The outcome of the input, with its TrainJob files cut into runs of whole documents
    (`yamltext.document_chunks`), each run loaded, checked and rendered in one of `workers` forked processes; the
    runtimes are checked once, before. None when the input does not suit (fewer than `PER_WORKER` TrainJobs per
    worker; a runtime among the TrainJobs, or a TrainJob among the runtimes, whose order the one-process path keeps)
    or anything at all fails:
    the caller then does it all in one process, which says what is wrong and where."""
    try:
        texts = [(path, read_text(path)) for path in trainjob_files]
        starts = [text.count("\n---") for _, text in texts]  # about the number of documents
        if sum(starts) < 2 * PER_WORKER:
            return None  # a short input is done before a worker is forked
        units: list[Unit] = []
        for (path, text), count in zip(texts, starts, strict=True):
            chunks = yamltext.document_chunks(text, min(workers, count // PER_WORKER))
            units += [(path, chunk) for chunk in chunks] if chunks is not None else [(path, text)]
        if len(units) < 2:
            return None
        inputs = read_inputs([], runtime_files, old_files)
        if inputs.trainjobs:
            return None
        runtimes = check_runtimes(inputs, framework, unknown_fields)
        crd_schema(c.TRAINJOB_KIND)  # loaded once, before the workers are forked
    except Exception:  # the one-process path reports it
        return None
    groups = _groups(units, workers)

    def group_outcome(group: int) -> Outcome:
        trainjobs: list[Document] = []
        for path, run in groups[group]:
            if isinstance(run, yamltext.Chunk):
                loaded = documents(path, yamltext.load_chunk(run), before=run.first)
            else:
                loaded = documents(path, yamltext.load_all(run))
            for doc in loaded:
                refuse_legacy(doc, path)
                if doc.raw.get("kind") != c.TRAINJOB_KIND:
                    raise UsageError(f"{doc.source}: not a TrainJob")  # the one-process path decides what it is
                trainjobs.append(doc)
        catalog_only = Checked([], runtimes.catalog, [], [], 0, old=runtimes.old)
        return outcome(check_trainjobs(trainjobs, catalog_only, framework, unknown_fields), framework, output)

    said = forked.forked_map(group_outcome, range(len(groups)))
    if said is None:
        return None
    total = outcome(runtimes, framework, None)
    for part in said:
        total += part
    return total if total.trainjobs else None  # "no TrainJob found" is the one-process path's to say


def _groups(units: list[Unit], workers: int) -> list[list[Unit]]:
    """Consecutive units in at most `workers` groups of about equal text."""
    sizes = [len(run.text if isinstance(run, yamltext.Chunk) else run) for _, run in units]
    total, seen = sum(sizes), 0
    groups: list[list[Unit]] = [[] for _ in range(workers)]
    for unit, size in zip(units, sizes, strict=True):
        groups[min(workers - 1, seen * workers // max(total, 1))].append(unit)
        seen += size
    return [group for group in groups if group]
