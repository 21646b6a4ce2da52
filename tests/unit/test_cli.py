"""The `trainjob-operator render|validate` CLI: exit codes, output shapes, runtime resolution and error lines.

Exit codes: 0 success; 1 invalid input (`<field path>: <message>` per error on stderr); 2 unusable input (one
line naming the file or object).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import RuntimeBuilder, TrainJobBuilder, by_kind, container, jobset_of, replicated_job, standard_jobs
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.cli import main
from trainjob_operator.offline.outcome import RENDERING
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.snapshot import build_snapshot

PROG = "trainjob-operator"
TJ = TrainJobBuilder.make()
RT = RuntimeBuilder.make()
CTR = RuntimeBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND)


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def write(directory: Path, name: str, *docs: dict[str, Any]) -> str:
    path = directory / name
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def owner(name: str = "test-job", uid: str | None = "uid") -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "name": name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if uid is not None:
        ref["uid"] = uid
    return ref


def expected_objects(job: TrainJobBuilder, runtime: RuntimeBuilder) -> list[dict[str, Any]]:
    """What the library builds for `job`: the CLI must print exactly this (snapshot first)."""
    model: TrainJob = job.obj()
    source = RuntimeSource.of(runtime.obj())
    return [build_snapshot(model, source), *Framework.from_registry().desired_objects(model, source, RENDERING)]


def names(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]


def mpi_runtime() -> RuntimeBuilder:
    jobs = standard_jobs()
    launcher = replicated_job(c.LAUNCHER, None, [container(c.NODE, command=["mpirun"])])
    return RT.ml_policy(num_nodes=1, mpi={}).jobs([*jobs[:2], launcher, jobs[2]]).coscheduling(30)


# --------------------------------------------------------------------------------------------- render output


def test_render_json_is_one_list_of_full_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job, runtime = TJ.trainer(numNodes=2, image="img"), RT.ml_policy(num_nodes=1, torch={}).coscheduling(30)
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "tj.yaml", job.raw()),
        "-r",
        write(tmp_path, "rt.yaml", runtime.raw()),
        "-o",
        "json",
    )
    assert (result.code, result.err) == (0, "")
    assert json.loads(result.out) == {"apiVersion": "v1", "kind": "List", "items": expected_objects(job, runtime)}


def test_render_yaml_is_a_stream_of_the_same_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job, runtime = TJ.trainer(numNodes=3), RT.ml_policy(num_nodes=1, torch={})
    args = ("-f", write(tmp_path, "tj.yaml", job.raw()), "-r", write(tmp_path, "rt.yaml", runtime.raw()))
    as_yaml = run(capsys, "render", *args)
    default = run(capsys, "render", *args, "-o", "yaml")
    assert (as_yaml.code, as_yaml.err) == (0, "")
    assert default == as_yaml
    assert list(yaml.safe_load_all(as_yaml.out)) == expected_objects(job, runtime)


def test_render_lists_every_object_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "tj.yaml", TJ.trainer(numNodes=2).raw()),
        "-r",
        write(tmp_path, "rt.yaml", mpi_runtime().raw()),
        "-o",
        "json",
    )
    assert result.code == 0
    items = json.loads(result.out)["items"]
    assert names(items) == [
        ("ConfigMap", "default", "test-job-runtime-snapshot"),
        ("Secret", "default", "test-job-mpi-ssh-auth"),
        ("ConfigMap", "default", "test-job-mpi-hostfile"),
        ("PodGroup", "default", "test-job"),
        ("JobSet", "default", "test-job"),
    ]
    assert [o["metadata"]["ownerReferences"] for o in items] == [[owner()]] * 5
    assert by_kind(items, "Secret")[0]["type"] == "kubernetes.io/ssh-auth"
    assert sorted(by_kind(items, "Secret")[0]["data"]) == ["ssh-privatekey", "ssh-publickey"]


@dataclass(frozen=True)
class OwnerCase:
    job: TrainJobBuilder
    want: dict[str, Any]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            OwnerCase(TrainJobBuilder.make(uid="0b7e-42"), owner(uid="0b7e-42")),
            id="the owner reference carries metadata.uid when given",
        ),
        pytest.param(
            OwnerCase(TrainJobBuilder.make(uid=None), owner(uid=None)),
            id="the owner reference has no uid when the TrainJob has none",
        ),
    ],
)
def test_render_owner_reference(case: OwnerCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "tj.yaml", case.job.raw()),
        "-r",
        write(tmp_path, "rt.yaml", RT.ml_policy(num_nodes=1, torch={}).coscheduling().raw()),
        "-o",
        "json",
    )
    assert result.code == 0
    items = json.loads(result.out)["items"]
    assert [o["metadata"]["ownerReferences"] for o in items] == [[case.want]] * len(items)
    assert len(items) == 3


def test_render_several_trainjobs_and_runtime_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = RuntimeBuilder.make(name="torch").ml_policy(num_nodes=1, torch={})
    jax = RuntimeBuilder.make(name="jax", kind=c.CLUSTER_TRAINING_RUNTIME_KIND).ml_policy(num_nodes=1, jax={})
    first = TrainJobBuilder.make(name="first", runtime="torch").trainer(numNodes=2)
    second = TrainJobBuilder.make(name="second", runtime="jax", kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
    third = TrainJobBuilder.make(name="third", runtime="torch")
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "a.yaml", first.raw(), second.raw()),
        "-f",
        write(tmp_path, "b.yaml", third.raw()),
        "-r",
        write(tmp_path, "torch.yaml", torch.raw()),
        "-r",
        write(tmp_path, "jax.yaml", jax.raw()),
        "-o",
        "json",
    )
    assert (result.code, result.err) == (0, "")
    assert json.loads(result.out)["items"] == [
        *expected_objects(first, torch),
        *expected_objects(second, jax),
        *expected_objects(third, torch),
    ]


def test_render_accepts_a_kind_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runtime = RT.ml_policy(num_nodes=1, torch={})
    jobs = {"apiVersion": "v1", "kind": "List", "items": [TJ.raw(), TrainJobBuilder.make(name="other").raw()]}
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "tj.yaml", jobs),
        "-r",
        write(tmp_path, "rt.yaml", runtime.raw()),
        "-o",
        "json",
    )
    assert result.code == 0
    assert [o["metadata"]["name"] for o in by_kind(json.loads(result.out)["items"], "JobSet")] == ["test-job", "other"]


# ------------------------------------------------------------------------------------------ runtime resolution


def node_image(out: str) -> str:
    jobset = jobset_of(json.loads(out)["items"])
    node = next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == c.NODE)
    image: str = node["template"]["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def image_runtime(kind: str, image: str, namespace: str | None = "default") -> dict[str, Any]:
    return RuntimeBuilder.make(kind=kind, namespace=namespace).node_container(image=image).raw()


@dataclass(frozen=True)
class ResolveCase:
    job: TrainJobBuilder
    runtimes: list[dict[str, Any]]
    want_image: str


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            ResolveCase(
                TJ,
                [
                    image_runtime(c.CLUSTER_TRAINING_RUNTIME_KIND, "cluster"),
                    image_runtime(c.TRAINING_RUNTIME_KIND, "namespaced"),
                ],
                "namespaced",
            ),
            id="a TrainingRuntime reference picks the TrainingRuntime over a same-named cluster runtime",
        ),
        pytest.param(
            ResolveCase(
                TrainJobBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND),
                [
                    image_runtime(c.TRAINING_RUNTIME_KIND, "namespaced"),
                    image_runtime(c.CLUSTER_TRAINING_RUNTIME_KIND, "cluster"),
                ],
                "cluster",
            ),
            id="a ClusterTrainingRuntime reference picks the cluster runtime over a same-named namespaced one",
        ),
        pytest.param(
            ResolveCase(
                TrainJobBuilder.make(namespace="team-b"),
                [
                    image_runtime(c.TRAINING_RUNTIME_KIND, "team-a", namespace="team-a"),
                    image_runtime(c.TRAINING_RUNTIME_KIND, "team-b", namespace="team-b"),
                ],
                "team-b",
            ),
            id="a TrainingRuntime is looked up in the TrainJob namespace",
        ),
        pytest.param(
            ResolveCase(
                TrainJobBuilder.make(namespace="team-c"),
                [image_runtime(c.TRAINING_RUNTIME_KIND, "anywhere", namespace=None)],
                "anywhere",
            ),
            id="a TrainingRuntime without namespace serves any namespace",
        ),
        pytest.param(
            ResolveCase(
                TrainJobBuilder.make(namespace="team-a"),
                [
                    image_runtime(c.TRAINING_RUNTIME_KIND, "anywhere", namespace=None),
                    image_runtime(c.TRAINING_RUNTIME_KIND, "team-a", namespace="team-a"),
                ],
                "team-a",
            ),
            id="a TrainingRuntime in the TrainJob namespace wins over one without namespace",
        ),
    ],
)
def test_render_resolves_the_runtime(case: ResolveCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(
        capsys,
        "render",
        "-f",
        write(tmp_path, "tj.yaml", case.job.raw()),
        "-r",
        write(tmp_path, "rt.yaml", *case.runtimes),
        "-o",
        "json",
    )
    assert (result.code, result.err) == (0, "")
    assert node_image(result.out) == case.want_image


# -------------------------------------------------------------------------------------- exit codes and errors


@dataclass(frozen=True)
class ExitCase:
    command: str
    trainjobs: list[dict[str, Any]] | str
    runtimes: list[dict[str, Any]] | str | None
    code: int
    err: str
    """stderr with `{tj}` and `{rt}` standing for the two file paths."""
    out: str = ""


MISSING_RT = (
    "{prog}: error: TrainJob default/test-job ({tj}#1): runtime TrainingRuntime default/test-runtime not "
    "found in the -r files\n"
)
NEGATIVE_NODES = (
    "spec.trainer.numNodes: Invalid value: -1: spec.trainer.numNodes in body should be greater than or equal to 0\n"
)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            ExitCase("validate", [TJ.raw()], [RT.raw()], 0, "valid: 1 TrainJob(s), 1 runtime(s)\n"),
            id="validate of valid input exits 0",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.trainer(numNodes=-1).raw()],
                [RT.raw()],
                1,
                NEGATIVE_NODES + "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="validate of a TrainJob violating the schema exits 1 with the field error",
        ),
        pytest.param(
            ExitCase(
                "render",
                [TJ.trainer(numNodes=-1).raw()],
                [RT.raw()],
                1,
                NEGATIVE_NODES + "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="render refuses a TrainJob violating the schema with exit 1",
        ),
        pytest.param(
            ExitCase(
                "render",
                [TJ.trainer(env=[{"name": "DMLC_TASK_ID", "value": "1"}]).raw()],
                [RT.ml_policy(xgboost={}).raw()],
                1,
                "spec.trainer.env[0]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime\n"
                "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="render refuses a TrainJob the webhook rejects with exit 1",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.raw()],
                [RT.job(c.NODE, "replicas", 2).raw()],
                1,
                "spec.template.spec.replicatedJobs[2].replicas: Invalid value: 2: always must be 1\n"
                "invalid: TrainingRuntime default/test-runtime ({rt}#1): 1 error(s)\n",
            ),
            id="validate of a runtime the runtime webhook rejects exits 1",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.raw()],
                [RT.ml_policy(mpi={"numProcPerNode": 0}).raw()],
                1,
                "spec.mlPolicy.mpi.numProcPerNode: Invalid value: 0: NumProcPerNode in mpiPolicy must be "
                ">= 1\ninvalid: TrainingRuntime default/test-runtime ({rt}#1): 1 error(s)\n",
            ),
            id="validate of a runtime violating a CEL rule exits 1",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.set("spec.runtimeRef.kind", "Runtime").raw()],
                [RT.raw()],
                1,
                "unsupported runtime: Runtime.trainer.kubeflow.org\n"
                "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="validate of an unsupported runtime kind exits 1",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TrainJobBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND).raw()],
                [CTR.set("metadata.labels", {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED}).raw()],
                0,
                'Warning: ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a '
                "future release of Kubeflow Trainer. See runtime deprecation policy: "
                f"{c.RUNTIME_DEPRECATION_POLICY_URL}\n"
                'Warning: Referenced ClusterTrainingRuntime "test-runtime" is deprecated and will be '
                "removed in a future release of Kubeflow Trainer. See runtime deprecation policy: "
                f"{c.RUNTIME_DEPRECATION_POLICY_URL}\n"
                "valid: 1 TrainJob(s), 1 runtime(s)\n",
            ),
            id="validate of a deprecated runtime warns and exits 0",
        ),
        pytest.param(
            ExitCase("validate", [TJ.raw()], None, 2, MISSING_RT),
            id="validate without the referenced runtime exits 2 naming the TrainJob",
        ),
        pytest.param(
            ExitCase("render", [TJ.raw()], [CTR.raw()], 2, MISSING_RT),
            id="render with only a same-named ClusterTrainingRuntime exits 2",
        ),
        pytest.param(
            ExitCase(
                "render",
                [TrainJobBuilder.make(namespace="other").raw()],
                [RT.raw()],
                2,
                "{prog}: error: TrainJob other/test-job ({tj}#1): runtime TrainingRuntime "
                "other/test-runtime not found in the -r files\n",
            ),
            id="render with the TrainingRuntime in another namespace exits 2",
        ),
        pytest.param(
            ExitCase(
                "render",
                [TJ.raw()],
                [RT.ml_policy(mpi={"mpiImplementation": ""}).raw()],
                2,
                "{prog}: error: TrainJob default/test-job ({tj}#1): cannot build: MPI implementation for  "
                "doesn't supported\n",
            ),
            id="render of a runtime the pipeline cannot build exits 2 naming the TrainJob",
        ),
        pytest.param(
            ExitCase(
                "render",
                [TJ.raw()],
                [
                    RT.ml_policy(
                        torch={"envInjection": {"targets": [{"jobName": c.NODE, "containerNames": ["sidecar"]}]}}
                    ).raw()
                ],
                1,
                'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["sidecar"]}: '
                'envInjection target podSet "node" container "sidecar" not found in runtime template\n'
                "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="render refuses a missing envInjection target with exit 1 before building",
        ),
        pytest.param(
            ExitCase("validate", [RT.raw()], None, 0, "valid: 0 TrainJob(s), 1 runtime(s)\n"),
            id="a runtime passed with -f is validated",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.raw()],
                [TJ.set("metadata.name", "other").raw(), RT.raw()],
                0,
                "valid: 2 TrainJob(s), 1 runtime(s)\n",
            ),
            id="a TrainJob passed with -r is validated",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [{**TJ.raw(), "kind": "Pod"}],
                [RT.raw()],
                2,
                "{prog}: error: {tj}#1: expected kind TrainJob, TrainingRuntime or ClusterTrainingRuntime, got 'Pod'\n",
            ),
            id="another kind exits 2 naming the document",
        ),
        pytest.param(
            ExitCase(
                "render",
                "kind: TrainJob\nmetadata:\n  name: x\n  labels: a: b\n",
                [RT.raw()],
                2,
                "{prog}: error: {tj}: invalid YAML at line 4, column 12: mapping values are not allowed in "
                "this context\n",
            ),
            id="bad YAML exits 2 naming the file and line",
        ),
        pytest.param(
            ExitCase(
                "validate",
                [TJ.raw()],
                "spec:\n  template: [\n",
                2,
                "{prog}: error: {rt}: invalid YAML at line 3, column 1: did not find expected node content\n",
            ),
            id="bad YAML in a runtime file exits 2 naming the file and line",
        ),
        pytest.param(
            ExitCase(
                "validate",
                "- a\n- b\n",
                None,
                2,
                "{prog}: error: {tj}: document 1 is not a Kubernetes object (a mapping)\n",
            ),
            id="a YAML document that is not a mapping exits 2",
        ),
        pytest.param(
            ExitCase("validate", "", None, 2, "{prog}: error: {tj}: no TrainJob found\n"),
            id="an empty TrainJob file exits 2",
        ),
    ],
)
def test_exit_codes(case: ExitCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def put(name: str, content: list[dict[str, Any]] | str) -> str:
        if isinstance(content, str):
            (tmp_path / name).write_text(content)
            return str(tmp_path / name)
        return write(tmp_path, name, *content)

    tj = put("tj.yaml", case.trainjobs)
    argv = [case.command, "-f", tj]
    rt = str(tmp_path / "rt.yaml")
    if case.runtimes is not None:
        argv += ["-r", put("rt.yaml", case.runtimes)]
    result = run(capsys, *argv)
    err = case.err.replace("{prog}", PROG).replace("{tj}", tj).replace("{rt}", rt)
    assert result == Result(case.code, case.out, err)


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.yaml")
    result = run(capsys, "render", "-f", missing)
    assert result == Result(2, "", f"{PROG}: error: cannot read {missing}: No such file or directory\n")


def test_errors_of_several_objects_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tj = write(
        tmp_path,
        "tj.yaml",
        TJ.trainer(numNodes=-1).raw(),
        TrainJobBuilder.make(name="late").set("spec.activeDeadlineSeconds", 0).raw(),
        TrainJobBuilder.make(name="good").raw(),
    )
    result = run(capsys, "validate", "-f", tj, "-r", write(tmp_path, "rt.yaml", RT.raw()))
    assert result == Result(
        1,
        "",
        "".join(
            [
                NEGATIVE_NODES,
                f"invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
                "spec.activeDeadlineSeconds: Invalid value: 0: spec.activeDeadlineSeconds in body should be greater than "
                "or equal to 1\n",
                f"invalid: TrainJob default/late ({tj}#2): 1 error(s)\n",
            ]
        ),
    )


def test_missing_filename_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "render")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"{PROG} render: error: the following arguments are required: -f/--filename; see `{PROG} render --help`\n"
    )


# ------------------------------------------------------------------------------------------- real processes


def console_script() -> list[str]:
    script = Path(sys.executable).parent / PROG
    return [str(script)] if script.exists() else [sys.executable, "-m", "trainjob_operator.cli"]


def test_console_script_renders_yaml(tmp_path: Path) -> None:
    job, runtime = TJ.trainer(numNodes=2), mpi_runtime()
    done = subprocess.run(
        [
            *console_script(),
            "render",
            "-f",
            write(tmp_path, "tj.yaml", job.raw()),
            "-r",
            write(tmp_path, "rt.yaml", runtime.raw()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    objects = list(yaml.safe_load_all(done.stdout))
    want = expected_objects(job, runtime)
    for obj in (*objects, *want):  # the SSH key is fresh on every run
        if obj["kind"] == "Secret":
            obj["data"] = sorted(obj["data"])
    assert objects == want


def test_module_entry_point_validates_and_refuses(tmp_path: Path) -> None:
    tj = write(tmp_path, "tj.yaml", TJ.trainer(numNodes=-1).raw())
    rt = write(tmp_path, "rt.yaml", RT.raw())
    done = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.cli", "validate", "-f", tj, "-r", rt],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        NEGATIVE_NODES + f"invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
    )
    valid = write(tmp_path, "valid.yaml", TJ.raw())
    missing = subprocess.run(
        [*console_script(), "render", "-f", valid], capture_output=True, text=True, timeout=120, check=False
    )
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr.count("\n") == 1


# ------------------------------------------------------------------------- issue 12: upstream's own input shapes


def test_one_file_mixing_runtimes_and_trainjobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """upstream's examples hold the runtime and the TrainJob in one stream (`kubectl apply -f` style)."""
    job, runtime = TJ.trainer(numNodes=2), RT.ml_policy(num_nodes=1, torch={})
    mixed = write(tmp_path, "mixed.yaml", runtime.raw(), job.raw())
    result = run(capsys, "render", "-f", mixed, "-o", "json")
    assert (result.code, result.err) == (0, "")
    assert json.loads(result.out)["items"] == expected_objects(job, runtime)
    assert run(capsys, "validate", "-r", mixed, "-f", mixed) == Result(0, "", "valid: 2 TrainJob(s), 2 runtime(s)\n")


def test_a_missing_runtime_does_not_stop_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, lost = TJ.trainer(numNodes=2), TrainJobBuilder.make(name="lost").set("spec.runtimeRef.name", "gone")
    runtime = RT.ml_policy(num_nodes=1, torch={})
    tj = write(tmp_path, "tj.yaml", lost.raw(), good.raw())
    rt = write(tmp_path, "rt.yaml", runtime.raw())
    missing = (
        f"{PROG}: error: TrainJob default/lost ({tj}#1): runtime TrainingRuntime default/gone not found in "
        "the -r files\n"
    )
    rendered = run(capsys, "render", "-f", tj, "-r", rt, "-o", "json")
    assert (rendered.code, rendered.err) == (2, missing)
    assert json.loads(rendered.out)["items"] == expected_objects(good, runtime)
    assert run(capsys, "validate", "-f", tj, "-r", rt) == Result(2, "", missing)


def test_a_trainjob_of_an_invalid_runtime_reports_the_runtimes_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tj = write(tmp_path, "tj.yaml", TJ.raw())
    rt = write(tmp_path, "rt.yaml", RT.ml_policy(mpi={"mpiImplementation": "invalid"}).raw())
    result = run(capsys, "validate", "-f", tj, "-r", rt)
    assert result == Result(
        1,
        "",
        "".join(
            [
                'spec.mlPolicy.mpi.mpiImplementation: Unsupported value: "invalid": supported values: "OpenMPI", ""\n',
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct "
                "the existing errors to complete validation\n",
                f"invalid: TrainingRuntime default/test-runtime ({rt}#1): 2 error(s)\n",
                'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org",'
                '"kind":"TrainingRuntime"}: TrainingRuntime default/test-runtime is invalid (its errors are listed above): the '
                "API server would not have stored it\n",
                f"invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ]
        ),
    )


def test_unknown_fields_are_pruned_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `--validate=warn`, a typo (`resource:`) is dropped as the API server drops it: the render is the pruned
    runtime's, and the warning names the path as kubectl's warn mode does; the exit status stays 0."""
    runtime = RT.ml_policy(num_nodes=1, torch={})
    typo = runtime.node_container(resource={"limits": {"cpu": "1"}}).set("spec.template.spec.schedulerName", "x")
    tj = write(tmp_path, "tj.yaml", TJ.raw())
    rt = write(tmp_path, "rt.yaml", typo.raw())
    result = run(capsys, "render", "-f", tj, "-r", rt, "-o", "json", "--validate=warn")
    label = f"TrainingRuntime default/test-runtime ({rt}#1)"
    assert (result.code, result.err) == (
        0,
        "".join(
            [
                f'Warning: {label}: unknown field "spec.template.spec.replicatedJobs[2].template.spec.template.spec.'
                'containers[0].resource"\n',
                f'Warning: {label}: unknown field "spec.template.spec.schedulerName"\n',
            ]
        ),
    )
    assert json.loads(result.out)["items"] == expected_objects(TJ, runtime)


def test_a_long_replicated_job_name_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "a-replicated-job-name"  # 21 characters
    rt = write(tmp_path, "rt.yaml", RT.jobs([replicated_job(name, None, [container(c.NODE)])]).raw())
    result = run(capsys, "validate", "-f", rt)
    assert result == Result(
        1,
        "",
        "".join(
            [
                f'spec.template.spec.replicatedJobs[0].name: Invalid value: "{name}": replicatedJob name must be no more '
                "than 20 characters\n",
                f"invalid: TrainingRuntime default/test-runtime ({rt}#1): 1 error(s)\n",
            ]
        ),
    )


def test_render_says_a_foreign_managed_trainjob_is_not_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = TJ.set("spec.managedBy", c.MULTIKUEUE_MANAGED_BY)
    runtime = RT.ml_policy(num_nodes=1, torch={})
    tj = write(tmp_path, "tj.yaml", job.raw())
    result = run(capsys, "render", "-f", tj, "-r", write(tmp_path, "rt.yaml", runtime.raw()), "-o", "json")
    assert (result.code, result.err) == (
        0,
        (
            f"Warning: TrainJob default/test-job ({tj}#1): spec.managedBy is 'kueue.x-k8s.io/multikueue': "
            "trainjob-operator does not reconcile this TrainJob and would not build the objects below (upstream's "
            "runtime builds them; the controller named in managedBy decides)\n"
        ),
    )
    assert json.loads(result.out)["items"] == expected_objects(job, runtime)
