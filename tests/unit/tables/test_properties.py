"""Properties of rendering over generated valid TrainJob/runtime pairs covering every plugin.

For any TrainJob and runtime the validation accepts, rendering (snapshot + every desired object):
never raises, is deterministic (MPI Secret data aside), emits complete objects each with exactly one controller
ownerReference to the TrainJob, gives every replicated job parallelism == completions, and mutates neither the
TrainJob model nor the shared RuntimeSource.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import FIXED_KEYS, INITIALIZER_PVC, RuntimeBuilder, TrainJobBuilder, container, pod_patch, replicated_job
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import SHIPPED_MODELS
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.snapshot import build_snapshot, runtime_from_snapshot
from trainjob_operator.runtime.validation import admit_runtime, admit_trainjob, check_runtime, check_trainjob

FRAMEWORK = Framework.from_registry()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The same 150 pairs per property on every machine (derandomized: tests/conftest.py); `make fuzz` draws new ones."""

NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)
ENV_NAMES = st.sampled_from(["LR", "EPOCHS", "BATCH_SIZE", "HF_HOME", "NCCL_DEBUG", "SEED"])
RESOURCES = st.sampled_from(
    [
        None,
        {"requests": {"cpu": 1}},
        {"requests": {"cpu": "2500m", "memory": "4Gi"}},
        {"requests": {"cpu": "0.7"}, "limits": {"cpu": 2}},
        {"requests": {"cpu": 6, "example.com/gpu": 2}},
        {"limits": {"nvidia.com/gpu": 4}},
        {"limits": {"nvidia.com/gpu": 1}},
    ]
)
TORCHTUNE_MODELS = [
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-llama3.3-70b",
    "torchtune-qwen2.5-1.5b",
]
TORCHTUNE_NODE_COMMAND = [
    "tune",
    "run",
    "full_finetune_distributed",
    "--config",
    "llama3_2/1B_full",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]
LORA_ARG = "model.lora_attn_modules=[q_proj,v_proj,output_proj]"


@dataclass(frozen=True)
class Pair:
    job: TrainJob
    runtime: RuntimeSource
    plugin: str


# ------------------------------------------------------------------------------------------------ strategies


def env_list(draw: st.DrawFn, max_size: int = 3) -> list[dict[str, str]]:
    names = draw(st.lists(ENV_NAMES, unique=True, max_size=max_size))
    return [{"name": n, "value": draw(st.sampled_from(["1", "0.01", "true", "x"]))} for n in names]


def initializer_jobs() -> list[dict[str, Any]]:
    return [
        replicated_job(
            c.DATASET_INITIALIZER,
            c.DATASET_INITIALIZER,
            [
                container(
                    c.DATASET_INITIALIZER, volumeMounts=[{"name": "initializer", "mountPath": "/workspace/dataset"}]
                )
            ],
            [INITIALIZER_PVC],
        ),
        replicated_job(
            c.MODEL_INITIALIZER,
            c.MODEL_INITIALIZER,
            [container(c.MODEL_INITIALIZER, volumeMounts=[{"name": "initializer", "mountPath": "/workspace/model"}])],
            [INITIALIZER_PVC],
        ),
    ]


@st.composite
def node_job(
    draw: st.DrawFn,
    ancestor: str | None = c.ANCESTOR_TRAINER,
    node_command: list[str] | None = None,
    sidecars: bool = False,
) -> dict[str, Any]:
    fields: dict[str, Any] = {"volumeMounts": [{"name": "initializer", "mountPath": "/workspace/model"}]}
    if node_command is not None:
        fields["command"] = node_command
    resources = draw(RESOURCES)
    if resources is not None:
        fields["resources"] = resources
    if draw(st.booleans()):
        fields["env"] = env_list(draw)
    if draw(st.booleans()):
        fields["ports"] = [{"containerPort": 8080}]
    containers = [container(c.NODE, **fields)]
    if sidecars:
        containers.append(container("sidecar", command=["sleep", "inf"]))
    job = replicated_job(c.NODE, ancestor, containers, [INITIALIZER_PVC])
    if sidecars:
        job["template"]["spec"]["template"]["spec"]["initContainers"] = [container("setup", restartPolicy="Always")]
    if draw(st.booleans()):
        job["template"]["spec"]["template"]["spec"]["priorityClassName"] = draw(
            st.sampled_from(["high", "system-node-critical"])
        )
    return job


@st.composite
def runtimes(draw: st.DrawFn) -> tuple[RuntimeBuilder, str]:
    """A runtime the runtime webhook admits, and the name of the plugin it exercises."""
    plugin = draw(st.sampled_from(["plain", "plain-policy", "torch", "torchtune", "mpi", "jax", "xgboost"]))
    kind = draw(st.sampled_from([c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND]))
    name = draw(st.sampled_from(TORCHTUNE_MODELS)) if plugin == "torchtune" else draw(NAMES)
    with_initializers = draw(st.booleans())
    jobs = initializer_jobs() if with_initializers else []
    policy: dict[str, Any] | None = None
    num_nodes = draw(st.one_of(st.none(), st.integers(1, 4)))
    if plugin == "plain":
        jobs.append(draw(node_job()))
    elif plugin == "plain-policy":
        jobs.append(draw(node_job()))
        policy = {}
    elif plugin == "torch":
        sidecars = draw(st.booleans())
        jobs.append(draw(node_job(sidecars=sidecars)))
        torch: dict[str, Any] = {}
        if sidecars:
            targets = [
                {
                    "jobName": c.NODE,
                    "containerNames": draw(st.lists(st.sampled_from(["sidecar", "setup"]), unique=True, min_size=1)),
                }
            ]
            if with_initializers and draw(st.booleans()):
                targets.append({"jobName": c.DATASET_INITIALIZER, "containerNames": [c.DATASET_INITIALIZER]})
            torch["envInjection"] = {"targets": targets}
        policy = {"torch": torch}
    elif plugin == "torchtune":
        jobs.append(draw(node_job(node_command=TORCHTUNE_NODE_COMMAND)))
        policy = {"torch": {}}
    elif plugin == "mpi":
        launcher_is_trainer = draw(st.booleans())
        launcher = replicated_job(
            c.LAUNCHER,
            c.ANCESTOR_TRAINER if launcher_is_trainer else None,
            [container(c.NODE, command=["mpirun"], args=["train.sh"])],
        )
        node = draw(node_job(ancestor=None if launcher_is_trainer else c.ANCESTOR_TRAINER))
        jobs += [launcher, node] if draw(st.booleans()) else [node, launcher]
        mpi: dict[str, Any] = {"runLauncherAsNode": draw(st.booleans())}
        if draw(st.booleans()):
            mpi["numProcPerNode"] = draw(st.integers(1, 8))
        if draw(st.booleans()):
            mpi["sshAuthMountPath"] = "/home/mpiuser/.ssh"
        policy = {"mpi": mpi}
    else:
        jobs.append(draw(node_job()))
        policy = {plugin: {}}
    runtime = RuntimeBuilder.make(name=name, kind=kind, namespace="default").jobs(jobs)
    if policy is not None:
        if num_nodes is not None:
            policy["numNodes"] = num_nodes
        runtime = runtime.set("spec.mlPolicy", policy)
    group = draw(st.sampled_from([None, "coscheduling", "volcano"]))
    if group == "coscheduling":
        runtime = runtime.coscheduling(draw(st.one_of(st.none(), st.integers(1, 300))))
    elif group == "volcano":
        runtime = runtime.volcano(
            **draw(st.sampled_from([{}, {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}]))
        )
    if draw(st.booleans()):
        runtime = runtime.set(
            "spec.template.metadata", {"labels": {"team": "ml"}, "annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: "q"}}
        )
    if draw(st.booleans()):
        runtime = runtime.set("spec.template.spec.network", {"subdomain": "svc", "publishNotReadyAddresses": True})
    if draw(st.booleans()):
        runtime = runtime.set("spec.template.spec.successPolicy", {"operator": "All", "targetReplicatedJobs": [c.NODE]})
    return runtime, plugin


@st.composite
def patches(
    draw: st.DrawFn, runtime: RuntimeBuilder
) -> list[tuple[str, list[dict[str, Any]] | None, dict[str, Any] | None]]:
    """Runtime patches as (manager, jobs, metadata): the arguments of `TrainJobBuilder.patch`."""
    raw = runtime.raw()
    job_names = [rj["name"] for rj in raw["spec"]["template"]["spec"]["replicatedJobs"]]
    entries: list[tuple[str, list[dict[str, Any]] | None, dict[str, Any] | None]] = []
    for i in range(draw(st.integers(0, 2))):
        jobs = []
        for job in draw(st.lists(st.sampled_from(job_names), unique=True, max_size=2)):
            spec: dict[str, Any] = {}
            if draw(st.booleans()):
                spec["nodeSelector"] = {"pool": draw(st.sampled_from(["a", "b"]))}
            if draw(st.booleans()):
                spec["tolerations"] = [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
            if draw(st.booleans()):
                spec["volumes"] = [{"name": f"extra-{i}", "emptyDir": {}}]
            if draw(st.booleans()):
                spec["serviceAccountName"] = "trainer"
            if draw(st.booleans()):
                spec["terminationGracePeriodSeconds"] = draw(st.integers(0, 600))
            if job == c.NODE and draw(st.booleans()):
                spec["containers"] = [
                    {"name": c.NODE, "volumeMounts": [{"name": f"extra-{i}", "mountPath": f"/extra/{i}"}]}
                ]
                spec.setdefault("volumes", [{"name": f"extra-{i}", "emptyDir": {}}])
            labels = {"patched": str(i)} if draw(st.booleans()) else None
            jobs.append(
                pod_patch(
                    job, labels=labels, job_labels={"job-patched": str(i)} if draw(st.booleans()) else None, **spec
                )
            )
        metadata = {"labels": {"manager": str(i)}} if draw(st.booleans()) else None
        entries.append((f"example.com/manager-{i}", jobs or None, metadata))
    return entries


@st.composite
def trainer(draw: st.DrawFn, plugin: str, runtime_name: str) -> dict[str, Any] | None:
    if plugin == "torchtune":
        fields: dict[str, Any] = {"command": ["tune", "run"]}
        multi_node_ok = runtime_name == "torchtune-llama3.3-70b"
        nodes = draw(st.one_of(st.none(), st.integers(1, 3) if multi_node_ok else st.just(1)))
        if nodes is not None:
            fields["numNodes"] = nodes
        args = draw(st.lists(st.sampled_from(["epochs=2", "batch_size=8", "dtype=bf16"]), unique=True))
        if (nodes or 1) == 1 and draw(st.booleans()):
            args.append(LORA_ARG)
        fields["args"] = args
        if draw(st.booleans()):
            fields["numProcPerNode"] = draw(st.integers(1, 4))
        resources = draw(RESOURCES)
        if resources is not None:
            fields["resourcesPerNode"] = resources
        return fields
    if draw(st.booleans()):
        return None
    fields = {}
    if draw(st.booleans()):
        fields["image"] = draw(st.sampled_from(["trainer:v1", "registry.example.com/train@sha256:abc"]))
    if draw(st.booleans()):
        fields["command"] = draw(st.sampled_from([["python", "train.py"], ["torchrun", "train.py"], ["mpirun"]]))
    if draw(st.booleans()):
        fields["args"] = ["--epochs", "2"]
    if draw(st.booleans()):
        fields["env"] = env_list(draw)
    if draw(st.booleans()):
        fields["numNodes"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        fields["numProcPerNode"] = draw(st.integers(1, 8))
    resources = draw(RESOURCES)
    if resources is not None:
        fields["resourcesPerNode"] = resources
    return fields


@st.composite
def pairs(draw: st.DrawFn) -> Pair:
    runtime, plugin = draw(runtimes())
    raw_runtime = runtime.raw()
    kind, name = raw_runtime["kind"], raw_runtime["metadata"]["name"]
    uid = draw(st.one_of(st.none(), st.uuids().map(str)))
    job = TrainJobBuilder.make(name=draw(NAMES), namespace="default", uid=uid, runtime=name, kind=kind)
    if draw(st.booleans()):
        job = job.suspend()
    fields = draw(trainer(plugin, name))
    if fields is not None:
        job = job.trainer(**fields)
    job_names = {rj["name"] for rj in raw_runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    if c.DATASET_INITIALIZER in job_names and draw(st.booleans()):
        source: dict[str, Any] = {"storageUri": "hf://datasets/tatsu-lab/alpaca"}
        if draw(st.booleans()):
            source["env"] = [{"name": "HF_TOKEN", "value": "t"}]
        if draw(st.booleans()):
            source["secretRef"] = {"name": "hf-secret"}
        job = job.initializer(dataset=source, model={"storageUri": "hf://meta-llama/Llama-3.2-1B"})
    for manager, jobs, metadata in draw(patches(runtime)):
        job = job.patch(manager, jobs, metadata)
    if draw(st.booleans()):
        job = job.set("spec.activeDeadlineSeconds", draw(st.integers(1, 10_000)))
    return validated(job.raw(), raw_runtime, plugin)


def validated(raw_job: dict[str, Any], raw_runtime: dict[str, Any], plugin: str) -> Pair:
    """The generators only produce valid input: prove it with the same checks the API server and webhooks run."""
    runtime, schema = check_runtime(raw_runtime)
    assert runtime is not None and schema.errors == (), [str(e) for e in schema.errors]
    assert admit_runtime(runtime).errors == ()
    source = RuntimeSource.of(runtime)
    job, job_schema = check_trainjob(raw_job)
    assert job is not None and job_schema.errors == (), [str(e) for e in job_schema.errors]
    admission = admit_trainjob(FRAMEWORK, None, job, lambda kind, ns, name: source)
    assert admission.errors == (), [str(e) for e in admission.errors]
    return Pair(job, source, plugin)


# ------------------------------------------------------------------------------------------------- helpers


def render(job: TrainJob, runtime: RuntimeSource) -> list[dict[str, Any]]:
    """What `trainjob-operator render` prints for one TrainJob."""
    return [build_snapshot(job, runtime), *FRAMEWORK.desired_objects(job, runtime, Observed(keys=FIXED_KEYS))]


def without_secret_data(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MPI SSH key is freshly generated per render: keep only which keys the Secret holds."""
    result = copy.deepcopy(objects)
    for obj in result:
        if obj["kind"] == "Secret":
            obj["data"] = sorted(obj["data"])
    return result


def source_state(runtime: RuntimeSource) -> dict[str, Any]:
    return {
        "template_spec": copy.deepcopy(runtime.template_spec),
        "obj": copy.deepcopy(runtime.obj),
        "spec": runtime.spec.model_dump(by_alias=True),
        "labels": dict(runtime.labels),
    }


# ------------------------------------------------------------------------------------------------ properties


@SETTINGS
@given(pairs())
def test_rendering_is_deterministic_and_pure(pair: Pair) -> None:
    job_before = pair.job.model_dump(by_alias=True)
    source_before = source_state(pair.runtime)

    first = render(pair.job, pair.runtime)
    second = render(pair.job, pair.runtime)

    assert without_secret_data(first) == without_secret_data(second)
    assert pair.job.model_dump(by_alias=True) == job_before
    assert source_state(pair.runtime) == source_before


@SETTINGS
@given(pairs())
def test_every_object_is_complete_and_owned_by_the_trainjob(pair: Pair) -> None:
    objects = render(pair.job, pair.runtime)
    owner: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "name": pair.job.name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if pair.job.metadata.uid:
        owner["uid"] = pair.job.metadata.uid
    summary = [
        (
            bool(o.get("apiVersion")),
            bool(o.get("kind")),
            o["metadata"].get("name") or None,
            o["metadata"].get("namespace"),
            [r for r in o["metadata"].get("ownerReferences", []) if r.get("controller")],
        )
        for o in objects
    ]
    assert summary == [(True, True, o["metadata"]["name"], "default", [owner]) for o in objects]
    assert all(o["metadata"]["name"] for o in objects)


@SETTINGS
@given(pairs())
def test_the_jobset_has_parallelism_equal_to_completions(pair: Pair) -> None:
    objects = render(pair.job, pair.runtime)
    jobsets = [o for o in objects if o["kind"] == c.JOBSET_KIND]
    assert [(j["apiVersion"], j["metadata"]["name"]) for j in jobsets] == [(c.JOBSET_API_VERSION, pair.job.name)]
    counts = [
        (rj["name"], rj["template"]["spec"].get("parallelism"), rj["template"]["spec"].get("completions"))
        for rj in jobsets[0]["spec"]["replicatedJobs"]
    ]
    assert counts == [(name, p, p) for name, p, _ in counts]
    assert all(isinstance(p, int) and p >= 0 for _, p, _ in counts)
    assert jobsets[0]["spec"]["suspend"] is bool(pair.job.spec.suspend)


@SETTINGS
@given(pairs())
def test_the_snapshot_reproduces_the_rendering(pair: Pair) -> None:
    objects = render(pair.job, pair.runtime)
    snapshot = objects[0]
    assert (snapshot["kind"], snapshot["metadata"]["name"]) == ("ConfigMap", f"{pair.job.name}-runtime-snapshot")
    restored = runtime_from_snapshot(pair.job, snapshot, SHIPPED_MODELS)
    assert restored.obj == pair.runtime.obj
    assert without_secret_data(render(pair.job, restored)) == without_secret_data(objects)


@SETTINGS
@given(pairs())
def test_plugin_specific_objects_are_emitted(pair: Pair) -> None:
    objects = render(pair.job, pair.runtime)
    policy = pair.runtime.spec.pod_group_policy
    want = [("ConfigMap", f"{pair.job.name}-runtime-snapshot")]
    if pair.plugin == "mpi":
        want += [("Secret", f"{pair.job.name}-mpi-ssh-auth"), ("ConfigMap", f"{pair.job.name}-mpi-hostfile")]
    if policy is not None and (policy.coscheduling is not None or policy.volcano is not None):
        want.append(("PodGroup", pair.job.name))
    want.append(("JobSet", pair.job.name))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == want


@SETTINGS
@given(pairs(), NAMES)
def test_rendering_another_trainjob_first_does_not_leak_into_the_result(pair: Pair, other_name: str) -> None:
    alone = render(pair.job, pair.runtime)
    other = pair.job.model_copy(deep=True)
    other.metadata.name = f"{other_name}-other"
    render(other, pair.runtime)
    assert without_secret_data(render(pair.job, pair.runtime)) == without_secret_data(alone)


def pods(jobset: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (rj["name"], rj["template"]["spec"]["template"].get("spec") or {}) for rj in jobset["spec"]["replicatedJobs"]
    ]


@SETTINGS
@given(pairs())
def test_pods_have_unique_volumes_env_and_mount_paths(pair: Pair) -> None:
    jobset = next(o for o in render(pair.job, pair.runtime) if o["kind"] == c.JOBSET_KIND)
    duplicates = []
    for job, pod in pods(jobset):
        volumes = [v["name"] for v in pod.get("volumes") or []]
        if len(volumes) != len(set(volumes)):
            duplicates.append((job, "volumes", volumes))
        for ctr in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            env = [e["name"] for e in ctr.get("env") or []]
            paths = [m["mountPath"] for m in ctr.get("volumeMounts") or []]
            mounted = {m["name"] for m in ctr.get("volumeMounts") or []}
            if len(env) != len(set(env)):
                duplicates.append((job, ctr["name"], env))
            if len(paths) != len(set(paths)):
                duplicates.append((job, ctr["name"], paths))
            if not mounted <= set(volumes):
                duplicates.append((job, ctr["name"], sorted(mounted - set(volumes))))
    assert duplicates == []


ACTIVE_JOBSET = Observed(
    jobset={
        "spec": {"suspend": False},
        "status": {
            "replicatedJobsStatus": [
                {"name": c.NODE, "active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}
            ]
        },
    }
)


@SETTINGS
@given(pairs())
def test_an_unchanged_update_is_admitted_and_the_wire_form_round_trips(pair: Pair) -> None:
    wire = pair.job.to_wire()
    again, schema = check_trainjob(wire, copy.deepcopy(wire))
    assert (again, [str(e) for e in schema.errors]) == (pair.job, [])
    admission = admit_trainjob(FRAMEWORK, pair.job, pair.job, lambda kind, ns, name: pair.runtime, ACTIVE_JOBSET)
    assert [str(e) for e in admission.errors] == []
