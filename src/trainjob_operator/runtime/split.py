"""A huge trainer cut into bounded Jobs (issue 37, T#2318): the pure rank mapping (`plugins/trainer_split.py` builds
with it, opt-in).

Today the trainer is one replicated job `node` with one Indexed Job of parallelism N, and a pod's rank is its
completion index. Cut, the same replicated job gets `replicas: K` Jobs of `parallelism` and `completions` B = N/K
each (JobSet names their pods `<jobset>-node-<j>-<i>`, labels them with the job index j, and the Job controller
gives each its completion index i). A pod's rank is then `j * B + i`: contiguous per Job, unique, every rank in
0..N-1 once, and rank 0 is still `<jobset>-node-0-0` (the master address and the JAX coordinator do not move).
Kueue sees the same PodSet (count replicas x parallelism = N), and its topology-aware scheduling orders a JobSet's
pods by the same index (job index x parallelism + completion index).

A rank cannot be a `fieldRef` (no sum), so a cut trainer's ranks are computed by a shell line before the training
command (`rank_command`): the training code reads the same variables with the same values.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

BOUND: Final = 500
"""The most pods per Job when cut (the Job controller creates at most 500 pods of one Job per sync)."""
MIN_PER_JOB_SHARE: Final = 4
"""No cut into Jobs smaller than BOUND / 4: a prime numNodes would otherwise become N Jobs of one pod."""
JOB_INDEX_ENV: Final = "TRAINJOB_JOB_INDEX"
"""The pod's job index (JobSet's `jobset.sigs.k8s.io/job-index` annotation, by `fieldRef`), read by the rank line."""
COMPLETION_INDEX_ENV: Final = "JOB_COMPLETION_INDEX"
"""Set by the Job controller in every pod of an Indexed Job."""


@dataclass(frozen=True)
class Split:
    jobs: int
    """K: the Jobs of the trainer's replicated job (its `replicas`)."""
    per_job: int
    """B: pods per Job (`parallelism` and `completions`)."""

    @property
    def nodes(self) -> int:
        return self.jobs * self.per_job

    @property
    def cut(self) -> bool:
        return self.jobs > 1

    def rank(self, job_index: int, completion_index: int) -> int:
        if not (0 <= job_index < self.jobs and 0 <= completion_index < self.per_job):
            raise ValueError(f"no pod ({job_index}, {completion_index}) in {self.jobs} Job(s) of {self.per_job}")
        return job_index * self.per_job + completion_index

    def position(self, rank: int) -> tuple[int, int]:
        """(job index, completion index) of the pod of `rank`."""
        if not 0 <= rank < self.nodes:
            raise ValueError(f"no rank {rank} among {self.nodes}")
        return divmod(rank, self.per_job)

    def host(self, jobset: str, replicated_job: str, rank: int) -> str:
        """The pod's hostname as JobSet sets it (`<jobset>-<replicated job>-<job index>-<completion index>`)."""
        job_index, completion_index = self.position(rank)
        return f"{jobset}-{replicated_job}-{job_index}-{completion_index}"

    def hosts(self, jobset: str, replicated_job: str) -> list[str]:
        """Every pod's hostname in rank order (MPI's hostfile lists them so)."""
        return [self.host(jobset, replicated_job, rank) for rank in range(self.nodes)]


def split_for(nodes: int, bound: int = BOUND) -> Split:
    """The cut of `nodes` pods: none (one Job) up to `bound`; else the fewest Jobs of equal size within `bound`,
    when that size is at least bound / MIN_PER_JOB_SHARE (else none: a numNodes with no such divisor, a prime
    say, stays one Job)."""
    if nodes < 1 or bound < 1:
        raise ValueError(f"numNodes {nodes} and bound {bound} must be positive")
    if nodes <= bound:
        return Split(1, nodes)
    smallest = max(1, bound // MIN_PER_JOB_SHARE)
    for jobs in range(-(-nodes // bound), nodes // smallest + 1):
        if nodes % jobs == 0:
            return Split(jobs, nodes // jobs)
    return Split(1, nodes)


def rank_exports(split: Split, names: Sequence[str]) -> str:
    """The shell line that sets each of `names` (PET_NODE_RANK, JAX_PROCESS_ID, ...) to the pod's rank, once each;
    `JOB_COMPLETION_INDEX` among them is set last (the others are computed from it)."""
    for name in names:
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"not a shell variable name: {name!r}")
    value = f"$(( ${{{JOB_INDEX_ENV}}} * {split.per_job} + ${{{COMPLETION_INDEX_ENV}}} ))"
    ordered = sorted(dict.fromkeys(names), key=lambda name: name == COMPLETION_INDEX_ENV)
    return "; ".join(f"export {name}={value}" for name in ordered)


def rank_command(split: Split, names: Sequence[str], command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The container's command when cut: a POSIX shell sets the rank variables, then `exec`s the training command
    with its arguments unchanged (each one a separate word, never re-parsed by the shell). The container must name
    its command: an image's own entrypoint cannot be wrapped (the caller refuses the cut then)."""
    if not command:
        raise ValueError("a cut trainer needs the container's command (the image's entrypoint cannot be wrapped)")
    return ["/bin/sh", "-c", f'{rank_exports(split, names)}; exec "$@"', "sh", *command, *args]
