"""The rank mapping of a trainer cut into bounded Jobs (issue 37): ranks contiguous and unique, rank 0 where the
master address points, and the shell line that gives the training code the same variables."""

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainjob_operator.runtime.split import BOUND, Split, rank_command, rank_exports, split_for

CUTS = {
    "up to the bound, one Job as today": (500, BOUND, Split(1, 500)),
    "one node": (1, BOUND, Split(1, 1)),
    "1,000 nodes: two Jobs of 500": (1000, BOUND, Split(2, 500)),
    "5,000 nodes: ten Jobs of 500": (5000, BOUND, Split(10, 500)),
    "10,000 nodes: twenty Jobs of 500": (10000, BOUND, Split(20, 500)),
    "1,001 nodes: the fewest equal Jobs within the bound (7 of 143)": (1001, BOUND, Split(7, 143)),
    "a prime above the bound stays one Job (no cut into Jobs of one pod)": (1009, BOUND, Split(1, 1009)),
    "Jobs smaller than a quarter of the bound are no cut": (2 * 1009, BOUND, Split(1, 2018)),
    "a smaller bound cuts smaller": (1000, 100, Split(10, 100)),
}


@pytest.mark.parametrize("case", CUTS.values(), ids=CUTS.keys())
def test_split_for(case: tuple[int, int, Split]) -> None:
    nodes, bound, expected = case
    assert split_for(nodes, bound) == expected


@given(st.integers(1, 20_000), st.integers(1, 2_000))
def test_a_cut_keeps_every_node_within_the_bound(nodes: int, bound: int) -> None:
    split = split_for(nodes, bound)
    assert split.nodes == nodes
    assert not split.cut or (split.per_job <= bound and split.per_job >= bound // 4)


@given(st.integers(1, 40), st.integers(1, 600))
def test_ranks_are_contiguous_per_job_unique_and_cover_every_node(jobs: int, per_job: int) -> None:
    split = Split(jobs, per_job)
    ranks = [[split.rank(j, i) for i in range(per_job)] for j in range(jobs)]
    assert [r for job in ranks for r in job] == list(range(split.nodes)), "job by job, index by index: 0..N-1"
    assert all(split.position(split.rank(j, i)) == (j, i) for j in (0, jobs - 1) for i in (0, per_job - 1))


def test_rank_zero_is_the_pod_the_master_address_names_and_the_hostfile_is_in_rank_order() -> None:
    split = Split(3, 2)
    assert split.host("tj", "node", 0) == "tj-node-0-0"
    assert split.hosts("tj", "node") == [
        "tj-node-0-0",
        "tj-node-0-1",
        "tj-node-1-0",
        "tj-node-1-1",
        "tj-node-2-0",
        "tj-node-2-1",
    ]
    assert Split(1, 3).hosts("tj", "node") == ["tj-node-0-0", "tj-node-0-1", "tj-node-0-2"], "uncut: as today"


OUTSIDE = {
    "a job index past the last Job": (Split(2, 3), (2, 0)),
    "a completion index past the Job's size": (Split(2, 3), (0, 3)),
    "a negative index": (Split(2, 3), (-1, 0)),
}


@pytest.mark.parametrize("case", OUTSIDE.values(), ids=OUTSIDE.keys())
def test_a_pod_outside_the_cut_has_no_rank(case: tuple[Split, tuple[int, int]]) -> None:
    split, (job_index, completion_index) = case
    with pytest.raises(ValueError):
        split.rank(job_index, completion_index)


def test_no_rank_outside_the_nodes() -> None:
    with pytest.raises(ValueError):
        Split(2, 3).position(6)


def test_the_rank_line_names_only_shell_variables() -> None:
    assert rank_exports(Split(2, 500), ["PET_NODE_RANK"]) == (
        "export PET_NODE_RANK=$(( ${TRAINJOB_JOB_INDEX} * 500 + ${JOB_COMPLETION_INDEX} ))"
    )
    with pytest.raises(ValueError):
        rank_exports(Split(2, 500), ["PET_NODE_RANK; rm -rf /"])


def test_job_completion_index_is_set_last_and_each_name_once() -> None:
    """The rank is computed from JOB_COMPLETION_INDEX: the line sets it to the rank only after every other name."""
    line = rank_exports(Split(2, 4), ["JOB_COMPLETION_INDEX", "PET_NODE_RANK", "PET_NODE_RANK"])
    value = "$(( ${TRAINJOB_JOB_INDEX} * 4 + ${JOB_COMPLETION_INDEX} ))"
    assert line == f"export PET_NODE_RANK={value}; export JOB_COMPLETION_INDEX={value}"
    out = subprocess.run(
        ["/bin/sh", "-c", f'{line}; echo "$PET_NODE_RANK $JOB_COMPLETION_INDEX"'],
        env={"TRAINJOB_JOB_INDEX": "1", "JOB_COMPLETION_INDEX": "3", "PATH": "/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    assert out == "7 7\n"


@pytest.mark.parametrize(("job_index", "completion_index"), [(0, 0), (0, 499), (1, 0), (9, 499)])
def test_the_training_command_sees_its_rank_and_its_arguments_unchanged(job_index: int, completion_index: int) -> None:
    """The wrapped command run by a real POSIX shell, as the container would: the variables hold the rank, and the
    arguments (spaces, quotes, `$`, globs) reach the training command word for word."""
    split = Split(10, 500)
    args = ["--name", "a b", "it's", "$HOME", "*", ""]
    command = rank_command(
        split,
        ["PET_NODE_RANK", "JAX_PROCESS_ID"],
        ["/bin/sh", "-c", 'echo "$PET_NODE_RANK $JAX_PROCESS_ID"; printf "<%s>" "$@"', "train"],
        args,
    )
    out = subprocess.run(
        command,
        env={
            "TRAINJOB_JOB_INDEX": str(job_index),
            "JOB_COMPLETION_INDEX": str(completion_index),
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    rank = split.rank(job_index, completion_index)
    assert out == f"{rank} {rank}\n" + "".join(f"<{a}>" for a in args)


def test_an_image_entrypoint_cannot_be_cut() -> None:
    with pytest.raises(ValueError, match="entrypoint"):
        rank_command(Split(2, 500), ["PET_NODE_RANK"], [], ["--epochs", "1"])
