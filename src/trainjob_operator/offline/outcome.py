"""What `validate` and `render` say, as text (`Outcome`: forked workers' outcomes add up), and `render`'s build of
the checked TrainJobs."""

import io
from dataclasses import dataclass, field, fields
from typing import Any, Final, TextIO

from ..codec import jsontext, yamldump
from ..keys import FRESH_KEYS
from ..runtime.errors import BuildError, describe, printable
from ..runtime.observed import Observed
from ..runtime.pipeline import Framework
from ..runtime.review import foreign_manager
from ..runtime.snapshot import build_snapshot
from .check import Checked, lifecycle_notes
from .inputs import PROG

RENDERING: Final = Observed(keys=FRESH_KEYS)
"""What `render` builds against: nothing exists yet, and new key Secrets get fresh keys."""


@dataclass
class Outcome:
    """What `validate` or `render` has to say about some TrainJobs (and runtimes), as text. Outcomes of consecutive
    runs of the input add up (`+`) to the outcome of the whole, which is how forked workers' slices merge."""

    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Each invalid object's field errors, then its `invalid: ...` line."""
    invalid: int = 0
    unusable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """The lifecycle notes, said only when nothing is invalid."""
    built: str = ""
    """What the build phase said on stderr (objects it cannot build, foreign managers), in input order."""
    unbuilt: int = 0
    objects: int = 0
    texts: list[str] = field(default_factory=list)
    """Per run of objects: the objects as `render -o` writes them, without the JSON List around them (`write_objects`
    joins them)."""
    trainjobs: int = 0
    runtimes: int = 0

    def __add__(self, other: "Outcome") -> "Outcome":
        """Field by field: lists and texts follow each other, counts add up."""
        return Outcome(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def exit_code(self) -> int:
        return 2 if self.unusable or self.unbuilt else 1 if self.invalid else 0


_JSON_HEAD: Final = '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n'
_JSON_TAIL: Final = "\n  ]\n}"


def outcome(checked: Checked, framework: Framework, output: str | None) -> Outcome:
    """`checked` said as text; with an `output` (`render`), its TrainJobs built and written in that format."""
    said = Outcome(
        warnings=checked.warnings,
        invalid=len(checked.errors),
        unusable=list(checked.unusable),
        notes=lifecycle_notes(checked),
        trainjobs=checked.trainjob_count,
        runtimes=checked.runtime_count,
    )
    for doc, problems in checked.errors:
        said.errors += [str(problem) for problem in problems]
        said.errors.append(f"invalid: {doc.label}: {len(problems)} error(s)")
    if output is not None:
        messages = io.StringIO()
        objects = render(checked, framework, messages)
        said.built = messages.getvalue()
        said.unbuilt = len(checked.unusable) - len(said.unusable)
        said.objects = len(objects)
        said.texts = [items_text(objects, output)] if objects else []
    return said


def items_text(objects: list[dict[str, Any]], output: str) -> str:
    """The objects as `dump` writes them, without JSON's List around them: `write_objects` puts it back."""
    if output != "json":
        return yamldump.dump_all(objects)
    text = jsontext.indented({"apiVersion": "v1", "kind": "List", "items": objects})
    if not (text.startswith(_JSON_HEAD) and text.endswith(_JSON_TAIL)):  # every JSON encoder indents alike
        raise AssertionError("unexpected JSON layout of a List")
    return text[len(_JSON_HEAD) : -len(_JSON_TAIL)]


def write_objects(said: Outcome, output: str, out: TextIO) -> None:
    """What `dump` writes for the objects of `said`, run by run (megabytes each: not joined first). YAML documents
    follow each other, JSON List items take a comma between."""
    if output == "json" and not said.texts:
        out.write(jsontext.indented({"apiVersion": "v1", "kind": "List", "items": []}) + "\n")
        return
    as_json = output == "json"
    out.write(_JSON_HEAD if as_json else "")
    for number, text in enumerate(said.texts):
        out.write(",\n" if as_json and number else "")
        out.write(text)
    out.write(_JSON_TAIL + "\n" if as_json else "")


def report(said: Outcome, err: TextIO) -> None:
    for warning in said.warnings:
        print(printable(f"Warning: {warning}"), file=err)
    for line in said.errors:
        print(printable(line), file=err)
    for line in said.unusable:
        print(printable(f"{PROG}: error: {line}"), file=err)
    if not said.invalid:
        for note in said.notes:
            print(printable(note), file=err)


def render(checked: Checked, framework: Framework, err: TextIO) -> list[dict[str, Any]]:
    """The objects of every checked TrainJob; one that cannot be built is reported (exit 2), the others go on."""
    objects: list[dict[str, Any]] = []
    infos = checked.infos if len(checked.infos) == len(checked.jobs) else [None] * len(checked.jobs)
    checked.infos = []  # the build phase changes them: used once
    for (doc, job), info in zip(checked.jobs, infos, strict=True):
        ref = job.spec.runtime_ref
        runtime = checked.catalog.lookup(ref.kind or "", job.namespace, ref.name)
        assert runtime is not None  # check() kept only TrainJobs with a runtime
        manager = foreign_manager(job)
        if manager is not None:
            print(
                printable(
                    f"Warning: {doc.label}: spec.managedBy is {manager!r}: trainjob-operator does not reconcile this "
                    f"TrainJob and would not build the objects below (upstream's runtime builds them; the controller "
                    f"named in managedBy decides)"
                ),
                file=err,
            )
        try:
            if not job.name:
                raise BuildError(
                    "metadata.name is not set: the objects are named after the name the API server generates from "
                    "metadata.generateName; set metadata.name to render them"
                )
            built = [build_snapshot(job, runtime), *framework.desired_objects(job, runtime, RENDERING, info=info)]
        except BuildError as error:
            line = f"{doc.label}: cannot build: {error}"
        except Exception as error:  # the pure pipeline crashed on this input: name the object and the cause
            line = f"{doc.label}: cannot build: {describe(error)}"
        else:
            objects += built
            continue
        checked.unusable.append(line)
        print(printable(f"{PROG}: error: {line}"), file=err)
    return objects


def dump(objects: list[dict[str, Any]], output: str, out: TextIO) -> None:
    if output == "json":
        out.write(jsontext.indented({"apiVersion": "v1", "kind": "List", "items": objects}))
        out.write("\n")
    else:
        out.write(yamldump.dump_all(objects))
