"""A resize of a trainer cut into bounded Jobs (issue 37): 8 nodes at most 4 per Job are 2 Jobs of 4, 12 are 3 Jobs
of 4, so the Jobs' number changes while their size does not; JobSet keeps `replicatedJobs` immutable, so the
JobSet is rebuilt (runtime/lifecycle.py, `needs_rebuild`)."""

from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder, jobset_of
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.lifecycle import needs_rebuild, size_view
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework

FRAMEWORK = Framework.from_registry()
TORCH = RuntimeBuilder.make().ml_policy(num_nodes=1, torch={})


def jobset(nodes: int) -> dict[str, Any]:
    job = (
        TrainJobBuilder.make()
        .trainer(numNodes=nodes, command=["python", "train.py"])
        .set("metadata.annotations", {c.MAX_NODES_PER_JOB_ANNOTATION: "4"})
    )
    return jobset_of(FRAMEWORK.desired_objects(job.obj(), TORCH.source(), Observed()))


def as_stored(built: dict[str, Any]) -> dict[str, Any]:
    """What the API server returns: JobSet defaults every replicated job's replicas to 1."""
    jobs = [{"replicas": 1, **rjob} for rjob in built["spec"]["replicatedJobs"]]
    return {**built, "spec": {**built["spec"], "replicatedJobs": jobs}}


def as_cached(built: dict[str, Any]) -> dict[str, Any]:
    """What the operator's JobSet cache keeps of it (controller/store.py slims it to `size_view`)."""
    return {**built, "spec": {"replicatedJobs": size_view(as_stored(built)["spec"]["replicatedJobs"])}}


CASES = {
    "more Jobs of the same size: rebuilt": (jobset(12), as_stored(jobset(8)), True),
    "the same cut: kept": (jobset(8), as_stored(jobset(8)), False),
    "uncut: kept": (jobset(3), as_stored(jobset(3)), False),
    "the same cut as the cache keeps it: kept (a rebuild loop on every pass otherwise)": (
        jobset(8),
        as_cached(jobset(8)),
        False,
    ),
    "more Jobs as the cache keeps it: rebuilt": (jobset(12), as_cached(jobset(8)), True),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_cut_trainer_resized_is_rebuilt_only_when_its_jobs_change(case: tuple[Any, Any, bool]) -> None:
    desired, stored, rebuilt = case
    assert needs_rebuild(desired, stored) is rebuilt
