"""A trainer cut into bounded Jobs by the opt-in annotation (runtime/plugins/trainer_split.py, issue 37): the JobSet
each framework gets, compared whole against the same TrainJob uncut, the ranks its rank line computes in a real
POSIX shell, and the admission rules (webhook and offline `validate` both run `Framework.validate`)."""

import copy
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import (
    FixedKeys,
    RuntimeBuilder,
    TrainJobBuilder,
    by_kind,
    container,
    container_of,
    jobset_of,
    replicated_job,
    rjob,
)
from trainjob_operator.api import constants as c
from trainjob_operator.cli import main
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.observed import Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.trainer_split import KUEUE_WARNING, PATH

FRAMEWORK = Framework.from_registry()
KEYS = FixedKeys(SSHKeyPair(private_pem=b"P", public_openssh=b"ecdsa AAAA\n"))
ANNOTATION = c.MAX_NODES_PER_JOB_ANNOTATION
INDEX = {"fieldRef": {"fieldPath": c.JOB_COMPLETION_INDEX_FIELD}}
JOB_INDEX_ENV = {"name": "TRAINJOB_JOB_INDEX", "valueFrom": {"fieldRef": {"fieldPath": c.JOBSET_JOB_INDEX_FIELD}}}
TRAIN = ["python", "train.py"]
ARGS = ["--epochs", "1"]


def cut_job(bound: str | None = "4", nodes: int = 8, **trainer: Any) -> TrainJobBuilder:
    job = TrainJobBuilder.make(name="tj").trainer(numNodes=nodes, **trainer)
    return job if bound is None else job.set("metadata.annotations", {ANNOTATION: bound})


def render(job: TrainJobBuilder, runtime: RuntimeBuilder) -> list[dict[str, Any]]:
    return FRAMEWORK.desired_objects(job.obj(), runtime.source(), Observed(keys=KEYS))


def rank_line(jobs: int, per_job: int, *names: str) -> str:
    value = f"$(( ${{TRAINJOB_JOB_INDEX}} * {per_job} + ${{JOB_COMPLETION_INDEX}} ))"
    return "; ".join(f"export {name}={value}" for name in names) + '; exec "$@"'


def node_of(jobset: dict[str, Any], name: str = c.NODE) -> dict[str, Any]:
    return container_of(jobset, name)


def cut_as_expected(
    uncut: dict[str, Any], jobs: int, per_job: int, names: tuple[str, ...], command: list[str], target: str = c.NODE
) -> dict[str, Any]:
    """The uncut JobSet with only what the cut changes: the trainer job's replicas and size, and (with `names`) the
    node container's rank variables moved into the wrapped command."""
    want = copy.deepcopy(uncut)
    job = rjob(want, target)
    job["replicas"] = jobs
    job["template"]["spec"]["parallelism"] = job["template"]["spec"]["completions"] = per_job
    if names:
        node = node_of(want, target)
        node["env"] = [e for e in node.get("env") or [] if e.get("valueFrom") != INDEX] + [JOB_INDEX_ENV]
        node["command"] = ["/bin/sh", "-c", rank_line(jobs, per_job, *names), "sh", *command]
        node.pop("args", None)
    return want


TORCH = RuntimeBuilder.make().ml_policy(num_nodes=1, torch={})
JAX = RuntimeBuilder.make().ml_policy(num_nodes=1, jax={})
XGBOOST = RuntimeBuilder.make().ml_policy(num_nodes=1, xgboost={})
PLAIN = RuntimeBuilder.make().ml_policy(num_nodes=1)
MPI = (
    RuntimeBuilder.make()
    .jobs(
        [
            replicated_job("launcher", c.ANCESTOR_TRAINER, [container(c.NODE, command=["mpirun"], args=["train"])]),
            replicated_job(c.NODE, None, [container(c.NODE, command=["/usr/sbin/sshd", "-De"])]),
        ]
    )
    .ml_policy(num_nodes=1, mpi={"numProcPerNode": 2, "mpiImplementation": "OpenMPI"})
)


@dataclass
class Cut:
    runtime: RuntimeBuilder
    job: TrainJobBuilder
    jobs: int
    per_job: int
    names: tuple[str, ...] = ()
    command: list[str] = field(default_factory=lambda: [*TRAIN, *ARGS])
    target: str = c.NODE


CUTS = {
    "torch, 8 nodes at most 4 per Job: 2 Jobs of 4, PET_NODE_RANK the rank, PET_NNODES and the master unchanged": Cut(
        TORCH, cut_job(command=TRAIN, args=ARGS), 2, 4, ("PET_NODE_RANK", "JOB_COMPLETION_INDEX")
    ),
    "JAX: JAX_PROCESS_ID the rank, JAX_NUM_PROCESSES and the coordinator unchanged": Cut(
        JAX, cut_job(command=TRAIN, args=ARGS), 2, 4, ("JAX_PROCESS_ID", "JOB_COMPLETION_INDEX")
    ),
    "XGBoost: its task id the rank": Cut(
        XGBOOST, cut_job(command=TRAIN, args=ARGS), 2, 4, (c.XGBOOST_ENV_TASK_ID, "JOB_COMPLETION_INDEX")
    ),
    "no framework: JOB_COMPLETION_INDEX itself the rank, for code that reads it": Cut(
        PLAIN, cut_job(command=TRAIN, args=ARGS), 2, 4, ("JOB_COMPLETION_INDEX",)
    ),
    "the runtime's command is wrapped when the TrainJob names none": Cut(
        TORCH.node_container(command=["torchrun", "t.py"], args=["--x"]),
        cut_job(),
        2,
        4,
        ("PET_NODE_RANK", "JOB_COMPLETION_INDEX"),
        ["torchrun", "t.py", "--x"],
    ),
    "1,000 nodes at most 300 per Job: the fewest equal Jobs within the bound (4 of 250)": Cut(
        TORCH, cut_job("300", 1000, command=TRAIN, args=ARGS), 4, 250, ("PET_NODE_RANK", "JOB_COMPLETION_INDEX")
    ),
    "MPI: its node workers cut (mpirun ranks them by the hostfile), no command wrapped": Cut(
        MPI, cut_job(), 2, 4, target=c.NODE
    ),
}


@pytest.mark.parametrize("case", CUTS.values(), ids=CUTS.keys())
def test_a_cut_changes_only_the_trainer_jobs_size_and_its_rank_variables(case: Cut) -> None:
    uncut = jobset_of(render(case.job.set("metadata.annotations", {}), case.runtime))
    cut = jobset_of(render(case.job, case.runtime))
    assert cut == cut_as_expected(uncut, case.jobs, case.per_job, case.names, case.command, case.target)


def test_torch_counts_and_master_stay_those_of_all_nodes() -> None:
    env = {e["name"]: e.get("value") for e in node_of(jobset_of(render(cut_job(command=TRAIN), TORCH)))["env"]}
    assert (env["PET_NNODES"], env["PET_MASTER_ADDR"]) == ("8", "tj-node-0-0.tj")
    assert "PET_NODE_RANK" not in env, "computed by the rank line, never the Job's completion index"


def test_the_mpi_hostfile_lists_every_worker_in_rank_order() -> None:
    (hostfile,) = by_kind(render(cut_job(), MPI), "ConfigMap")
    assert hostfile["data"]["hostfile"] == "".join(f"tj-node-{j}-{i}.tj slots=2\n" for j in range(2) for i in range(4))


STAYS = {
    "numNodes within the bound: one Job, the JobSet as without the annotation": cut_job("8", 8, command=TRAIN),
    "no equal cut within the bound (11 nodes, at most 8 per Job, none under 2): one Job": cut_job(
        "8", 11, command=TRAIN
    ),
}


@pytest.mark.parametrize("job", STAYS.values(), ids=STAYS.keys())
def test_no_acceptable_cut_leaves_the_jobset_as_uncut(job: TrainJobBuilder) -> None:
    assert render(job, TORCH) == render(job.set("metadata.annotations", {}), TORCH)


def test_every_pod_of_the_cut_computes_a_distinct_rank_in_a_real_shell() -> None:
    """The rendered command run by /bin/sh as each pod of 2 Jobs of 4 would run it (the Job controller sets
    JOB_COMPLETION_INDEX, the fieldRef TRAINJOB_JOB_INDEX): ranks 0..7, each once, and the arguments unchanged."""
    node = node_of(jobset_of(render(cut_job(command=["/bin/sh", "-c", 'echo "$PET_NODE_RANK $*"', "t"]), TORCH)))
    ranks = []
    for job_index in range(2):
        for completion in range(4):
            out = subprocess.run(
                node["command"],
                env={"TRAINJOB_JOB_INDEX": str(job_index), "JOB_COMPLETION_INDEX": str(completion), "PATH": "/bin"},
                capture_output=True,
                text=True,
                check=True,
                timeout=10,
            ).stdout.split()
            ranks.append(int(out[0]))
    assert ranks == list(range(8))


# --- admission ------------------------------------------------------------------------------------------------------


@dataclass
class Refusal:
    runtime: RuntimeBuilder
    job: TrainJobBuilder
    detail: str
    """A part of the one error's text."""


NOT_A_NUMBER = "must be a positive integer, at most 100000"
REFUSALS = {
    "zero": Refusal(TORCH, cut_job("0", command=TRAIN), NOT_A_NUMBER),
    "a negative number": Refusal(TORCH, cut_job("-4", command=TRAIN), NOT_A_NUMBER),
    "not a number": Refusal(TORCH, cut_job("four", command=TRAIN), NOT_A_NUMBER),
    "past an Indexed Job's limit": Refusal(TORCH, cut_job("100001", command=TRAIN), NOT_A_NUMBER),
    "a huge value is neither parsed nor echoed whole": Refusal(TORCH, cut_job("9" * 100_000, command=TRAIN), "..."),
    "control characters are quoted escaped": Refusal(TORCH, cut_job("4\x1b[2J\n", command=TRAIN), '"4\\u001b[2J\\n"'),
    "elastic torch: the rendezvous gives the ranks": Refusal(
        TORCH, cut_job(command=TRAIN, elasticPolicy={"maxNodes": 8}), "not supported with elastic training"
    ),
    "no command to wrap": Refusal(TORCH, cut_job(), "entrypoint cannot be wrapped"),
    "TensorFlow: TF_CONFIG's index is the kubelet's": Refusal(
        RuntimeBuilder.make()
        .set("metadata.labels", {c.FRAMEWORK_LABEL: "tensorflow"})
        .ml_policy(num_nodes=1)
        .node_container(command=TRAIN),
        cut_job(),
        "not supported with the TensorFlow runtime",
    ),
    "a JobSet that succeeds with Any trainer Job": Refusal(
        TORCH.set("spec.template.spec.successPolicy", {"operator": "Any", "targetReplicatedJobs": [c.NODE]}),
        cut_job(command=TRAIN),
        "successPolicy is Any over node",
    ),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_admission_refuses_a_cut_it_cannot_make_naming_the_annotation(case: Refusal) -> None:
    result = FRAMEWORK.validate(None, case.job.obj(), case.runtime.source())
    (error,) = result.errors
    assert error.path == PATH and case.detail in str(error), str(error)
    assert len(str(error)) < 600, "bounded whatever the value"
    with pytest.raises(BuildError, match="max-nodes-per-job"):  # never built half-cut if admitted without the webhook
        render(case.job, case.runtime)


def test_admission_accepts_a_cut_and_a_bound_with_no_cut() -> None:
    for job in (cut_job(command=TRAIN), cut_job("8", 11, command=TRAIN), cut_job(" 4 ", command=TRAIN)):
        assert FRAMEWORK.validate(None, job.obj(), TORCH.source()).errors == ()
    assert FRAMEWORK.validate(None, cut_job().obj(), MPI.source()).errors == (), "MPI wraps nothing: no command needed"


CHANGES = {
    "added": (cut_job(None, command=TRAIN), cut_job("4", command=TRAIN)),
    "changed": (cut_job("4", command=TRAIN), cut_job("2", command=TRAIN)),
    "removed": (cut_job("4", command=TRAIN), cut_job(None, command=TRAIN)),
}


@pytest.mark.parametrize("case", CHANGES.values(), ids=CHANGES.keys())
def test_the_annotation_is_fixed_at_creation(case: tuple[TrainJobBuilder, TrainJobBuilder]) -> None:
    old, new = case
    (error,) = FRAMEWORK.validate(old.obj(), new.obj(), TORCH.source()).errors
    assert str(error) == f"{PATH}: Forbidden: cannot be added, changed or removed after the TrainJob is created"


def test_another_container_reading_the_completion_index_cannot_be_cut() -> None:
    runtime = TORCH.set(
        "spec.mlPolicy.torch.envInjection", {"targets": [{"jobName": c.NODE, "containerNames": ["sidecar"]}]}
    ).job(
        c.NODE,
        "template.spec.template.spec.initContainers",
        [container("sidecar", command=["true"])],
    )
    with pytest.raises(BuildError, match="sidecar reads the completion index as PET_NODE_RANK"):
        render(cut_job(command=TRAIN), runtime)


def test_the_rank_line_is_a_shell_word_list_the_kubelet_runs_unchanged() -> None:
    """The wrapped command is an argv: the training command's words follow `sh` one by one, never joined."""
    command = node_of(jobset_of(render(cut_job(command=["a b", "$c"], args=["'d'"]), TORCH)))["command"]
    assert command[3:] == ["sh", "a b", "$c", "'d'"] and shlex.split(shlex.join(command)) == command


def test_the_offline_validate_refuses_as_the_webhook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`trainjob-operator validate` runs the same checks: exit 1, the annotation named, the value escaped."""
    tj, rt = tmp_path / "tj.yaml", tmp_path / "rt.yaml"
    tj.write_text(yaml.safe_dump(cut_job("4\x1b]0;x\x07", command=TRAIN).raw()))
    rt.write_text(yaml.safe_dump(TORCH.raw()))
    assert main(["validate", "-f", str(tj), "-r", str(rt)]) == 1
    err = capsys.readouterr().err
    assert f'{PATH}: Invalid value: "4\\u001b]0;x\\u0007": {NOT_A_NUMBER}' in err and "\x1b" not in err
    tj.write_text(yaml.safe_dump(cut_job(command=TRAIN).raw()))
    assert main(["validate", "-f", str(tj), "-r", str(rt)]) == 0


def test_a_cut_queued_in_kueue_is_admitted_with_a_warning_saying_what_kueue_does_not_see() -> None:
    job = cut_job(command=TRAIN).set("metadata.labels", {c.KUEUE_QUEUE_NAME_LABEL: "q"})
    result = FRAMEWORK.validate(None, job.obj(), TORCH.source())
    assert result.errors == () and result.warnings == (KUEUE_WARNING,)
    assert "waitForPodsReady" in KUEUE_WARNING
    assert FRAMEWORK.validate(job.obj(), job.obj(), TORCH.source()).warnings == (), "said once, at creation"
