"""The admission review the webhooks and the offline CLI share, the runtime lookup rules, and who manages a TrainJob.

The webhooks (`controller/webhooks.py`) and `trainjob-operator validate`/`render` (`offline/`) both call
`review_trainjob` and `review_runtime` and say what they return: the webhook as one AdmissionReview denial
(`Review.message`, Kubernetes' aggregate), the CLI as one line per error, so the same object gets the same words
from both (tests/unit/runtime/test_review.py runs both on one table). Where the runtime comes from differs (the watch cache
and the API; the -r files), the rules that name it do not: `runtime_key`.
"""

from typing import NamedTuple

from ..api import constants as c
from ..api.runtime import ClusterTrainingRuntime, TrainingRuntime
from ..api.trainjob import TrainJob
from .errors import FieldError, Validation, aggregate
from .info import RuntimeInfo, RuntimeSource
from .observed import NOTHING, Observed
from .pipeline import Framework
from .validation import admit_runtime, admit_trainjob

# --- which runtime ---------------------------------------------------------------------------------------------------


class RuntimeKey(NamedTuple):
    """A runtime as a TrainJob names it: a TrainingRuntime lives in the TrainJob's namespace, a
    ClusterTrainingRuntime in none (`namespace` is ""). A tuple: made and hashed once per TrainJob checked."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, kind: str, namespace: str | None, name: str) -> "RuntimeKey":
        return cls(kind, (namespace or "") if kind == c.TRAINING_RUNTIME_KIND else "", name)

    def __str__(self) -> str:
        """`TrainingRuntime ns/name`, `ClusterTrainingRuntime name`."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


def runtime_key(job: TrainJob) -> RuntimeKey | None:
    """The runtime the TrainJob's `spec.runtimeRef` names, or None when it names no kind this operator serves (another
    apiGroup, another kind): the webhook refuses those, the reconciler marks them Failed."""
    ref = job.spec.runtime_ref
    if ref.api_group != c.GROUP or ref.kind not in c.RUNTIME_KINDS:
        return None
    return RuntimeKey.of(ref.kind, job.namespace, ref.name)


# --- who manages it --------------------------------------------------------------------------------------------------


def foreign_manager(job: TrainJob) -> str | None:
    """The controller `spec.managedBy` names when it is not this operator (unset means this operator): the reconciler
    leaves such a TrainJob alone, `render` warns that it would build nothing for it."""
    managed_by = job.spec.managed_by
    return managed_by if managed_by not in (None, c.DEFAULT_MANAGED_BY) else None


# --- the review ------------------------------------------------------------------------------------------------------


class Review(NamedTuple):
    """What admission says of one object: refused when there is an error, with warnings either way."""

    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, validation: Validation) -> "Review":
        return cls(validation.errors, validation.warnings)

    @property
    def allowed(self) -> bool:
        return not self.errors

    @property
    def message(self) -> str:
        """The denial as the API server shows it (Kubernetes' aggregate of the errors); "" when allowed."""
        return aggregate(list(self.errors)) if self.errors else ""

    @property
    def lines(self) -> list[str]:
        """The errors one per line, as the CLI prints them."""
        return [str(error) for error in self.errors]


def review_unparsed(errors: list[FieldError]) -> Review:
    """An object that does not parse into its model: refused with the parser's field errors."""
    return Review(tuple(errors))


def review_trainjob(
    framework: Framework,
    old: TrainJob | None,
    new: TrainJob,
    runtime: RuntimeSource | None,
    observed: Observed = NOTHING,
    info: RuntimeInfo | None = None,
) -> Review:
    """The TrainJob validating webhook's review of `new` (replacing `old` on an update), `runtime` being what
    `runtime_key(new)` found (None: it does not exist); `info` as for `Framework.validate`."""
    return Review.of(admit_trainjob(framework, old, new, lambda *_: runtime, observed, info))


def review_runtime(runtime: TrainingRuntime | ClusterTrainingRuntime, reported: tuple[FieldError, ...] = ()) -> Review:
    """The runtime validating webhooks' review. `reported`: errors the CRD's own checks already gave (the CLI runs
    both): a rule both enforce is said once, as the API server stops at the CRD."""
    said = {str(error) for error in reported}
    validation = admit_runtime(runtime)
    return Review(tuple(error for error in validation.errors if str(error) not in said), validation.warnings)


REVIEWED_OPERATIONS: dict[str, tuple[str, ...]] = {
    c.TRAINJOB_KIND: ("CREATE", "UPDATE"),
    # Upstream validates TrainingRuntimes on CREATE only (docs/upstream-behaviour.md#webhooks).
    c.TRAINING_RUNTIME_KIND: ("CREATE",),
    c.CLUSTER_TRAINING_RUNTIME_KIND: ("CREATE", "UPDATE"),
}
"""The operations each kind's validating webhook reviews; others (DELETE, CONNECT) are allowed as they are."""


def reviewed(kind: str, operation: object) -> bool:
    return operation in REVIEWED_OPERATIONS.get(kind, ())
