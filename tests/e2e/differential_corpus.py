"""The corpus of the differential test: runtimes and TrainJobs fed unchanged to our operator and to upstream's
Kubeflow Trainer v2.3.0 controller. The compatibility spec's acceptance cases (§10.2, adapted to a live cluster:
emptyDir instead of the `initializer` PVC, smaller node counts) plus cases generated for every plugin (PlainML,
Torch incl. envInjection and torchtune, MPI, JAX, XGBoost, Flux, CoScheduling, Volcano, JobSet) and every status
path (Complete, Failed, ReachedMaxRestarts, DeadlineExceeded, Suspended, Resumed, managed elsewhere).

Each case is (TrainJob, runtimes it needs, the state to wait for, optional follow-up patch)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

API = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RUN_FOR = "trainjob-operator.test/run-for"
EXIT_CODE = "trainjob-operator.test/exit-code"
RES = {"requests": {"cpu": "1"}}
DATA_CACHE_RUNTIME = (
    Path(__file__).resolve().parents[2] / "runtimes" / "data-cache" / "torch-distributed-with-cache.yaml"
)


@dataclass
class Case:
    name: str
    trainjob: dict[str, Any]
    runtimes: list[dict[str, Any]] = field(default_factory=list)
    # Complete | Failed | Suspended | Ignored (managed elsewhere: nothing happens) | Rejected (by admission)
    settle: str = "Complete"
    # applied once `settle` is reached, then the case settles on `then`
    patch: dict[str, Any] | None = None
    then: str | None = None
    source: str = "generated"


def container(name: str, image: str = "test:runtime", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def rjob(
    name: str,
    ancestor: str | None,
    containers: list[dict[str, Any]],
    *,
    pod: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": name,
        "template": {
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers, **(pod or {})}}}
        },
        **extra,
    }
    job["template"]["spec"]["backoffLimit"] = 0
    if ancestor:
        job["template"]["metadata"] = {"labels": {ANCESTOR: ancestor}}
    if annotations:
        job["template"]["spec"]["template"]["metadata"] = {"annotations": annotations}
    return job


def standard_jobs(
    *,
    node_env: list[dict[str, Any]] | None = None,
    depends: bool = False,
    node_extra: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The upstream test fixture's three jobs (dataset-initializer, model-initializer, node) sharing volume
    `initializer` (an emptyDir here: kwok has no volume provisioner)."""
    vol = {"volumes": [{"name": "initializer", "emptyDir": {}}]}
    fields: dict[str, Any] = {
        "command": ["runtime"],
        "args": ["runtime"],
        "resources": copy.deepcopy(RES),
        "volumeMounts": [
            {"name": "initializer", "mountPath": "/workspace/dataset"},
            {"name": "initializer", "mountPath": "/workspace/model"},
        ],
        **({"env": node_env} if node_env else {}),
        **(node_extra or {}),
    }
    node = container("node", **fields)
    jobs = [
        rjob(
            "dataset-initializer",
            "dataset-initializer",
            [
                container(
                    "dataset-initializer",
                    command=["runtime"],
                    args=["runtime"],
                    resources=copy.deepcopy(RES),
                    volumeMounts=[{"name": "initializer", "mountPath": "/workspace/dataset"}],
                )
            ],
            pod=vol,
            annotations=annotations,
        ),
        rjob(
            "model-initializer",
            "model-initializer",
            [
                container(
                    "model-initializer",
                    command=["runtime"],
                    args=["runtime"],
                    resources=copy.deepcopy(RES),
                    volumeMounts=[{"name": "initializer", "mountPath": "/workspace/model"}],
                )
            ],
            pod=copy.deepcopy(vol),
            annotations=annotations,
        ),
        rjob("node", "trainer", [node], pod=copy.deepcopy(vol), annotations=annotations),
    ]
    if depends:
        jobs[2]["dependsOn"] = [
            {"name": "dataset-initializer", "status": "Complete"},
            {"name": "model-initializer", "status": "Complete"},
        ]
    return jobs


def runtime(
    name: str,
    jobs: list[dict[str, Any]],
    *,
    ml: dict[str, Any] | None = None,
    pg: dict[str, Any] | None = None,
    cluster: bool = False,
    labels: dict[str, str] | None = None,
    jobset: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": jobs, **(jobset or {})}}}
    if ml is not None:
        spec["mlPolicy"] = ml
    if pg is not None:
        spec["podGroupPolicy"] = pg
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": API,
        "kind": "ClusterTrainingRuntime" if cluster else "TrainingRuntime",
        "metadata": meta,
        "spec": spec,
    }


def trainjob(name: str, rt: str, kind: str = "TrainingRuntime", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": rt, "kind": kind}, **spec},
    }


def kwok(jobs: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {
        "manager": "e2e.trainjob-operator.test/kwok",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": j, "template": {"spec": {"template": {"metadata": {"annotations": a}}}}}
                        for j, a in jobs.items()
                    ]
                }
            }
        },
    }


def patch(
    manager: str,
    job: str,
    *,
    job_labels: dict[str, str] | None = None,
    pod_meta: dict[str, Any] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {}
    if pod_meta:
        pod["metadata"] = pod_meta
    if pod_spec:
        pod["spec"] = pod_spec
    template: dict[str, Any] = {"spec": {"template": pod}}
    if job_labels:
        template["metadata"] = {"labels": job_labels}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": job, "template": template}]}}},
    }


def cases() -> list[Case]:
    out: list[Case] = []
    add = out.append
    tune_cmd = [
        "tune",
        "run",
        "full_finetune_distributed",
        "--config",
        "llama3_3/70B_full_multinode",
        "output_dir=/workspace/model/llama3_3/70B",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    tune_1b = [
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

    # --- §10.2 acceptance cases -------------------------------------------------------------------------------
    rt = runtime(
        "ac01-runtime", standard_jobs(), ml={"numNodes": 4}, pg={"coscheduling": {"scheduleTimeoutSeconds": 120}}
    )
    rt["metadata"]["labels"] = {"conflictLabel": "overridden"}
    rt["metadata"]["annotations"] = {"conflictAnnotation": "overridden"}
    add(
        Case(
            "ac01-plainml-cosched",
            trainjob(
                "ac01",
                "ac01-runtime",
                suspend=True,
                trainer={"numNodes": 3},
                runtimePatches=[
                    {
                        "manager": "test.io/manager",
                        "trainingRuntimeSpec": {
                            "template": {
                                "metadata": {
                                    "labels": {"conflictLabel": "override"},
                                    "annotations": {"conflictAnnotation": "override"},
                                }
                            }
                        },
                    }
                ],
            ),
            [rt],
            "Suspended",
            source="§10.2 case 1",
        )
    )
    add(
        Case(
            "ac02-env-merge",
            trainjob(
                "ac02",
                "ac02-runtime",
                trainer={
                    "image": "test:trainjob",
                    "command": ["trainjob"],
                    "args": ["trainjob"],
                    "resourcesPerNode": RES,
                    "env": [
                        {"name": "TRAIN_JOB", "value": "override"},
                        {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
                    ],
                },
            ),
            [
                runtime(
                    "ac02-runtime",
                    standard_jobs(
                        node_env=[
                            {"name": "TRAIN_JOB", "value": "original"},
                            {"name": "RUNTIME", "value": "test:runtime"},
                        ]
                    ),
                    ml={"numNodes": 2},
                )
            ],
            source="§10.2 case 2",
        )
    )
    jobs3 = standard_jobs()
    jobs3[0]["template"]["spec"]["template"]["spec"]["initContainers"] = [
        container(
            "override-init-container",
            env=[{"name": "INIT_ENV", "value": "original_init"}, {"name": "DATASET_PATH", "value": "runtime"}],
        )
    ]
    jobs3[2]["template"]["spec"]["template"]["spec"]["initContainers"] = [
        container("override-init-container", env=[{"name": "INIT_ENV", "value": "original_init"}])
    ]
    jobs3[2]["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TRAIN_JOB", "value": "original"}
    ]
    jobs3[2]["template"]["spec"]["template"]["spec"]["containers"].append(
        container("override-container", env=[{"name": "CONTAINER_ENV", "value": "original_container"}])
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["antarctica-east1", "antarctica-west1"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    common = {
        "affinity": affinity,
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    p1 = patch(
        "test.io/manager-1",
        "dataset-initializer",
        job_labels={"job-k1": "job-v1"},
        pod_meta={"labels": {"k1": "v1"}, "annotations": {"a1": "v1"}},
        pod_spec={
            "initContainers": [
                {
                    "name": "override-init-container",
                    "env": [
                        {"name": "INIT_ENV", "value": "override_init"},
                        {"name": "NEW_VALUE", "value": "from_overrides"},
                    ],
                }
            ],
            "containers": [
                {
                    "name": "dataset-initializer",
                    "volumeMounts": [
                        {"name": "initializer-secret", "mountPath": "/initializer_secret_mount_path"},
                        {"name": "initializer-claim", "mountPath": "/initializer_claim_mount_path"},
                    ],
                }
            ],
            "volumes": [
                {"name": "initializer-secret", "secret": {"secretName": "initializer-secret-name"}},
                {"name": "initializer-claim", "persistentVolumeClaim": {"claimName": "initializer-claim-name"}},
            ],
            **copy.deepcopy(common),
        },
    )
    p2 = patch(
        "test.io/manager-2",
        "node",
        job_labels={"job-k2": "job-v2"},
        pod_meta={"labels": {"k2": "v2"}, "annotations": {"a2": "v2"}},
        pod_spec={
            "serviceAccountName": "override-sa",
            "initContainers": [
                {"name": "override-init-container", "env": [{"name": "INIT_ENV", "value": "override_init"}]}
            ],
            "containers": [
                {"name": "node", "volumeMounts": [{"name": "node-secret", "mountPath": "/node_secret_mount_path"}]},
                {"name": "override-container", "env": [{"name": "CONTAINER_ENV", "value": "override_container"}]},
            ],
            "imagePullSecrets": [{"name": "registry-credential"}],
            "terminationGracePeriodSeconds": 300,
            "volumes": [{"name": "node-secret", "secret": {"secretName": "node-secret-name"}}],
            **copy.deepcopy(common),
        },
    )
    p3 = patch(
        "test.io/manager-3", "node", pod_spec={"nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"}}
    )
    add(
        Case(
            "ac03-runtime-patches",
            trainjob(
                "ac03", "ac03-runtime", suspend=True, trainer={"image": "test:trainjob"}, runtimePatches=[p1, p2, p3]
            ),
            [runtime("ac03-runtime", jobs3, ml={"numNodes": 2})],
            "Suspended",
            source="§10.2 case 3",
        )
    )
    add(
        Case(
            "ac04-initializers",
            trainjob(
                "ac04",
                "ac04-runtime",
                trainer={},
                initializer={
                    "dataset": {
                        "storageUri": "hf://trainjob-dataset",
                        "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:dataset"}],
                        "secretRef": {"name": "trainjob-secret-dataset"},
                    },
                    "model": {
                        "storageUri": "hf://trainjob-model",
                        "env": [{"name": "TRAIN_JOB", "value": "test:trainjob:model"}],
                        "secretRef": {"name": "trainjob-secret-model"},
                    },
                },
            ),
            [runtime("ac04-runtime", standard_jobs(depends=True), ml={"numNodes": 2})],
            source="§10.2 case 4",
        )
    )
    add(
        Case(
            "ac05-torch-explicit",
            trainjob("ac05", "ac05-runtime", trainer={"numNodes": 3, "numProcPerNode": 3}),
            [runtime("ac05-runtime", standard_jobs(depends=True), ml={"numNodes": 4, "torch": {}})],
            source="§10.2 case 5",
        )
    )
    add(
        Case(
            "ac06-torch-auto-cpu",
            trainjob(
                "ac06",
                "ac06-runtime",
                trainer={
                    "image": "test:trainjob",
                    "resourcesPerNode": {"requests": {"cpu": "2500m"}},
                    "env": [
                        {"name": "TRAIN_JOB", "value": "override"},
                        {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
                    ],
                },
            ),
            [
                runtime(
                    "ac06-runtime",
                    standard_jobs(
                        node_env=[
                            {"name": "TRAIN_JOB", "value": "original"},
                            {"name": "RUNTIME", "value": "test:runtime"},
                        ]
                    ),
                    ml={"numNodes": 2, "torch": {}},
                )
            ],
            source="§10.2 case 6",
        )
    )
    add(
        Case(
            "ac07-torchtune-multinode",
            trainjob(
                "ac07",
                "torchtune-llama3.3-70b",
                suspend=True,
                trainer={
                    "image": "test:trainjob",
                    "command": ["tune", "run"],
                    "numNodes": 3,
                    "numProcPerNode": 3,
                    "resourcesPerNode": RES,
                    "args": [
                        "dtype=fp16",
                        "batch_size=32",
                        "epochs=10",
                        "loss=torchtune.modules.loss.CEWithChunkedOutputLoss",
                    ],
                },
            ),
            [
                runtime(
                    "torchtune-llama3.3-70b",
                    standard_jobs(node_extra={"command": tune_cmd}),
                    ml={"numNodes": 4, "torch": {}},
                )
            ],
            "Suspended",
            source="§10.2 case 7",
        )
    )
    add(
        Case(
            "ac08-torchtune-lora",
            trainjob(
                "ac08",
                "torchtune-llama3.2-1b",
                suspend=True,
                trainer={
                    "command": ["tune", "run"],
                    "numNodes": 1,
                    "resourcesPerNode": {"requests": {"cpu": "1", "example.com/gpu": "2"}},
                    "args": [
                        "dataset.data_dir=/workspace/dataset/data",
                        "model.apply_lora_to_mlp=True",
                        "model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]",
                        "dataset=torchtune.datasets.instruct_dataset",
                        "dataset.source=parquet",
                    ],
                },
            ),
            [
                runtime(
                    "torchtune-llama3.2-1b",
                    standard_jobs(node_extra={"command": tune_1b}),
                    ml={"numNodes": 1, "torch": {}},
                )
            ],
            "Suspended",
            source="§10.2 case 8",
        )
    )
    mpi_jobs = standard_jobs()
    mpi_jobs.insert(2, rjob("launcher", None, [container("node", command=["mpirun"], args=["echo.sh"])]))
    add(
        Case(
            "ac09-openmpi",
            trainjob("ac09", "ac09-runtime", trainer={"numNodes": 2, "numProcPerNode": 8}),
            [
                runtime(
                    "ac09-runtime",
                    mpi_jobs,
                    ml={
                        "numNodes": 1,
                        "mpi": {
                            "numProcPerNode": 1,
                            "mpiImplementation": "OpenMPI",
                            "sshAuthMountPath": "/root/.ssh",
                            "runLauncherAsNode": False,
                        },
                    },
                )
            ],
            source="§10.2 case 9",
        )
    )
    add(
        Case(
            "ac10-resource-merge",
            trainjob(
                "ac10", "ac10-runtime", trainer={"numNodes": 1, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}
            ),
            [runtime("ac10-runtime", standard_jobs(), ml={"numNodes": 1})],
            source="§10.2 case 10",
        )
    )
    add(
        Case(
            "ac12-ctr-cosched",
            trainjob(
                "ac12",
                "diff-ctr-cosched",
                kind="ClusterTrainingRuntime",
                suspend=True,
                trainer={"image": "test:trainjob"},
            ),
            [
                runtime(
                    "diff-ctr-cosched",
                    standard_jobs(depends=True),
                    ml={"numNodes": 3},
                    pg={"coscheduling": {"scheduleTimeoutSeconds": 120}},
                    cluster=True,
                )
            ],
            "Suspended",
            source="§10.2 case 12",
        )
    )
    res13 = {"requests": {"cpu": "1", "memory": "4Gi"}}
    jobs13 = standard_jobs()
    for j in jobs13:
        j["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(res13)
    add(
        Case(
            "ac13-plainml-flow",
            trainjob(
                "ac13",
                "ac13-runtime",
                suspend=True,
                trainer={"image": "test:trainjob"},
                initializer={
                    "dataset": {"storageUri": "hf://trainjob-dataset"},
                    "model": {"storageUri": "hf://trainjob-model"},
                },
                runtimePatches=[
                    {
                        "manager": "test.io/manager",
                        "trainingRuntimeSpec": {
                            "template": {
                                "metadata": {
                                    "labels": {"testingKey": "testingVal"},
                                    "annotations": {"testingKey": "testingVal"},
                                }
                            }
                        },
                    }
                ],
            ),
            [runtime("ac13-runtime", jobs13, ml={"numNodes": 3}, pg={"coscheduling": {"scheduleTimeoutSeconds": 100}})],
            "Suspended",
            source="§10.2 case 13",
        )
    )
    add(
        Case(
            "ac15-external-manager",
            trainjob("ac15", "ac15-runtime", managedBy="kueue.x-k8s.io/multikueue"),
            [runtime("ac15-runtime", standard_jobs(), ml={"numNodes": 1, "torch": {}})],
            "Ignored",
            source="§10.2 case 15",
        )
    )
    add(
        Case(
            "ac16-resume",
            trainjob("ac16", "ac16-runtime", suspend=True, trainer={}),
            [runtime("ac16-runtime", standard_jobs(depends=True), ml={"numNodes": 1, "torch": {}})],
            "Suspended",
            patch={"spec": {"suspend": False}},
            then="Complete",
            source="§10.2 case 16 (Complete)",
        )
    )
    add(
        Case(
            "ac16-failed",
            trainjob("ac16f", "ac16f-runtime", trainer={"numNodes": 2}),
            [
                runtime(
                    "ac16f-runtime",
                    [rjob("node", "trainer", [container("node")], annotations={EXIT_CODE: "3", RUN_FOR: "1s"})],
                    ml={"numNodes": 1, "torch": {}},
                )
            ],
            "Failed",
            source="§10.2 case 16 (Failed)",
        )
    )
    add(
        Case(
            "ac17-deadline",
            trainjob("ac17", "ac17-runtime", activeDeadlineSeconds=5, trainer={}),
            [
                runtime(
                    "ac17-runtime",
                    [rjob("node", "trainer", [container("node")], annotations={RUN_FOR: "600s"})],
                    ml={"numNodes": 1, "mpi": {}},
                )
            ],
            "Failed",
            source="§10.2 case 17",
        )
    )
    for fw, ml in (("jax", {"jax": {}}), ("xgboost", {"xgboost": {}})):
        add(
            Case(
                f"ac18-{fw}",
                trainjob(f"ac18-{fw}", f"ac18-{fw}-runtime", trainer={"numNodes": 2}),
                [
                    runtime(
                        f"ac18-{fw}-runtime", [rjob("node", "trainer", [container("node")])], ml={"numNodes": 1, **ml}
                    )
                ],
                source="§10.2 case 18",
            )
        )

    # --- generated: every plugin and status path ----------------------------------------------------------------
    add(
        Case(
            "gen-plainml-bare",
            trainjob("plain-bare", "plain-bare-runtime"),
            [runtime("plain-bare-runtime", [rjob("node", "trainer", [container("node")])], ml={"numNodes": 2})],
        )
    )
    add(
        Case(
            "gen-no-mlpolicy",
            trainjob("no-ml", "no-ml-runtime", trainer={"numNodes": 3, "image": "test:trainjob"}),
            [runtime("no-ml-runtime", [rjob("node", "trainer", [container("node", ports=[{"containerPort": 8080}])])])],
        )
    )
    add(
        Case(
            "gen-torch-envinjection",
            trainjob("envinj", "envinj-runtime", trainer={"numNodes": 2}),
            [
                runtime(
                    "envinj-runtime",
                    [
                        rjob(
                            "node",
                            "trainer",
                            [container("node"), container("sidecar")],
                            pod={"initContainers": [container("warmup")]},
                        )
                    ],
                    ml={
                        "numNodes": 1,
                        "torch": {
                            "envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar", "warmup"]}]}
                        },
                    },
                )
            ],
        )
    )
    add(
        Case(
            "gen-torch-gpu",
            trainjob(
                "torch-gpu",
                "torch-gpu-runtime",
                trainer={
                    "numNodes": 2,
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
                    "env": [{"name": "A", "value": "b"}],
                },
            ),
            [
                runtime(
                    "torch-gpu-runtime",
                    [rjob("node", "trainer", [container("node", ports=[{"containerPort": 1234}])])],
                    ml={"numNodes": 1, "torch": {}},
                    jobset={"network": {"subdomain": "custom-sub"}},
                )
            ],
        )
    )
    add(
        Case(
            "gen-mpi-launcher-as-node",
            trainjob("mpi-lan", "mpi-lan-runtime", trainer={"numNodes": 3}),
            [
                runtime(
                    "mpi-lan-runtime",
                    [
                        rjob("launcher", "trainer", [container("node", command=["mpirun"])]),
                        rjob("node", None, [container("node", command=["sshd"])], annotations={RUN_FOR: "30s"}),
                    ],
                    ml={"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": True}},
                    jobset={
                        "network": {"subdomain": "mpi-sub"},
                        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    },
                )
            ],
        )
    )
    add(
        Case(
            "gen-mpi-gpu-slots",
            trainjob(
                "mpi-gpu",
                "mpi-gpu-runtime",
                suspend=True,
                trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}},
            ),
            [
                runtime(
                    "mpi-gpu-runtime",
                    [rjob("node", "trainer", [container("node")]), rjob("launcher", None, [container("node")])],
                    ml={"numNodes": 1, "mpi": {"numProcPerNode": 1}},
                )
            ],
            "Suspended",
        )
    )
    add(
        Case(
            "gen-xgboost-gpu",
            trainjob(
                "xgb-gpu",
                "xgb-gpu-runtime",
                trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}},
            ),
            [
                runtime(
                    "xgb-gpu-runtime", [rjob("node", "trainer", [container("node")])], ml={"numNodes": 1, "xgboost": {}}
                )
            ],
        )
    )
    add(
        Case(
            "gen-volcano",
            trainjob("volcano", "volcano-runtime", trainer={"numNodes": 2}),
            [
                runtime(
                    "volcano-runtime",
                    standard_jobs(),
                    ml={"numNodes": 1, "torch": {}},
                    # the full object: the harness's PodGroup CRD is generated from volcano.sh/apis
                    pg={"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}},
                )
            ],
        )
    )
    add(
        Case(
            "gen-flux",
            trainjob("flux", "flux-runtime", suspend=True, trainer={"numNodes": 2, "command": ["python", "train.py"]}),
            [
                runtime(
                    "flux-runtime",
                    [rjob("node", "trainer", [container("node")])],
                    ml={"numNodes": 1, "flux": {"numProcPerNode": 2}},
                )
            ],
            "Suspended",
        )
    )
    add(
        Case(
            "gen-flux-gpu-env",
            trainjob(
                "flux-gpu",
                "flux-gpu-runtime",
                suspend=True,
                trainer={
                    "numNodes": 3,
                    "numProcPerNode": 4,
                    "args": ["--epochs", "1"],
                    "env": [
                        {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
                        {"name": "OMPI_MCA_btl", "value": "tcp,self"},
                    ],
                },
            ),
            [
                runtime(
                    "flux-gpu-runtime",
                    [
                        rjob(
                            "node",
                            "trainer",
                            [
                                container(
                                    "node",
                                    command=["lmp", "-in", "in.hns"],
                                    args=["--runtime-arg"],
                                    resources={"limits": {"nvidia.com/gpu": "2"}},
                                    env=[
                                        {"name": "FLUX_NETWORK_DEVICE", "value": "eth1"},
                                        {
                                            "name": "FLUX_VIEW_IMAGE",
                                            "value": "ghcr.io/converged-computing/flux-view-rocky:tag-9",
                                        },
                                    ],
                                )
                            ],
                        )
                    ],
                    ml={"numNodes": 1, "flux": {}},
                )
            ],
            "Suspended",
        )
    )
    add(
        Case(
            "gen-flux-run",
            trainjob("flux-run", "flux-run-runtime", trainer={"numNodes": 2}),
            [
                runtime(
                    "flux-run-runtime", [rjob("node", "trainer", [container("node")])], ml={"numNodes": 1, "flux": {}}
                )
            ],
        )
    )
    add(
        Case(
            "gen-restarts",
            trainjob("restarts", "restarts-runtime"),
            [
                runtime(
                    "restarts-runtime",
                    [rjob("node", "trainer", [container("node")], annotations={EXIT_CODE: "1", RUN_FOR: "1s"})],
                    ml={"numNodes": 1, "torch": {}},
                    jobset={"failurePolicy": {"maxRestarts": 1}},
                )
            ],
            "Failed",
        )
    )
    # the default ClusterTrainingRuntimes (runtimes/*.yaml, the same objects for both controllers)
    add(
        Case(
            "ctr-torch",
            trainjob(
                "ctr-torch",
                "torch-distributed",
                kind="ClusterTrainingRuntime",
                trainer={"numNodes": 2, "command": ["torchrun", "train.py"]},
            ),
        )
    )
    add(Case("ctr-torch-bare", trainjob("ctr-torch-bare", "torch-distributed", kind="ClusterTrainingRuntime")))
    add(
        Case(
            "ctr-deepspeed",
            trainjob(
                "ctr-ds",
                "deepspeed-distributed",
                kind="ClusterTrainingRuntime",
                trainer={"numNodes": 3},
                runtimePatches=[kwok({"node": {RUN_FOR: "30s"}})],
            ),
        )
    )
    add(
        Case(
            "ctr-mlx",
            trainjob(
                "ctr-mlx",
                "mlx-distributed",
                kind="ClusterTrainingRuntime",
                trainer={"numNodes": 2, "numProcPerNode": 2},
                runtimePatches=[kwok({"node": {RUN_FOR: "30s"}})],
            ),
        )
    )
    add(Case("ctr-jax", trainjob("ctr-jax", "jax-distributed", kind="ClusterTrainingRuntime", trainer={"numNodes": 2})))
    add(
        Case(
            "ctr-xgboost",
            trainjob(
                "ctr-xgb",
                "xgboost-distributed",
                kind="ClusterTrainingRuntime",
                trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
            ),
        )
    )
    add(
        Case(
            "ctr-torchtune-qwen",
            trainjob(
                "ctr-qwen",
                "torchtune-qwen2.5-1.5b",
                kind="ClusterTrainingRuntime",
                suspend=True,
                initializer={
                    "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                    "model": {"storageUri": "hf://Qwen/Qwen2.5-1.5B-Instruct"},
                },
                trainer={
                    "command": ["tune", "run"],
                    "args": ["epochs=1"],
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}},
                },
            ),
            settle="Suspended",
        )
    )
    add(
        Case(
            "ctr-torchtune-3b",
            trainjob(
                "ctr-3b",
                "torchtune-llama3.2-3b",
                kind="ClusterTrainingRuntime",
                suspend=True,
                trainer={"command": ["tune", "run"], "numProcPerNode": 2},
            ),
            settle="Suspended",
        )
    )

    # the opt-in data-cache runtime (runtimes/data-cache/), with what the SDK's DataCacheInitializer sends
    add(
        Case(
            "ctr-torch-data-cache",
            trainjob(
                "ctr-cache",
                "torch-distributed-with-cache",
                kind="ClusterTrainingRuntime",
                suspend=True,
                initializer={
                    "dataset": {
                        "storageUri": "cache://sales/orders",
                        "env": [
                            {"name": "CLUSTER_SIZE", "value": "3"},
                            {"name": "METADATA_LOC", "value": "s3://b/orders/m.json"},
                            {"name": "IAM_ROLE", "value": "arn:aws:iam::1:role/cache"},
                        ],
                    }
                },
                trainer={"numNodes": 2, "command": ["torchrun", "train.py"]},
            ),
            [yaml.safe_load(DATA_CACHE_RUNTIME.read_text())],
            "Suspended",
        )
    )

    # --- admission: TrainJobs both webhooks must reject, with the same message (§7.2, §10.2 case 20) -------------
    plain = runtime(
        "adm-plain-runtime", [rjob("node", "trainer", [container("node")])], ml={"numNodes": 1, "torch": {}}
    )
    mpi = runtime(
        "adm-mpi-runtime",
        [rjob("node", "trainer", [container("node")]), rjob("launcher", None, [container("node")])],
        ml={"numNodes": 1, "mpi": {}},
    )
    add(Case("adm-missing-runtime", trainjob("adm-missing", "no-such-runtime"), settle="Rejected"))
    add(
        Case(
            "adm-missing-ctr",
            trainjob("adm-missing-ctr", "no-such-runtime", kind="ClusterTrainingRuntime"),
            settle="Rejected",
        )
    )
    add(
        Case(
            "adm-reserved-env",
            trainjob(
                "adm-env",
                "adm-plain-runtime",
                trainer={"env": [{"name": "PET_NODE_RANK", "value": "1"}, {"name": "PET_MASTER_ADDR", "value": "x"}]},
            ),
            [plain],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-mpi-reserved-env",
            trainjob(
                "adm-mpi-env",
                "adm-mpi-runtime",
                trainer={"env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/tmp/h"}]},
            ),
            [mpi],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-initializer-without-job",
            trainjob(
                "adm-init",
                "adm-plain-runtime",
                initializer={"dataset": {"storageUri": "hf://x/y"}, "model": {"storageUri": "hf://x/z"}},
            ),
            [plain],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-patch-manager",
            trainjob(
                "adm-manager",
                "adm-plain-runtime",
                runtimePatches=[patch("not-a-domain-path", "node", pod_spec={"nodeSelector": {"a": "b"}})],
            ),
            [plain],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-patch-unknown-job",
            trainjob(
                "adm-unknown-job",
                "adm-plain-runtime",
                runtimePatches=[patch("test.io/m", "launcher", pod_spec={"nodeSelector": {"a": "b"}})],
            ),
            [plain],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-patch-unknown-container",
            trainjob(
                "adm-unknown-ctr",
                "adm-plain-runtime",
                runtimePatches=[
                    patch(
                        "test.io/m",
                        "node",
                        pod_spec={"containers": [{"name": "sidecar", "env": [{"name": "A", "value": "b"}]}]},
                    )
                ],
            ),
            [plain],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-patch-node-env",
            trainjob(
                "adm-node-env",
                "adm-plain-runtime",
                runtimePatches=[
                    patch(
                        "test.io/m",
                        "node",
                        pod_spec={"containers": [{"name": "node", "env": [{"name": "A", "value": "b"}]}]},
                    )
                ],
            ),
            [plain],
            "Rejected",
        )
    )
    tune = runtime(
        "torchtune-llama3.2-1b", standard_jobs(node_extra={"command": tune_1b}), ml={"numNodes": 1, "torch": {}}
    )
    add(
        Case(
            "adm-torchtune-multinode",
            trainjob("adm-tune-nodes", "torchtune-llama3.2-1b", trainer={"command": ["tune", "run"], "numNodes": 2}),
            [tune],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-torchtune-immutable-arg",
            trainjob(
                "adm-tune-arg",
                "torchtune-llama3.2-1b",
                trainer={"command": ["tune", "run"], "args": ["epochs=1", "output_dir=/tmp/out"]},
            ),
            [tune],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-torchtune-model",
            trainjob("adm-tune-model", "torchtune-mistral-7b", trainer={"command": ["tune", "run"]}),
            [
                runtime(
                    "torchtune-mistral-7b",
                    standard_jobs(node_extra={"command": tune_1b}),
                    ml={"numNodes": 1, "torch": {}},
                )
            ],
            "Rejected",
        )
    )
    add(
        Case(
            "adm-bad-storage-uri",
            trainjob("adm-uri", "adm-plain-runtime", initializer={"dataset": {"storageUri": "not a uri"}}),
            [plain],
            "Rejected",
        )
    )
    add(Case("adm-bad-name", trainjob("Adm-Upper", "adm-plain-runtime"), [plain], "Rejected"))
    add(
        Case(
            "adm-flux-installer-reserved",
            trainjob("adm-flux-installer", "adm-flux-runtime", trainer={"numNodes": 1}),
            [
                runtime(
                    "adm-flux-runtime",
                    [
                        rjob(
                            "node",
                            "trainer",
                            [container("node")],
                            pod={"initContainers": [container("flux-installer")]},
                        )
                    ],
                    ml={"numNodes": 1, "flux": {}},
                )
            ],
            "Rejected",
        )
    )
    return out
