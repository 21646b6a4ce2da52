"""The parsed runtime of a snapshot read back is shared by every TrainJob whose snapshot has the same text (one parse
for a thousand TrainJobs of one runtime), and freed with the last of them: what the reconciler keeps is bounded by the
TrainJobs that exist, not by every snapshot ever read (`Known.shared_source`, `Known.forget`)."""

from dataclasses import dataclass

import pytest

from builders import RuntimeBuilder
from trainjob_operator.controller.store import Known
from trainjob_operator.runtime.info import RuntimeSource

TORCH = RuntimeBuilder.make(name="torch").source()
TORCH_AGAIN = RuntimeBuilder.make(name="torch").source()
"""The same snapshot parsed again (another object)."""
OTHER = RuntimeBuilder.make(name="other").source()


@dataclass(frozen=True)
class Step:
    action: str  # "share" or "forget"
    uid: str
    text: str = ""
    fresh: RuntimeSource = TORCH


@dataclass(frozen=True)
class Case:
    steps: tuple[Step, ...]
    kept: dict[str, str]
    """Text → name of the parsed runtime kept for it."""
    users: dict[str, int]
    in_force: dict[str, str]
    """uid → name of its snapshot in force."""


CASES = {
    "two TrainJobs of one snapshot text share the first parse": Case(
        steps=(Step("share", "a", "t1"), Step("share", "b", "t1", TORCH_AGAIN)),
        kept={"t1": "torch"},
        users={"t1": 2},
        in_force={"a": "torch", "b": "torch"},
    ),
    "the parse stays while one TrainJob still uses it": Case(
        steps=(Step("share", "a", "t1"), Step("share", "b", "t1"), Step("forget", "a")),
        kept={"t1": "torch"},
        users={"t1": 1},
        in_force={"b": "torch"},
    ),
    "the last TrainJob of a snapshot text frees its parse": Case(
        steps=(Step("share", "a", "t1"), Step("share", "b", "t1"), Step("forget", "a"), Step("forget", "b")),
        kept={},
        users={},
        in_force={},
    ),
    "a TrainJob read again with the same text counts once": Case(
        steps=(Step("share", "a", "t1"), Step("share", "a", "t1"), Step("forget", "a")),
        kept={},
        users={},
        in_force={},
    ),
    "a TrainJob whose snapshot text changed moves to the new parse and frees the old": Case(
        steps=(Step("share", "a", "t1"), Step("share", "a", "t2", OTHER)),
        kept={"t2": "other"},
        users={"t2": 1},
        in_force={"a": "other"},
    ),
    "one text naming another runtime is parsed again for it": Case(
        steps=(Step("share", "a", "t1"), Step("share", "b", "t1", OTHER)),
        kept={"t1": "other"},
        users={"t1": 2},
        in_force={"a": "torch", "b": "other"},
    ),
    "forgetting a TrainJob that shares nothing changes nothing": Case(
        steps=(Step("share", "a", "t1"), Step("forget", "z")),
        kept={"t1": "torch"},
        users={"t1": 1},
        in_force={"a": "torch"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_shared_snapshot_parses_live_as_long_as_their_trainjobs(case: Case) -> None:
    known = Known()
    for step in case.steps:
        if step.action == "share":
            assert known.shared_source(step.uid, step.text, step.fresh) is known.of(step.uid).snapshot
        else:
            known.forget(step.uid)
    assert (
        {text: source.name for text, source in known.shared_sources.items()},
        known.source_users,
        {uid: job.snapshot.name for uid, job in known.jobs.items() if job.snapshot is not None},
        {uid for uid, job in known.jobs.items() if job.snapshot_text is not None},
    ) == (case.kept, case.users, case.in_force, set(case.in_force))
    assert set(known.jobs) == set(case.in_force), "a TrainJob forgotten leaves no record"


def test_the_first_parse_is_the_one_shared() -> None:
    known = Known()
    known.shared_source("a", "t1", TORCH)
    assert known.shared_source("b", "t1", TORCH_AGAIN) is TORCH
