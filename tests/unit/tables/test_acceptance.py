"""The acceptance cases of spec §10.2: TrainJob + runtime in, the objects upstream would apply out."""

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import (
    FixedKeys,
    RuntimeBuilder,
    TrainJobBuilder,
    as_set,
    by_kind,
    container,
    container_of,
    env_of,
    jobset_of,
    pod_patch,
    pod_spec,
    replicated_job,
    rjob,
)
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.observed import ObjectRef, Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework

FRAMEWORK = Framework.from_registry()
RES = {"requests": {"cpu": 1}}
OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "test-job",
    "uid": "uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
NODE_RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
FIXED_KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")


def render(job: TrainJobBuilder, runtime: RuntimeBuilder, observed: Observed | None = None) -> list[dict[str, Any]]:
    return FRAMEWORK.desired_objects(job.obj(), runtime.source(), observed or Observed(keys=FixedKeys(FIXED_KEY)))


def all_containers_runtime(**fields: Any) -> RuntimeBuilder:
    """The standard fixture with every container set to `fields` (upstream's `.Container(...)` on all jobs)."""
    runtime = RuntimeBuilder.make()
    for name in (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER, c.NODE):
        jobs = runtime.raw()["spec"]["template"]["spec"]["replicatedJobs"]
        index = next(i for i, rj in enumerate(jobs) if rj["name"] == name)
        ctr = jobs[index]["template"]["spec"]["template"]["spec"]["containers"][0]
        ctr.update(copy.deepcopy(fields))
        runtime = runtime.set(
            f"spec.template.spec.replicatedJobs.{index}.template.spec.template.spec.containers", [ctr]
        )
    return runtime


def normalized_ports(ctr: dict[str, Any]) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = ctr.get("ports", [])
    return ports


# --- case 1 -------------------------------------------------------------------------------------------


def test_plainml_coscheduling_and_patch_metadata_build_whole_jobset_and_podgroup() -> None:
    runtime = (
        all_containers_runtime(image="test:runtime", command=["runtime"], args=["runtime"], resources=RES)
        .set("metadata.labels", {"conflictLabel": "overridden"})
        .set("metadata.annotations", {"conflictAnnotation": "overridden"})
        .ml_policy(num_nodes=100)
        .coscheduling(timeout=120)
    )
    job = (
        TrainJobBuilder.make()
        .suspend()
        .patch(
            "test.io/manager",
            metadata={"labels": {"conflictLabel": "override"}, "annotations": {"conflictAnnotation": "override"}},
        )
        .trainer(numNodes=30)
    )
    objects = render(job, runtime)
    assert [o["kind"] for o in objects] == ["PodGroup", "JobSet"]

    def expected_job(name: str, ancestor: str, count: int, mounts: list[dict[str, str]]) -> dict[str, Any]:
        return {
            "name": name,
            "groupName": "default",
            "replicas": 1,
            "template": {
                "metadata": {"labels": {c.ANCESTOR_LABEL: ancestor}},
                "spec": {
                    "parallelism": count,
                    "completions": count,
                    "template": {
                        "metadata": {"labels": {c.COSCHEDULING_POD_GROUP_LABEL: "test-job"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": name if name != "node" else "node",
                                    "image": "test:runtime",
                                    "command": ["runtime"],
                                    "args": ["runtime"],
                                    "resources": RES,
                                    "volumeMounts": mounts,
                                }
                            ],
                            "volumes": [{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}],
                        },
                    },
                },
            },
        }

    assert jobset_of(objects) == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "labels": {"conflictLabel": "override"},
            "annotations": {"conflictAnnotation": "override"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "replicatedJobs": [
                expected_job(
                    "dataset-initializer",
                    "dataset-initializer",
                    1,
                    [{"name": "initializer", "mountPath": "/workspace/dataset"}],
                ),
                expected_job(
                    "model-initializer",
                    "model-initializer",
                    1,
                    [{"name": "initializer", "mountPath": "/workspace/model"}],
                ),
                expected_job(
                    "node",
                    "trainer",
                    30,
                    [
                        {"name": "initializer", "mountPath": "/workspace/dataset"},
                        {"name": "initializer", "mountPath": "/workspace/model"},
                    ],
                ),
            ],
            "suspend": True,
        },
    }
    assert by_kind(objects, "PodGroup") == [
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "test-job", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {"minMember": 32, "minResources": {"cpu": "32"}, "scheduleTimeoutSeconds": 120},
        }
    ]


# --- cases 2, 5, 6, 10: container, env and resource merges --------------------------------------------


@dataclass(frozen=True)
class NodeCase:
    runtime: RuntimeBuilder
    job: TrainJobBuilder
    parallelism: int
    node: dict[str, Any]
    env: dict[str, Any] = field(default_factory=dict)
    ports: list[dict[str, Any]] = field(default_factory=list)
    podgroup: bool = False


RUNTIME_ENV = [{"name": "TRAIN_JOB", "value": "original"}, {"name": "RUNTIME", "value": "test:runtime"}]
TRAINJOB_CONTAINER = dict(
    image="test:trainjob",
    command=["trainjob"],
    args=["trainjob"],
    resourcesPerNode=RES,
    env=[{"name": "TRAIN_JOB", "value": "override"}, {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"}],
)
PET_100 = {
    "PET_NNODES": "100",
    "PET_NPROC_PER_NODE": "1",
    "PET_NODE_RANK": NODE_RANK,
    "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
    "PET_MASTER_PORT": "29500",
}

NODE_CASES = [
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make().ml_policy(num_nodes=100).node_container(env=RUNTIME_ENV),
            job=TrainJobBuilder.make().trainer(**TRAINJOB_CONTAINER),
            parallelism=100,
            node={"image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"], "resources": RES},
            env={"TRAIN_JOB": "override", "TRAIN_JOB_CUSTOM": "test:trainjob", "RUNTIME": "test:runtime"},
        ),
        id="runtime numNodes and TrainJob container with env merge (case 2)",
    ),
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make().ml_policy(num_nodes=100, torch={}).node_container(env=RUNTIME_ENV),
            job=TrainJobBuilder.make().trainer(**TRAINJOB_CONTAINER),
            parallelism=100,
            node={"image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"], "resources": RES},
            env={"TRAIN_JOB": "override", "TRAIN_JOB_CUSTOM": "test:trainjob", "RUNTIME": "test:runtime", **PET_100},
            ports=[{"containerPort": 29500}],
        ),
        id="torch auto numProcPerNode resolves to CPU count (case 6)",
    ),
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make()
            .ml_policy(num_nodes=100, torch={})
            .node_container(resources=RES)
            .job(
                "node",
                "dependsOn",
                [
                    {"name": "dataset-initializer", "status": "Complete"},
                    {"name": "model-initializer", "status": "Complete"},
                ],
            ),
            job=TrainJobBuilder.make().trainer(numNodes=30, numProcPerNode=3),
            parallelism=30,
            node={"image": "test:runtime", "resources": RES},
            env={
                "PET_NNODES": "30",
                "PET_NPROC_PER_NODE": "3",
                "PET_NODE_RANK": NODE_RANK,
                "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
                "PET_MASTER_PORT": "29500",
            },
            ports=[{"containerPort": 29500}],
        ),
        id="torch explicit numNodes and numProcPerNode (case 5)",
    ),
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make().ml_policy(num_nodes=1).node_container(resources=RES),
            job=TrainJobBuilder.make().trainer(numNodes=1, resourcesPerNode={"limits": {"nvidia.com/gpu": 4}}),
            parallelism=1,
            node={"image": "test:runtime", "resources": {"requests": {"cpu": 1}, "limits": {"nvidia.com/gpu": 4}}},
        ),
        id="resourcesPerNode with only a GPU keeps the runtime's CPU request (case 10)",
    ),
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}),
            job=TrainJobBuilder.make(),
            parallelism=2,
            node={"image": "test:runtime"},
        ),
        id="a TrainJob without a trainer block gets no PET env and no port",
    ),
    pytest.param(
        NodeCase(
            runtime=RuntimeBuilder.make().node_container(resources=RES),
            job=TrainJobBuilder.make().trainer(numNodes=4, resourcesPerNode={"limits": {"cpu": 8}}),
            parallelism=4,
            node={"image": "test:runtime", "resources": RES},
        ),
        id="without mlPolicy resourcesPerNode is not applied (docs/upstream-behaviour.md#runtime-info)",
    ),
]


@pytest.mark.parametrize("case", NODE_CASES)
def test_node_container(case: NodeCase) -> None:
    jobset = jobset_of(render(case.job, case.runtime))
    node_job = rjob(jobset, "node")
    assert node_job["template"]["spec"]["parallelism"] == case.parallelism
    assert node_job["template"]["spec"]["completions"] == case.parallelism
    node = container_of(jobset, "node")
    assert {k: node[k] for k in case.node} == case.node
    assert set(node) - set(case.node) <= {"name", "env", "ports", "volumeMounts"}
    assert env_of(node) == case.env
    assert normalized_ports(node) == case.ports
    for initializer in ("dataset-initializer", "model-initializer"):
        assert rjob(jobset, initializer)["template"]["spec"]["parallelism"] == 1


def test_depends_on_is_preserved() -> None:
    runtime = (
        RuntimeBuilder.make()
        .ml_policy(num_nodes=100, torch={})
        .job(
            "node",
            "dependsOn",
            [
                {"name": "dataset-initializer", "status": "Complete"},
                {"name": "model-initializer", "status": "Complete"},
            ],
        )
    )
    jobset = jobset_of(render(TrainJobBuilder.make().trainer(numNodes=30, numProcPerNode=3), runtime))
    assert rjob(jobset, "node")["dependsOn"] == [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]


# --- case 3: runtime patches --------------------------------------------------------------------------

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["antarctica-east1", "antarctica-west1"]}
                    ]
                }
            ]
        }
    }
}
GATE = [{"name": "kueue.x-k8s.io/admission"}]
TOLERATION = [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SELECTOR_KEY = "node.kubernetes.io/instance-type"
SELECTOR = {SELECTOR_KEY: "p5.48xlarge"}


def patches_runtime() -> RuntimeBuilder:
    runtime = RuntimeBuilder.make().ml_policy(num_nodes=100)
    runtime = runtime.job(
        "dataset-initializer",
        "template.spec.template.spec.initContainers",
        [
            container(
                "override-init-container",
                env=[{"name": "INIT_ENV", "value": "original_init"}, {"name": "DATASET_PATH", "value": "runtime"}],
            )
        ],
    )
    runtime = runtime.job(
        "node",
        "template.spec.template.spec.initContainers",
        [container("override-init-container", env=[{"name": "INIT_ENV", "value": "original_init"}])],
    )
    jobs = runtime.raw()["spec"]["template"]["spec"]["replicatedJobs"]
    node_containers = jobs[2]["template"]["spec"]["template"]["spec"]["containers"]
    node_containers[0]["env"] = [{"name": "TRAIN_JOB", "value": "original"}]
    node_containers.append(
        container("override-container", env=[{"name": "CONTAINER_ENV", "value": "original_container"}])
    )
    return runtime.job("node", "template.spec.template.spec.containers", node_containers)


def test_runtime_patches_merge_strategically_across_managers() -> None:
    init_env = {"name": "override-init-container", "env": [{"name": "INIT_ENV", "value": "override_init"}]}
    job = (
        TrainJobBuilder.make()
        .trainer(image="test:trainjob")
        .patch(
            "manager-1",
            jobs=[
                pod_patch(
                    "dataset-initializer",
                    initContainers=[
                        {**init_env, "env": [*init_env["env"], {"name": "NEW_VALUE", "value": "from_overrides"}]}
                    ],
                    containers=[
                        {
                            "name": "dataset-initializer",
                            "volumeMounts": [
                                {"name": "initializer_secret", "mountPath": "initializer_secret_mount_path"},
                                {"name": "initializer_claim", "mountPath": "initializer_claim_mount_path"},
                            ],
                        }
                    ],
                    affinity=AFFINITY,
                    nodeSelector=SELECTOR,
                    schedulingGates=GATE,
                    tolerations=TOLERATION,
                    volumes=[
                        {"name": "initializer_secret", "secret": {"secretName": "initializer_secret_name"}},
                        {"name": "initializer_claim", "persistentVolumeClaim": {"claimName": "initializer_claim_name"}},
                    ],
                )
            ],
        )
        .patch(
            "manager-2",
            jobs=[
                pod_patch(
                    "node",
                    serviceAccountName="override-sa",
                    initContainers=[init_env],
                    containers=[
                        {
                            "name": "node",
                            "volumeMounts": [
                                {"name": "node_secret", "mountPath": "node_secret_mount_path"},
                                {"name": "node_claim", "mountPath": "node_claim_mount_path"},
                            ],
                        },
                        {
                            "name": "override-container",
                            "env": [{"name": "CONTAINER_ENV", "value": "override_container"}],
                        },
                    ],
                    affinity=AFFINITY,
                    imagePullSecrets=[{"name": "registry-credential"}],
                    nodeSelector=SELECTOR,
                    schedulingGates=GATE,
                    tolerations=TOLERATION,
                    terminationGracePeriodSeconds=300,
                    volumes=[
                        {"name": "node_secret", "secret": {"secretName": "node_secret_name"}},
                        {"name": "node_claim", "persistentVolumeClaim": {"claimName": "node_claim_name"}},
                    ],
                )
            ],
        )
    )
    jobset = jobset_of(render(job, patches_runtime()))

    dataset = pod_spec(jobset, "dataset-initializer")
    assert env_of(container_of(jobset, "dataset-initializer", "override-init-container", init=True)) == {
        "INIT_ENV": "override_init",
        "DATASET_PATH": "runtime",
        "NEW_VALUE": "from_overrides",
    }
    assert as_set(
        container_of(jobset, "dataset-initializer", "dataset-initializer")["volumeMounts"], "mountPath"
    ).keys() == {"/workspace/dataset", "initializer_secret_mount_path", "initializer_claim_mount_path"}
    assert (dataset["affinity"], dataset["nodeSelector"], dataset["schedulingGates"], dataset["tolerations"]) == (
        AFFINITY,
        SELECTOR,
        GATE,
        TOLERATION,
    )
    assert as_set(dataset["volumes"]).keys() == {"initializer", "initializer_secret", "initializer_claim"}

    node = pod_spec(jobset, "node")
    assert node["serviceAccountName"] == "override-sa"
    assert env_of(container_of(jobset, "node", "override-init-container", init=True)) == {"INIT_ENV": "override_init"}
    main = container_of(jobset, "node")
    assert main["image"] == "test:trainjob"
    assert env_of(main) == {"TRAIN_JOB": "original"}
    assert as_set(main["volumeMounts"], "mountPath").keys() == {
        "/workspace/dataset",
        "/workspace/model",
        "node_secret_mount_path",
        "node_claim_mount_path",
    }
    assert env_of(container_of(jobset, "node", "override-container")) == {"CONTAINER_ENV": "override_container"}
    assert node["imagePullSecrets"] == [{"name": "registry-credential"}]
    assert node["terminationGracePeriodSeconds"] == 300
    assert as_set(node["volumes"]).keys() == {"initializer", "node_secret", "node_claim"}
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 100
    assert pod_spec(jobset, "model-initializer") == pod_spec(
        jobset_of(render(TrainJobBuilder.make(), patches_runtime())), "model-initializer"
    )


def test_patch_labels_and_annotations_land_on_job_and_pod_templates() -> None:
    job = (
        TrainJobBuilder.make()
        .patch(
            "test.io/m1",
            jobs=[
                pod_patch(
                    "dataset-initializer",
                    labels={"k1": "v1"},
                    annotations={"a1": "v1"},
                    job_labels={"job-k1": "job-v1"},
                )
            ],
        )
        .patch(
            "test.io/m2",
            jobs=[pod_patch("node", labels={"k2": "v2"}, annotations={"a2": "v2"}, job_labels={"job-k2": "job-v2"})],
        )
    )
    jobset = jobset_of(render(job, RuntimeBuilder.make()))
    dataset, node = rjob(jobset, "dataset-initializer"), rjob(jobset, "node")
    assert dataset["template"]["metadata"]["labels"] == {c.ANCESTOR_LABEL: "dataset-initializer", "job-k1": "job-v1"}
    assert dataset["template"]["spec"]["template"]["metadata"] == {"labels": {"k1": "v1"}, "annotations": {"a1": "v1"}}
    assert node["template"]["metadata"]["labels"] == {c.ANCESTOR_LABEL: "trainer", "job-k2": "job-v2"}
    assert node["template"]["spec"]["template"]["metadata"] == {"labels": {"k2": "v2"}, "annotations": {"a2": "v2"}}


@pytest.mark.parametrize(
    ("patches", "want"),
    [
        pytest.param(
            [("m.io/1", {"nodeSelector": {"a": "1"}}), ("m.io/1-dup", {"serviceAccountName": "test-sa"})],
            {"nodeSelector": {"a": "1"}, "serviceAccountName": "test-sa"},
            id="two managers patching different fields of the same job both land",
        ),
        pytest.param(
            [
                ("m.io/1", {"nodeSelector": {SELECTOR_KEY: "p5.48xlarge"}}),
                ("m.io/2", {"nodeSelector": {SELECTOR_KEY: "p5en.48xlarge"}}),
            ],
            {"nodeSelector": {SELECTOR_KEY: "p5en.48xlarge"}},
            id="the later manager wins a scalar conflict",
        ),
        pytest.param(
            [
                ("m.io/1", {"tolerations": [{"key": "a", "operator": "Exists"}]}),
                ("m.io/2", {"tolerations": [{"key": "b", "operator": "Exists"}]}),
            ],
            {"tolerations": [{"key": "b", "operator": "Exists"}]},
            id="tolerations are replaced, not merged",
        ),
    ],
)
def test_patches_on_the_same_job(patches: list[tuple[str, dict[str, Any]]], want: dict[str, Any]) -> None:
    job = TrainJobBuilder.make()
    for manager, spec in patches:
        job = job.patch(manager, jobs=[pod_patch("node", **spec)])
    jobset = jobset_of(render(job, RuntimeBuilder.make()))
    node = pod_spec(jobset, "node")
    assert {k: node[k] for k in want} == want
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 1
    assert [rj["name"] for rj in jobset["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]


# --- case 4: initializers -----------------------------------------------------------------------------


def test_initializers_get_storage_uri_env_and_secret() -> None:
    job = (
        TrainJobBuilder.make()
        .trainer()
        .initializer(
            dataset={
                "storageUri": "hf://trainjob-dataset",
                "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:dataset"}],
                "secretRef": {"name": "trainjob-secret-dataset"},
            },
            model={
                "storageUri": "hf://trainjob-model",
                "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:model"}],
                "secretRef": {"name": "trainjob-secret-model"},
            },
        )
    )
    jobset = jobset_of(render(job, RuntimeBuilder.make().ml_policy(num_nodes=100)))
    for kind in ("dataset", "model"):
        ctr = container_of(jobset, f"{kind}-initializer", f"{kind}-initializer")
        assert env_of(ctr) == {"STORAGE_URI": f"hf://trainjob-{kind}", "TRAIN_JOB": f"test:trainjob:{kind}"}
        assert ctr["envFrom"] == [{"secretRef": {"name": f"trainjob-secret-{kind}"}}]


def test_initializer_with_empty_storage_uri_still_sets_the_env() -> None:
    job = TrainJobBuilder.make().initializer(dataset={"storageUri": ""})
    jobset = jobset_of(render(job, RuntimeBuilder.make()))
    assert env_of(container_of(jobset, "dataset-initializer", "dataset-initializer")) == {"STORAGE_URI": ""}
    assert "env" not in container_of(jobset, "model-initializer", "model-initializer")


# --- cases 7, 8: torchtune ----------------------------------------------------------------------------

LLAMA_1B_COMMAND = [
    "tune",
    "run",
    "--rdzv_endpoint=localhost:29500",
    "full_finetune_distributed",
    "--config",
    "llama3_2/1B_full",
    "dataset=torchtune.datasets.instruct_dataset",
    "dataset.source=parquet",
    "dataset.data_dir=/workspace/dataset/data",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]


@dataclass(frozen=True)
class TuneCase:
    runtime_name: str
    runtime_command: list[str]
    trainer: dict[str, Any]
    command: list[str]
    env: dict[str, Any]


TUNE_CASES = [
    pytest.param(
        TuneCase(
            runtime_name="torchtune-llama3.3-70b",
            runtime_command=[
                "tune",
                "run",
                "full_finetune_distributed",
                "--config",
                "llama3_3/70B_full_multinode",
                "output_dir=/workspace/model/llama3_3/70B",
                "tokenizer.path=/workspace/model/original/tokenizer.model",
                "checkpointer.checkpoint_dir=/workspace/model",
            ],
            trainer=dict(
                image="test:trainjob",
                command=["tune", "run"],
                resourcesPerNode=RES,
                numNodes=30,
                numProcPerNode=3,
                args=[
                    "dtype=fp16",
                    "batch_size=32",
                    "epochs=10",
                    "loss=torchtune.modules.loss.CEWithChunkedOutputLoss",
                ],
            ),
            command=[
                "tune",
                "run",
                "--rdzv_endpoint=test-job-node-0-0.test-job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_3/70B_full_multinode",
                "output_dir=/workspace/model/llama3_3/70B",
                "tokenizer.path=/workspace/model/original/tokenizer.model",
                "checkpointer.checkpoint_dir=/workspace/model",
            ],
            env={"PET_NNODES": "30", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": NODE_RANK},
        ),
        id="multi-node full finetune (case 7)",
    ),
    pytest.param(
        TuneCase(
            runtime_name="torchtune-llama3.2-1b",
            runtime_command=LLAMA_1B_COMMAND,
            trainer=dict(
                command=["tune", "run"],
                numNodes=1,
                resourcesPerNode={"requests": {"cpu": 1, "example.com/gpu": 2}},
                args=[
                    "dataset.data_dir=/workspace/dataset/data",
                    "model.apply_lora_to_mlp=True",
                    "model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]",
                    "dataset=torchtune.datasets.instruct_dataset",
                    "dataset.source=parquet",
                ],
            ),
            command=[
                "tune",
                "run",
                "--rdzv_endpoint=test-job-node-0-0.test-job:29500",
                "lora_finetune_distributed",
                "--config",
                "llama3_2/1B_lora",
                "output_dir=/workspace/output",
                "tokenizer.path=/workspace/model/original/tokenizer.model",
                "checkpointer.checkpoint_dir=/workspace/model",
            ],
            env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": NODE_RANK},
        ),
        id="single-node LoRA on two GPUs (case 8)",
    ),
    pytest.param(
        TuneCase(
            runtime_name="torchtune-llama3.2-1b",
            runtime_command=LLAMA_1B_COMMAND,
            trainer=dict(
                command=["tune", "run"],
                numNodes=1,
                resourcesPerNode={"limits": {"nvidia.com/gpu": 1}},
                args=["model.quantize_base=True", "model.lora_attn_modules=[q_proj]"],
            ),
            command=[
                "tune",
                "run",
                "lora_finetune_single_device",
                "--config",
                "llama3_2/1B_qlora_single_device",
                "output_dir=/workspace/output",
                "tokenizer.path=/workspace/model/original/tokenizer.model",
                "checkpointer.checkpoint_dir=/workspace/model",
            ],
            env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": NODE_RANK},
        ),
        id="single-device QLoRA on one GPU",
    ),
    pytest.param(
        TuneCase(
            runtime_name="torchtune-qwen2.5-1.5b",
            runtime_command=[
                "tune",
                "run",
                "output_dir=/workspace/output",
                "tokenizer.merges_file=/workspace/model/m.txt",
            ],
            trainer=dict(
                command=["tune", "run"],
                numProcPerNode=4,
                args=["model.quantize_base=true", "model.use_dora=True", "model.lora_attn_modules=[q]"],
            ),
            command=[
                "tune",
                "run",
                "--rdzv_endpoint=test-job-node-0-0.test-job:29500",
                "lora_finetune_distributed",
                "--config",
                "qwen2_5/1.5B_lora",
                "output_dir=/workspace/output",
                "tokenizer.merges_file=/workspace/model/m.txt",
            ],
            env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": NODE_RANK},
        ),
        id="DoRA is not QLoRA: distributed LoRA recipe",
    ),
]


@pytest.mark.parametrize("case", TUNE_CASES)
def test_torchtune_command_rewrite(case: TuneCase) -> None:
    runtime = (
        RuntimeBuilder.make(name=case.runtime_name)
        .ml_policy(num_nodes=100 if "70b" in case.runtime_name else 1, torch={})
        .node_container(command=case.runtime_command)
    )
    job = TrainJobBuilder.make(runtime=case.runtime_name).trainer(**case.trainer)
    node = container_of(jobset_of(render(job, runtime)), "node")
    assert node["command"] == case.command
    assert node.get("args") == case.trainer.get("args")
    assert env_of(node) == case.env
    assert node["ports"] == [{"containerPort": 29500}]


@pytest.mark.parametrize(
    ("num_nodes", "num_proc", "gpus", "args", "want"),
    [
        pytest.param(1, 1, 0, [], ("full_finetune_single_device", "_full_single_device"), id="one proc: single device"),
        pytest.param(1, "auto", 1, [], ("full_finetune_single_device", "_full_single_device"), id="one GPU"),
        pytest.param(
            1,
            "auto",
            1,
            ["model.lora_attn_modules=[q]"],
            ("lora_finetune_single_device", "_lora_single_device"),
            id="LoRA on one GPU",
        ),
        pytest.param(
            1,
            2,
            0,
            ["model.quantize_base=TRUE"],
            ("lora_finetune_distributed", "_qlora"),
            id="distributed QLoRA (case-insensitive true)",
        ),
        pytest.param(1, 2, 0, [], ("full_finetune_distributed", "_full"), id="single node, several procs"),
        pytest.param(2, 1, 0, [], ("full_finetune_distributed", "_full_multinode"), id="multi-node"),
    ],
)
def test_torchtune_recipe_table(
    num_nodes: int, num_proc: int | str, gpus: int, args: list[str], want: tuple[str, str]
) -> None:
    from trainjob_operator.runtime.plugins.torchtune import recipe_and_config

    assert recipe_and_config(num_nodes, num_proc, gpus, args) == want


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("torchtune-llama3.2-1b", "llama3_2/1B"),
        ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
        ("torchtune-llama3.3-70b", "llama3_3/70B"),
        ("torch-distributed", ""),
        ("a-b-c-d", ""),
    ],
)
def test_torchtune_model_from_runtime_name(name: str, model: str) -> None:
    from trainjob_operator.runtime.plugins.torchtune import model_of

    assert model_of(name) == model


# --- torch numProcPerNode table (torch_test.go) --------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        pytest.param({"requests": {"cpu": 4}}, "4", id="cpu 4"),
        pytest.param(None, "1", id="no resources"),
        pytest.param({"requests": {"cpu": 2.5}}, "3", id="cpu 2.5 rounds up"),
        pytest.param({"requests": {"cpu": "2500m"}}, "3", id="cpu 2500m rounds up"),
        pytest.param({"requests": {"cpu": 0.7}}, "1", id="cpu 0.7"),
        pytest.param({"requests": {"cpu": 3.7}}, "4", id="cpu 3.7"),
        pytest.param({"limits": {"cpu": 6}}, "6", id="cpu from limits when requests have none"),
        pytest.param({"requests": {"cpu": 6, "example.com/gpu": 2}}, "auto", id="GPUs keep auto"),
        pytest.param({"requests": {"cpu": 8}, "limits": {"nvidia.com/gpu": 4}}, "auto", id="GPU in limits keeps auto"),
    ],
)
def test_torch_num_proc_per_node_resolution(resources: dict[str, Any] | None, want: str) -> None:
    trainer: dict[str, Any] = {} if resources is None else {"resourcesPerNode": resources}
    job = TrainJobBuilder.make().trainer(**trainer)
    node = container_of(jobset_of(render(job, RuntimeBuilder.make().ml_policy(torch={}))), "node")
    assert env_of(node)["PET_NPROC_PER_NODE"] == want


def test_torch_env_injection_reaches_init_and_sidecar_containers() -> None:
    runtime = (
        RuntimeBuilder.make()
        .ml_policy(torch={"envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar", "warmup"]}]}})
        .job("node", "template.spec.template.spec.initContainers", [container("warmup")])
    )
    jobs = runtime.raw()["spec"]["template"]["spec"]["replicatedJobs"]
    containers = jobs[2]["template"]["spec"]["template"]["spec"]["containers"] + [container("sidecar")]
    runtime = runtime.job("node", "template.spec.template.spec.containers", containers)
    job = TrainJobBuilder.make().trainer(command=["tune", "run"], numNodes=2)
    jobset = jobset_of(render(job, runtime.set("metadata.name", "test-runtime")))
    expected = {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": NODE_RANK,
        "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
        "PET_MASTER_PORT": "29500",
    }
    assert env_of(container_of(jobset, "node", "sidecar")) == expected
    assert env_of(container_of(jobset, "node", "warmup", init=True)) == expected


def test_torch_env_injection_to_a_missing_container_is_a_build_error() -> None:
    runtime = RuntimeBuilder.make().ml_policy(
        torch={"envInjection": {"targets": [{"jobName": "node", "containerNames": ["ghost"]}]}}
    )
    with pytest.raises(
        BuildError, match='envInjection target podSet "node" container "ghost" not found in runtime template'
    ):
        render(TrainJobBuilder.make(), runtime)


# --- case 9: OpenMPI ----------------------------------------------------------------------------------


def mpi_runtime(run_launcher_as_node: bool = False, num_proc: int = 1, ssh: str = "/root/.ssh") -> RuntimeBuilder:
    jobs = RuntimeBuilder.make().node_container(resources=RES).raw()["spec"]["template"]["spec"]["replicatedJobs"]
    launcher = replicated_job("launcher", None, [container("node", command=["mpirun"], args=["echo.sh"])])
    jobs.insert(2, launcher)
    return (
        RuntimeBuilder.make()
        .jobs(jobs)
        .ml_policy(
            num_nodes=1,
            mpi={
                "numProcPerNode": num_proc,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": ssh,
                "runLauncherAsNode": run_launcher_as_node,
            },
        )
    )


SSH_VOLUME = {
    "name": "mpi-ssh-auth",
    "secret": {
        "secretName": "test-job-mpi-ssh-auth",
        "defaultMode": 256,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 416},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 420},
            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 420},
        ],
    },
}
HOSTFILE_VOLUME = {
    "name": "mpi-hostfile",
    "configMap": {"name": "test-job-mpi-hostfile", "items": [{"key": "hostfile", "path": "hostfile", "mode": 292}]},
}


def test_openmpi_builds_secret_hostfile_and_launcher_env() -> None:
    objects = render(TrainJobBuilder.make().trainer(numNodes=2, numProcPerNode=8), mpi_runtime())
    (secret,) = by_kind(objects, "Secret")
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "test-job-mpi-ssh-auth", "namespace": "default", "ownerReferences": [OWNER]},
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {"ssh-privatekey": "UFJJVkFURQ==", "ssh-publickey": "ZWNkc2Etc2hhMi1uaXN0cDUyMSBBQUFBCg=="},
    }
    assert by_kind(objects, "ConfigMap") == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "test-job-mpi-hostfile", "namespace": "default", "ownerReferences": [OWNER]},
            "data": {"hostfile": "test-job-node-0-0.test-job slots=8\ntest-job-node-0-1.test-job slots=8\n"},
        }
    ]
    jobset = jobset_of(objects)
    assert rjob(jobset, "launcher")["template"]["spec"]["parallelism"] == 1
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 2
    assert as_set(pod_spec(jobset, "launcher")["volumes"]) == {
        "mpi-ssh-auth": SSH_VOLUME,
        "mpi-hostfile": HOSTFILE_VOLUME,
    }
    assert as_set(pod_spec(jobset, "node")["volumes"]) == {
        "mpi-ssh-auth": SSH_VOLUME,
        "initializer": {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}},
    }
    launcher = container_of(jobset, "launcher")
    assert as_set(launcher["volumeMounts"], "mountPath") == {
        "/root/.ssh": {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
        "/etc/mpi": {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    }
    assert env_of(launcher) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "8",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        # v2.4 (#4029): the Open MPI 5 (PRTE) names beside the ORTE ones; keep_fqdn false on purpose
        "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
        "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
        "PRTE_MCA_prte_set_default_slots": "8",
        "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
    }
    assert (launcher["command"], launcher["args"]) == (["mpirun"], ["echo.sh"])
    assert {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"} in container_of(jobset, "node")["volumeMounts"]


def test_mpi_secret_is_not_rebuilt_when_it_exists() -> None:
    objects = render(TrainJobBuilder.make().trainer(numNodes=2), mpi_runtime(), SSH_SECRET)
    assert [o["kind"] for o in objects] == ["ConfigMap", "JobSet"]


def test_mpi_generated_key_is_ecdsa_p521() -> None:
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from trainjob_operator.keys import FRESH_KEYS

    # The key the shell's key source draws (the core draws none itself).
    observed = Observed(keys=FRESH_KEYS)
    objects = FRAMEWORK.desired_objects(TrainJobBuilder.make().trainer().obj(), mpi_runtime().source(), observed)
    (secret,) = by_kind(objects, "Secret")
    key = load_pem_private_key(base64.b64decode(secret["data"]["ssh-privatekey"]), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp521r1"
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 AAAA")


def test_mpi_run_launcher_as_node_hostfile_starts_with_the_launcher() -> None:
    runtime = mpi_runtime(run_launcher_as_node=True)
    objects = render(TrainJobBuilder.make(name="trainJob", uid=None).trainer(numNodes=10), runtime)
    hostfile = by_kind(objects, "ConfigMap")[0]["data"]["hostfile"]
    lines = hostfile.splitlines()
    assert lines[0] == "trainJob-launcher-0-0.trainJob slots=1"
    assert lines[1:] == [f"trainJob-node-0-{i}.trainJob slots=1" for i in range(9)]
    assert rjob(jobset_of(objects), "node")["template"]["spec"]["parallelism"] == 9


def test_mpi_slots_follow_gpus_when_runtime_has_one_proc() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=1, resourcesPerNode={"limits": {"nvidia.com/gpu": 4}})
    objects = render(job, mpi_runtime())
    assert by_kind(objects, "ConfigMap")[0]["data"]["hostfile"] == "test-job-node-0-0.test-job slots=4\n"


def test_deepspeed_like_runtime_from_the_spec_fixture() -> None:
    node = replicated_job("node", None, [container("node", command=["/usr/sbin/sshd", "-De"])])
    launcher = replicated_job(
        "launcher", "trainer", [container("node")], dependsOn=[{"name": "node", "status": "Ready"}]
    )
    runtime = (
        RuntimeBuilder.make(name="deepspeed-distributed", kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
        .jobs([node, launcher])
        .set("spec.template.spec.network", {"publishNotReadyAddresses": True})
        .set("spec.template.spec.successPolicy", {"operator": "All", "targetReplicatedJobs": ["launcher"]})
        .ml_policy(
            num_nodes=1,
            mpi={
                "numProcPerNode": 1,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/home/mpiuser/.ssh",
                "runLauncherAsNode": True,
            },
        )
    )
    job = TrainJobBuilder.make(
        name="e2e-test-deepspeed", runtime="deepspeed-distributed", kind=c.CLUSTER_TRAINING_RUNTIME_KIND
    ).trainer(numNodes=2, command=["mpirun", "sleep", "10"])
    objects = render(job, runtime)
    assert by_kind(objects, "ConfigMap")[0]["data"]["hostfile"] == (
        "e2e-test-deepspeed-node-0-0.e2e-test-deepspeed slots=1\n"
        "e2e-test-deepspeed-launcher-0-0.e2e-test-deepspeed slots=1\n"
    )
    jobset = jobset_of(objects)
    assert [
        (rj["name"], rj["template"]["spec"]["parallelism"], rj["replicas"]) for rj in jobset["spec"]["replicatedJobs"]
    ] == [("node", 1, 1), ("launcher", 1, 1)]
    launcher_node = container_of(jobset, "launcher")
    assert launcher_node["command"] == ["mpirun", "sleep", "10"]
    assert env_of(launcher_node)["OMPI_MCA_orte_set_default_slots"] == "1"
    assert {m["mountPath"] for m in launcher_node["volumeMounts"]} == {"/home/mpiuser/.ssh", "/etc/mpi"}


# --- cases 12, 13: ClusterTrainingRuntime + coscheduling ----------------------------------------------


def test_cluster_runtime_coscheduling_counts_initializers() -> None:
    runtime = (
        all_containers_runtime(image="test:runtime", resources={"requests": {"cpu": 1, "memory": "4Gi"}})
        .set("kind", c.CLUSTER_TRAINING_RUNTIME_KIND)
        .set("metadata", {"name": "test-runtime"})
        .ml_policy(num_nodes=100)
        .coscheduling(timeout=120)
    )
    job = TrainJobBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND).suspend().trainer(image="test:trainjob")
    objects = render(job, runtime)
    jobset = jobset_of(objects)
    assert jobset["spec"]["suspend"] is True
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 100
    assert container_of(jobset, "node")["image"] == "test:trainjob"
    for rj in jobset["spec"]["replicatedJobs"]:
        assert rj["template"]["spec"]["template"]["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "test-job"}
    assert by_kind(objects, "PodGroup")[0]["spec"] == {
        "minMember": 102,
        "minResources": {"cpu": "102", "memory": "408Gi"},
        "scheduleTimeoutSeconds": 120,
    }


SSH_SECRET = Observed(existing=frozenset({ObjectRef("v1", "Secret", "test-job-mpi-ssh-auth")}))
GROUP = frozenset({ObjectRef(c.COSCHEDULING_API_VERSION, c.POD_GROUP_KIND, "test-job")})


def test_podgroup_is_not_reapplied_while_running_but_is_while_suspended() -> None:
    runtime = RuntimeBuilder.make().coscheduling()
    running = render(TrainJobBuilder.make(), runtime, Observed(existing=GROUP))
    suspended = render(TrainJobBuilder.make().suspend(), runtime, Observed(existing=GROUP))
    assert [o["kind"] for o in running] == ["JobSet"]
    assert [o["kind"] for o in suspended] == ["PodGroup", "JobSet"]
    assert by_kind(suspended, "PodGroup")[0]["spec"]["scheduleTimeoutSeconds"] == 60


def test_volcano_podgroup_takes_queue_priority_and_topology() -> None:
    runtime = (
        RuntimeBuilder.make()
        .volcano(networkTopology={"mode": "soft", "highestTierAllowed": 2})
        .set("spec.template.metadata", {"annotations": {"scheduling.volcano.sh/queue-name": "q1"}})
        .job("node", "template.spec.template.spec.priorityClassName", "high")
        .node_container(resources={"requests": {"cpu": "500m", "nvidia.com/gpu": 1}})
    )
    objects = render(TrainJobBuilder.make(), runtime)
    assert by_kind(objects, "PodGroup") == [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "test-job", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {
                "minMember": 3,
                "minResources": {"cpu": "500m", "nvidia.com/gpu": "1"},
                "queue": "q1",
                "priorityClassName": "high",
                "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
            },
        }
    ]
    for rj in jobset_of(objects)["spec"]["replicatedJobs"]:
        assert rj["template"]["spec"]["template"]["metadata"]["annotations"] == {
            "scheduling.k8s.io/group-name": "test-job"
        }
    assert jobset_of(objects)["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "q1"}


# --- case 18: JAX and XGBoost -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "resources", "env"),
    [
        pytest.param(
            {"jax": {}},
            None,
            {
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": NODE_RANK,
                "JAX_COORDINATOR_ADDRESS": "alpha-node-0-0.alpha:29500",
            },
            id="jax",
        ),
        pytest.param(
            {"xgboost": {}},
            None,
            {
                "DMLC_TRACKER_URI": "alpha-node-0-0.alpha",
                "DMLC_TRACKER_PORT": "29500",
                "DMLC_TASK_ID": NODE_RANK,
                "DMLC_NUM_WORKER": "2",
            },
            id="xgboost on CPU",
        ),
        pytest.param(
            {"xgboost": {}},
            {"limits": {"nvidia.com/gpu": 4}},
            {
                "DMLC_TRACKER_URI": "alpha-node-0-0.alpha",
                "DMLC_TRACKER_PORT": "29500",
                "DMLC_TASK_ID": NODE_RANK,
                "DMLC_NUM_WORKER": "8",
            },
            id="xgboost workers = nodes x GPUs",
        ),
    ],
)
def test_jax_and_xgboost_env(policy: dict[str, Any], resources: dict[str, Any] | None, env: dict[str, Any]) -> None:
    trainer: dict[str, Any] = {"numNodes": 2}
    if resources:
        trainer["resourcesPerNode"] = resources
    job = TrainJobBuilder.make(name="alpha").trainer(**trainer)
    jobset = jobset_of(render(job, RuntimeBuilder.make().ml_policy(num_nodes=1, **policy)))
    node = container_of(jobset, "node")
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 2
    assert env_of(node) == env
    assert node["ports"] == [{"containerPort": 29500}]


def test_torch_multi_node_example_from_the_spec() -> None:
    runtime = (
        RuntimeBuilder.make(name="torch-distributed", kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
        .jobs(
            [replicated_job("node", "trainer", [container("node", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime")])]
        )
        .ml_policy(num_nodes=1, torch={})
    )
    job = TrainJobBuilder.make(
        name="multi-node-example", runtime="torch-distributed", kind=c.CLUSTER_TRAINING_RUNTIME_KIND
    ).trainer(numNodes=3)
    jobset = jobset_of(render(job, runtime))
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 3
    env = env_of(container_of(jobset, "node"))
    assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_ADDR"]) == (
        "3",
        "1",
        "multi-node-example-node-0-0.multi-node-example",
    )


# --- case 11 and §5.4: what is (not) applied ----------------------------------------------------------


def test_running_jobset_is_never_mutated() -> None:
    running = {"spec": {"suspend": False}}
    assert render(TrainJobBuilder.make(), RuntimeBuilder.make(), Observed(jobset=running)) == []
    assert len(render(TrainJobBuilder.make().suspend(), RuntimeBuilder.make(), Observed(jobset=running))) == 1
    suspended = {"spec": {"suspend": True}}
    jobset = jobset_of(render(TrainJobBuilder.make(), RuntimeBuilder.make(), Observed(jobset=suspended)))
    assert jobset["spec"]["suspend"] is False


def test_unsupported_mpi_implementation_is_a_build_error() -> None:
    runtime = mpi_runtime().set("spec.mlPolicy.mpi.mpiImplementation", "")
    with pytest.raises(BuildError, match="MPI implementation for  doesn't supported"):
        render(TrainJobBuilder.make(), runtime)


def test_rendering_does_not_touch_the_shared_runtime_source() -> None:
    source = patches_runtime().source()
    before = copy.deepcopy(source.template_spec)
    job = TrainJobBuilder.make().trainer(image="x").patch("m.io/a", jobs=[pod_patch("node", nodeSelector={"a": "b"})])
    first = FRAMEWORK.desired_objects(job.obj(), source)
    second = FRAMEWORK.desired_objects(job.obj(), source)
    assert source.template_spec == before
    assert first == second
