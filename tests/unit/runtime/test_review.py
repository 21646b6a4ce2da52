"""runtime/review.py: the one admission review, the runtime lookup rules and the managedBy rule; and the proof that
the webhooks and the offline CLI say the same words for the same objects (both run on one table)."""

import asyncio
import datetime as dt
from dataclasses import dataclass, field

import pytest

from builders import RuntimeBuilder, TrainJobBuilder, replicated_job
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.controller.runtimes import RuntimeResolver
from trainjob_operator.controller.store import Store
from trainjob_operator.controller.webhooks import Webhooks
from trainjob_operator.offline.check import check_runtimes, check_trainjobs
from trainjob_operator.offline.inputs import Document, Inputs
from trainjob_operator.runtime.errors import aggregate, invalid
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.review import (
    Review,
    RuntimeKey,
    foreign_manager,
    review_trainjob,
    reviewed,
    runtime_key,
)

FRAMEWORK = Framework.from_registry()
TJ = TrainJobBuilder.make(namespace="team")
RT = RuntimeBuilder.make(namespace="team")
CTR = RuntimeBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
DEPRECATED = {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED}


def env(*names: str) -> list[dict[str, str]]:
    return [{"name": name, "value": "x"} for name in names]


# --- the lookup rules --------------------------------------------------------------------------------------------

KEYS: dict[str, tuple[TrainJobBuilder, RuntimeKey | None]] = {
    "a TrainingRuntime is looked up in the TrainJob's namespace": (
        TJ,
        RuntimeKey(c.TRAINING_RUNTIME_KIND, "team", "test-runtime"),
    ),
    "a ClusterTrainingRuntime is looked up in no namespace": (
        TrainJobBuilder.make(namespace="team", kind=c.CLUSTER_TRAINING_RUNTIME_KIND),
        RuntimeKey(c.CLUSTER_TRAINING_RUNTIME_KIND, "", "test-runtime"),
    ),
    "a runtimeRef without a kind names a ClusterTrainingRuntime (the API's default)": (
        TJ.set("spec.runtimeRef", {"name": "torch"}),
        RuntimeKey(c.CLUSTER_TRAINING_RUNTIME_KIND, "", "torch"),
    ),
    "a TrainJob without a namespace reads TrainingRuntimes of the default namespace": (
        TJ.set("metadata", {"name": "job"}),
        RuntimeKey(c.TRAINING_RUNTIME_KIND, "default", "test-runtime"),
    ),
    "a runtimeRef of another API group names nothing this operator serves": (
        TJ.set("spec.runtimeRef.apiGroup", "example.com"),
        None,
    ),
    "a runtimeRef of another kind names nothing this operator serves": (TJ.set("spec.runtimeRef.kind", "Other"), None),
}


@pytest.mark.parametrize("case", KEYS.values(), ids=KEYS.keys())
def test_runtime_key(case: tuple[TrainJobBuilder, RuntimeKey | None]) -> None:
    job, want = case
    assert runtime_key(job.obj()) == want


def test_runtime_keys_read_as_the_messages_name_them() -> None:
    assert [
        str(RuntimeKey.of(c.TRAINING_RUNTIME_KIND, "team", "a")),
        str(RuntimeKey.of(c.CLUSTER_TRAINING_RUNTIME_KIND, "team", "a")),
    ] == [
        "TrainingRuntime team/a",
        "ClusterTrainingRuntime a",
    ]


# --- who manages it ----------------------------------------------------------------------------------------------

MANAGERS: dict[str, tuple[TrainJobBuilder, str | None]] = {
    "a TrainJob without managedBy is this operator's": (TJ, None),
    "a TrainJob managed by the Trainer controller is this operator's": (
        TJ.set("spec.managedBy", c.DEFAULT_MANAGED_BY),
        None,
    ),
    "a TrainJob managed by MultiKueue belongs to MultiKueue": (
        TJ.set("spec.managedBy", c.MULTIKUEUE_MANAGED_BY),
        c.MULTIKUEUE_MANAGED_BY,
    ),
}


@pytest.mark.parametrize("case", MANAGERS.values(), ids=MANAGERS.keys())
def test_foreign_manager(case: tuple[TrainJobBuilder, str | None]) -> None:
    job, want = case
    assert foreign_manager(job.obj()) == want


# --- the review ----------------------------------------------------------------------------------------------------


def test_a_review_with_errors_refuses_with_the_aggregate_message() -> None:
    errors = (invalid("spec.a", 1, "bad"), invalid("spec.b", 2, "worse"))
    review = Review(errors, ("careful",))
    assert (review.allowed, review.message, review.lines) == (
        False,
        "[spec.a: Invalid value: 1: bad, spec.b: Invalid value: 2: worse]",
        ["spec.a: Invalid value: 1: bad", "spec.b: Invalid value: 2: worse"],
    )
    assert (Review().allowed, Review().message) == (True, "")


def test_a_missing_runtime_is_refused_in_upstreams_words() -> None:
    review = review_trainjob(FRAMEWORK, None, TJ.obj(), None)
    assert review.message == (
        'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org",'
        '"kind":"TrainingRuntime"}: TrainingRuntime.trainer.kubeflow.org "test-runtime" not found: specified '
        "trainingRuntime must be created before the TrainJob is created"
    )


OPERATIONS = {
    "TrainJobs are reviewed on create": (c.TRAINJOB_KIND, "CREATE", True),
    "TrainJobs are reviewed on update": (c.TRAINJOB_KIND, "UPDATE", True),
    "TrainJobs are not reviewed on delete": (c.TRAINJOB_KIND, "DELETE", False),
    "TrainingRuntimes are reviewed on create only": (c.TRAINING_RUNTIME_KIND, "UPDATE", False),
    "ClusterTrainingRuntimes are reviewed on update": (c.CLUSTER_TRAINING_RUNTIME_KIND, "UPDATE", True),
    "another kind is never reviewed": ("Pod", "CREATE", False),
}


@pytest.mark.parametrize("case", OPERATIONS.values(), ids=OPERATIONS.keys())
def test_reviewed_operations(case: tuple[str, str, bool]) -> None:
    kind, operation, want = case
    assert reviewed(kind, operation) is want


# --- the webhook and the CLI on one table -------------------------------------------------------------------------


@dataclass
class Row:
    trainjob: TrainJobBuilder | None = None
    runtimes: list[RuntimeBuilder] = field(default_factory=list)
    runtime: RuntimeBuilder | None = None
    """A runtime reviewed on its own (the runtime webhooks)."""
    allowed: bool = True


SAME_WORDS: dict[str, Row] = {
    "a valid TrainJob is admitted without a word": Row(TJ, [RT]),
    "a TrainJob on a deprecated ClusterTrainingRuntime is admitted with a warning": Row(
        TrainJobBuilder.make(namespace="team", kind=c.CLUSTER_TRAINING_RUNTIME_KIND),
        [CTR.set("metadata.labels", DEPRECATED)],
    ),
    "a TrainJob setting reserved XGBoost envs is refused with every error": Row(
        TJ.trainer(env=env("DMLC_TRACKER_URI", "OK", "DMLC_TASK_ID")), [RT.ml_policy(xgboost={})], allowed=False
    ),
    "a TrainJob setting one reserved XGBoost env is refused with that error": Row(
        TJ.trainer(env=env("DMLC_TASK_ID")), [RT.ml_policy(xgboost={})], allowed=False
    ),
    "a TrainJob naming a runtime of another API group is refused": Row(
        TJ.set("spec.runtimeRef.apiGroup", "example.com"), [RT], allowed=False
    ),
    "a valid runtime is admitted": Row(runtime=RT),
    "a deprecated ClusterTrainingRuntime is admitted with a warning": Row(
        runtime=CTR.set("metadata.labels", DEPRECATED)
    ),
    "an ancestor job of two replicas is refused": Row(
        runtime=RT.jobs(
            [
                replicated_job(
                    c.DATASET_INITIALIZER, c.DATASET_INITIALIZER, [{"name": c.DATASET_INITIALIZER}], replicas=2
                ),
                replicated_job(c.NODE, c.ANCESTOR_TRAINER, [{"name": c.NODE}]),
            ]
        ),
        allowed=False,
    ),
}


def webhook_says(row: Row) -> tuple[bool, str, list[str]]:
    store = Store()
    for runtime in row.runtimes:
        raw = runtime.raw()
        (store.runtimes if raw["kind"] == c.TRAINING_RUNTIME_KIND else store.cluster_runtimes).put(raw)
    client = FakeClient()  # the API server has nothing beyond what the cache holds
    hooks = Webhooks(
        FRAMEWORK,
        RuntimeResolver(client, store, FRAMEWORK.runtime_models()),
        store,
        client,
        lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )
    if row.trainjob is not None:
        verdict = asyncio.run(hooks.validate_trainjob({"operation": "CREATE", "object": row.trainjob.raw()}))
    else:
        assert row.runtime is not None
        raw = row.runtime.raw()
        handler = (
            hooks.validate_training_runtime
            if raw["kind"] == c.TRAINING_RUNTIME_KIND
            else hooks.validate_cluster_training_runtime
        )
        verdict = asyncio.run(handler({"operation": "CREATE", "object": raw}))
    return verdict.allowed, verdict.message, list(verdict.warnings)


def cli_says(row: Row) -> tuple[bool, str, list[str]]:
    """What `validate` says of the row's object: its error lines (aggregated as the API server would show them) and
    the warnings about that object alone."""
    runtimes = row.runtimes if row.trainjob is not None else [row.runtime] if row.runtime is not None else []
    inputs = Inputs(runtimes=[Document("-r", runtime.raw()) for runtime in runtimes])
    checked_runtimes = check_runtimes(inputs, FRAMEWORK)
    if row.trainjob is None:
        checked = checked_runtimes
        before = 0
    else:
        assert checked_runtimes.errors == []
        checked = check_trainjobs([Document("-f", row.trainjob.raw())], checked_runtimes, FRAMEWORK)
        before = len(checked_runtimes.warnings)
    assert checked.unusable == []
    problems = [problem for _, found in checked.errors for problem in found]
    return not problems, aggregate(problems) if problems else "", checked.warnings[before:]


@pytest.mark.parametrize("row", SAME_WORDS.values(), ids=SAME_WORDS.keys())
def test_the_webhook_and_the_cli_say_the_same_words(row: Row) -> None:
    said = webhook_says(row)
    assert said == cli_says(row)
    assert said[0] is row.allowed
