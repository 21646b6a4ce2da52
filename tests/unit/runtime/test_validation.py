"""Validation: CRD schema + CEL rules (docs/validation.md), update transitions, and the admission webhooks
(docs/upstream-behaviour.md#webhooks).

Every case compares the whole list of `str(error)` (`<path>: <message>`, Kubernetes' format) and the warnings.
The expected CRD-level texts are what kube-apiserver v1.36 answers for our generated CRDs (checked against a
real apiserver): a CEL failure carries the new value when it is a scalar and no value for an object or list,
a rule on the root object reports the path `<nil>`, and a blocking schema error (Required, Unsupported, Too
long, Too many, wrong type) is followed by the note that CEL rules were skipped. Values of objects and lists
print as compact JSON (`Duplicate value: {"manager":"a.io/m"}`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import (
    RuntimeBuilder,
    TrainJobBuilder,
    container,
    pod_patch,
    replicated_job,
    standard_jobs,
)
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed, Read
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.volcano import PRIORITY_CLASSES
from trainjob_operator.runtime.validation import (
    admit_runtime,
    admit_trainjob,
    check_runtime,
    check_trainjob,
)

MIB = 1048576
TJ = TrainJobBuilder.make()
RT = RuntimeBuilder.make()
CTR = RuntimeBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
TJ_CTR = TrainJobBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND)

NAME_RFC1035 = "<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format"
NAME_MAX_63 = "<nil>: Invalid value: metadata.name must be no more than 63 characters"
CEL_SKIPPED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
STORAGE_URI = "storageUri may be empty, or it must be a valid URI (scheme://...)"
MANAGED_BY = "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"
PATCH_POD = "trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
DEPRECATION_POLICY = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"

# k8s.io/apimachinery IsDomainPrefixedPath details.
DNS1123_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
HTTP_PATH = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"

# How the webhook prints the runtimeRef it rejects: Kubernetes prints non-scalar values as compact JSON.
REF = '{"name":"test-runtime","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}'
CTR_REF = '{"name":"test-runtime","apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime"}'


def errors_of(validation: Any) -> list[str]:
    return [str(e) for e in validation.errors]


# ------------------------------------------------------------------------------- TrainJob schema and CEL


@dataclass(frozen=True)
class TrainJobCase:
    raw: dict[str, Any]
    want: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(TrainJobCase(TJ.raw()), id="a minimal TrainJob is valid"),
        pytest.param(TrainJobCase(TJ.set("metadata.name", "a" * 63).raw()), id="a 63 character name is valid"),
        pytest.param(
            TrainJobCase(
                TJ.set("metadata.name", "Test-Job").raw(),
                [f'metadata.name: Invalid value: "Test-Job": {DNS1123_SUBDOMAIN}', NAME_RFC1035],
            ),
            id="an uppercase name violates the RFC 1035 rule",
        ),
        pytest.param(
            TrainJobCase(TJ.set("metadata.name", "1job").raw(), [NAME_RFC1035]),
            id="a name with a leading digit violates the RFC 1035 rule",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("metadata.name", "job-").raw(),
                [f'metadata.name: Invalid value: "job-": {DNS1123_SUBDOMAIN}', NAME_RFC1035],
            ),
            id="a name with a trailing hyphen violates the RFC 1035 rule",
        ),
        pytest.param(
            TrainJobCase(TJ.set("metadata.name", "a" * 64).raw(), [NAME_MAX_63]),
            id="a 64 character name violates the 63 character rule",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("metadata.name", "A" * 64).raw(),
                [f'metadata.name: Invalid value: "{"A" * 64}": {DNS1123_SUBDOMAIN}', NAME_RFC1035, NAME_MAX_63],
            ),
            id="a long uppercase name violates both name rules",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(numNodes=-1).raw(),
                [
                    "spec.trainer.numNodes: Invalid value: -1: spec.trainer.numNodes in body should be greater than or equal to 0",
                ],
            ),
            id="numNodes -1 is below the minimum",
        ),
        pytest.param(TrainJobCase(TJ.trainer(numNodes=0).raw()), id="numNodes 0 is allowed on purpose"),
        pytest.param(
            TrainJobCase(
                TJ.trainer(numProcPerNode=0).raw(),
                [
                    "spec.trainer.numProcPerNode: Invalid value: 0: numProcPerNode must be greater than or equal to 1",
                ],
            ),
            id="numProcPerNode 0 violates its CEL rule",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(numProcPerNode=-5).raw(),
                [
                    "spec.trainer.numProcPerNode: Invalid value: -5: numProcPerNode must be greater than or equal to 1",
                ],
            ),
            id="numProcPerNode -5 violates its CEL rule",
        ),
        pytest.param(TrainJobCase(TJ.trainer(numProcPerNode=1).raw()), id="numProcPerNode 1 is valid"),
        pytest.param(
            TrainJobCase(
                TJ.trainer(numNodes="3").raw(),
                [
                    'spec.trainer.numNodes: Invalid value: "string": spec.trainer.numNodes in body must be of type integer: '
                    '"string"',
                    CEL_SKIPPED,
                ],
            ),
            id="a string numNodes is the wrong type",
        ),
        pytest.param(
            TrainJobCase(
                TJ.initializer(dataset={"storageUri": "not-a-uri"}).raw(),
                [
                    f'spec.initializer.dataset.storageUri: Invalid value: "not-a-uri": {STORAGE_URI}',
                ],
            ),
            id="a dataset storageUri without a scheme violates the URI rule",
        ),
        pytest.param(
            TrainJobCase(
                TJ.initializer(model={"storageUri": "://model"}).raw(),
                [
                    f'spec.initializer.model.storageUri: Invalid value: "://model": {STORAGE_URI}',
                ],
            ),
            id="a model storageUri with an empty scheme violates the URI rule",
        ),
        pytest.param(
            TrainJobCase(TJ.initializer(dataset={"storageUri": ""}, model={"storageUri": "hf://m"}).raw()),
            id="an empty storageUri and an hf URI are valid",
        ),
        pytest.param(
            TrainJobCase(
                TJ.initializer(dataset={"storageUri": "s3://" + "b" * 2044}).raw(),
                [
                    "spec.initializer.dataset.storageUri: Too long: may not be more than 2048 bytes",
                    CEL_SKIPPED,
                ],
            ),
            id="a storageUri longer than 2048 bytes is too long",
        ),
        pytest.param(
            TrainJobCase(TJ.trainer(command=["x" * MIB]).raw()), id="a command item of exactly 1 MiB is valid"
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(command=["python", "x" * (MIB + 1)]).raw(),
                [
                    "spec.trainer.command[1]: Too long: may not be more than 1048576 bytes",
                    CEL_SKIPPED,
                ],
            ),
            id="a command item over 1 MiB is too long",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(args=["x" * (MIB + 1)]).raw(),
                [
                    "spec.trainer.args[0]: Too long: may not be more than 1048576 bytes",
                    CEL_SKIPPED,
                ],
            ),
            id="an args item over 1 MiB is too long",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(command=["x"] * 129).raw(),
                [
                    "spec.trainer.command: Too many: 129: must have at most 128 items",
                    CEL_SKIPPED,
                ],
            ),
            id="a command with 129 items exceeds maxItems",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(env=[{"name": f"E{i}", "value": "v"} for i in range(129)]).raw(),
                [
                    "spec.trainer.env: Too many: 129: must have at most 128 items",
                    CEL_SKIPPED,
                ],
            ),
            id="trainer env with 129 entries exceeds maxItems",
        ),
        pytest.param(
            TrainJobCase(
                TJ.trainer(image="i" * 501).raw(),
                [
                    "spec.trainer.image: Too long: may not be more than 500 bytes",
                    CEL_SKIPPED,
                ],
            ),
            id="an image longer than 500 bytes is too long",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("spec.runtimePatches", [{"manager": f"a.io/m{i}"} for i in range(17)]).raw(),
                [
                    "spec.runtimePatches: Too many: 17: must have at most 16 items",
                    CEL_SKIPPED,
                ],
            ),
            id="17 runtime patches exceed maxItems",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("spec.managedBy", "example.com/controller").raw(),
                [
                    f'spec.managedBy: Invalid value: "example.com/controller": {MANAGED_BY}',
                ],
            ),
            id="an unknown managedBy violates its CEL rule",
        ),
        pytest.param(
            TrainJobCase(TJ.set("spec.managedBy", c.MULTIKUEUE_MANAGED_BY).raw()), id="managedBy multikueue is valid"
        ),
        pytest.param(
            TrainJobCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, terminationGracePeriodSeconds=-1)]).raw(),
                [
                    f"spec.runtimePatches[0].{PATCH_POD}.terminationGracePeriodSeconds: Invalid value: -1: "
                    f"spec.runtimePatches[0].{PATCH_POD}.terminationGracePeriodSeconds in body should be greater than or "
                    "equal to 0",
                ],
            ),
            id="a negative terminationGracePeriodSeconds in a patch is below the minimum",
        ),
        pytest.param(
            TrainJobCase(TJ.patch("a.io/m", [pod_patch(c.NODE, terminationGracePeriodSeconds=0)]).raw()),
            id="terminationGracePeriodSeconds 0 in a patch is valid",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("spec.activeDeadlineSeconds", 0).raw(),
                [
                    "spec.activeDeadlineSeconds: Invalid value: 0: spec.activeDeadlineSeconds in body should be greater than "
                    "or equal to 1",
                ],
            ),
            id="activeDeadlineSeconds 0 is below the minimum",
        ),
        pytest.param(
            TrainJobCase(
                TJ.patch("a.io/m").patch("a.io/m").raw(),
                [
                    'spec.runtimePatches[1]: Duplicate value: {"manager":"a.io/m"}',
                ],
            ),
            id="two patches of one manager are a duplicate map key",
        ),
        pytest.param(
            TrainJobCase(TJ.set("spec.runtimeRef", {}).raw(), ["spec.runtimeRef.name: Required value", CEL_SKIPPED]),
            id="a runtimeRef without a name is missing the required name",
        ),
        pytest.param(
            TrainJobCase(
                TJ.set("spec.runtimeRef.name", "").raw(),
                [
                    'spec.runtimeRef.name: Invalid value: "": spec.runtimeRef.name in body should be at least 1 chars long',
                ],
            ),
            id="an empty runtimeRef name is too short",
        ),
    ],
)
def test_trainjob_schema_and_cel(case: TrainJobCase) -> None:
    _, validation = check_trainjob(case.raw)
    assert errors_of(validation) == case.want


def test_trainjob_defaults_follow_the_crd() -> None:
    raw = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    job, validation = check_trainjob(raw)
    assert validation.errors == ()
    assert job is not None
    assert job.to_wire() == {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "apiGroup": c.GROUP, "kind": c.CLUSTER_TRAINING_RUNTIME_KIND},
            "suspend": False,
            "managedBy": c.DEFAULT_MANAGED_BY,
        },
    }


# ------------------------------------------------------------------------------------------ update transitions


@dataclass(frozen=True)
class UpdateCase:
    old: TrainJobBuilder
    new: TrainJobBuilder
    want: list[str] = field(default_factory=list)


def immutable(path: str, value: str | None = None) -> str:
    """A failed `self == oldSelf`: scalars show the new value, objects and lists no value."""
    shown = f"{value}: " if value else ""
    return f"{path}: Invalid value: {shown}field is immutable"


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(UpdateCase(TJ, TJ.suspend()), id="suspend is mutable"),
        pytest.param(
            UpdateCase(TJ, TJ.set("spec.runtimeRef.name", "other"), [immutable("spec.runtimeRef")]),
            id="changing runtimeRef is rejected",
        ),
        pytest.param(
            UpdateCase(
                TJ.initializer(dataset={"storageUri": "hf://a"}),
                TJ.initializer(dataset={"storageUri": "hf://b"}),
                [immutable("spec.initializer")],
            ),
            id="changing the initializer is rejected",
        ),
        pytest.param(
            UpdateCase(TJ.trainer(image="a"), TJ.trainer(image="b"), [immutable("spec.trainer")]),
            id="changing the trainer image is rejected",
        ),
        pytest.param(
            UpdateCase(TJ.trainer(numNodes=1), TJ.trainer(numNodes=2), [immutable("spec.trainer")]),
            id="changing trainer numNodes is rejected",
        ),
        pytest.param(
            UpdateCase(
                TJ,
                TJ.set("spec.managedBy", c.MULTIKUEUE_MANAGED_BY),
                [immutable("spec.managedBy", '"kueue.x-k8s.io/multikueue"')],
            ),
            id="changing managedBy is rejected",
        ),
        pytest.param(
            UpdateCase(
                TJ.set("spec.activeDeadlineSeconds", 10),
                TJ.set("spec.activeDeadlineSeconds", 20),
                [immutable("spec.activeDeadlineSeconds", "20")],
            ),
            id="changing activeDeadlineSeconds is rejected",
        ),
        pytest.param(
            UpdateCase(TJ, TJ.trainer(image="a")),
            id="adding a trainer is allowed: CEL transition rules skip a value absent in the old object",
        ),
        pytest.param(
            UpdateCase(TJ.initializer(model={"storageUri": "hf://m"}), TJ),
            id="removing the initializer is allowed: rules of an absent field are not evaluated",
        ),
        pytest.param(
            UpdateCase(TJ.trainer(image="a"), TJ.trainer(image="a").suspend()),
            id="an unchanged trainer passes the transition rule",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, nodeSelector={"a": "1"})]),
                TJ.patch("a.io/m", [pod_patch(c.NODE, nodeSelector={"a": "2"})]),
            ),
            id="a patch nodeSelector is mutable at the CRD level",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, serviceAccountName="a")]),
                TJ.patch("a.io/m", [pod_patch(c.NODE, serviceAccountName="b")]),
                [immutable(f"spec.runtimePatches[0].{PATCH_POD}.serviceAccountName", '"b"')],
            ),
            id="a patch serviceAccountName is immutable",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, terminationGracePeriodSeconds=30)]),
                TJ.patch("a.io/m", [pod_patch(c.NODE, terminationGracePeriodSeconds=60)]),
                [immutable(f"spec.runtimePatches[0].{PATCH_POD}.terminationGracePeriodSeconds", "60")],
            ),
            id="a patch terminationGracePeriodSeconds is immutable",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, nodeSelector={"a": "1"})]),
                TJ.patch("a.io/m", [pod_patch(c.NODE, nodeSelector={"a": "1"}, serviceAccountName="b")]),
            ),
            id="adding serviceAccountName to an existing patch entry is allowed at the CRD level",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, containers=[{"name": c.NODE}])]),
                TJ.patch(
                    "a.io/m",
                    [
                        pod_patch(
                            c.NODE, containers=[{"name": c.NODE, "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]
                        )
                    ],
                ),
                [immutable(f"spec.runtimePatches[0].{PATCH_POD}.containers")],
            ),
            id="patch containers are immutable",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/m", [pod_patch(c.NODE, initContainers=[{"name": "setup"}])]),
                TJ.patch("a.io/m", [pod_patch(c.NODE, initContainers=[{"name": "other"}])]),
                [immutable(f"spec.runtimePatches[0].{PATCH_POD}.initContainers")],
            ),
            id="patch initContainers are immutable",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch(
                    "a.io/m",
                    [
                        pod_patch(c.NODE, serviceAccountName="a"),
                        pod_patch(c.DATASET_INITIALIZER, nodeSelector={"a": "1"}),
                    ],
                ),
                TJ.patch(
                    "a.io/m",
                    [
                        pod_patch(c.DATASET_INITIALIZER, nodeSelector={"a": "1"}),
                        pod_patch(c.NODE, serviceAccountName="b"),
                    ],
                ),
                [
                    immutable(
                        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[1]"
                        ".template.spec.template.spec.serviceAccountName",
                        '"b"',
                    )
                ],
            ),
            id="patch replicated jobs are correlated by name, not by index",
        ),
        pytest.param(
            UpdateCase(
                TJ.patch("a.io/x", [pod_patch(c.NODE, serviceAccountName="x")]).patch(
                    "a.io/m", [pod_patch(c.NODE, serviceAccountName="a")]
                ),
                TJ.patch("a.io/m", [pod_patch(c.NODE, serviceAccountName="b")]),
                [immutable(f"spec.runtimePatches[0].{PATCH_POD}.serviceAccountName", '"b"')],
            ),
            id="patch entries are correlated by manager",
        ),
    ],
)
def test_update_transitions(case: UpdateCase) -> None:
    _, validation = check_trainjob(case.new.raw(), case.old.raw())
    assert errors_of(validation) == case.want


# ------------------------------------------------------------------------------------ runtime schema and CEL


@dataclass(frozen=True)
class RuntimeCase:
    runtime: RuntimeBuilder
    want: list[str] = field(default_factory=list)


ONE_POLICY = "spec.mlPolicy: Invalid value: Only one of the policy can be configured"


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(RuntimeCase(RT), id="a runtime without mlPolicy is valid"),
        pytest.param(RuntimeCase(RT.ml_policy(num_nodes=2, torch={})), id="a torch runtime is valid"),
        pytest.param(RuntimeCase(RT.ml_policy(torch={}, mpi={}), [ONE_POLICY]), id="torch and mpi violate the one-of"),
        pytest.param(
            RuntimeCase(RT.ml_policy(jax={}, xgboost={}), [ONE_POLICY]), id="jax and xgboost violate the one-of"
        ),
        pytest.param(
            RuntimeCase(CTR.ml_policy(torch={}, flux={}), [ONE_POLICY]),
            id="torch and flux in a ClusterTrainingRuntime violate the one-of",
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(mpi={"mpiImplementation": "Intel"}),
                [
                    'spec.mlPolicy.mpi.mpiImplementation: Unsupported value: "Intel": supported values: "OpenMPI", ""',
                    CEL_SKIPPED,
                ],
            ),
            id="mpiImplementation Intel is not in the enum",
        ),
        pytest.param(
            RuntimeCase(RT.ml_policy(mpi={"mpiImplementation": ""})), id="an empty mpiImplementation is in the enum"
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(mpi={"numProcPerNode": 0}),
                [
                    "spec.mlPolicy.mpi.numProcPerNode: Invalid value: 0: NumProcPerNode in mpiPolicy must be >= 1",
                ],
            ),
            id="mpi numProcPerNode 0 violates its CEL rule",
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(flux={"numProcPerNode": -1}),
                [
                    "spec.mlPolicy.flux.numProcPerNode: Invalid value: -1: NumProcPerNode in fluxPolicy must be >= 1",
                ],
            ),
            id="flux numProcPerNode -1 violates its CEL rule",
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(
                    torch={"envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar", "node"]}]}}
                ),
                [
                    "spec.mlPolicy.torch.envInjection.targets[0].containerNames: Invalid value: containerNames must "
                    "not include the main node container because PET_* envs are always injected into it",
                ],
            ),
            id="envInjection containerNames containing node violate the CEL rule",
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(torch={"envInjection": {"targets": [{"jobName": "node", "containerNames": []}]}}),
                [
                    "spec.mlPolicy.torch.envInjection.targets[0].containerNames: Invalid value: 0: "
                    "spec.mlPolicy.torch.envInjection.targets[0].containerNames in body should have at least 1 items",
                ],
            ),
            id="empty envInjection containerNames are below minItems",
        ),
        pytest.param(
            RuntimeCase(
                RT.ml_policy(
                    torch={
                        "envInjection": {
                            "targets": [{"jobName": "node", "containerNames": [f"c{i}" for i in range(9)]}]
                        }
                    }
                ),
                [
                    "spec.mlPolicy.torch.envInjection.targets[0].containerNames: Too many: 9: must have at most 8 items",
                    CEL_SKIPPED,
                ],
            ),
            id="nine envInjection containerNames exceed maxItems",
        ),
        pytest.param(
            RuntimeCase(
                RT.volcano(networkTopology={"mode": "strict"}),
                [
                    'spec.podGroupPolicy.volcano.networkTopology.mode: Unsupported value: "strict": supported values: "hard", '
                    '"soft"',
                    CEL_SKIPPED,
                ],
            ),
            id="volcano networkTopology mode strict is not in the enum",
        ),
    ],
)
def test_runtime_schema_and_cel(case: RuntimeCase) -> None:
    _, validation = check_runtime(case.runtime.raw())
    assert errors_of(validation) == case.want


@dataclass(frozen=True)
class DefaultsCase:
    runtime: RuntimeBuilder
    path: tuple[str, ...]
    want: Any


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            DefaultsCase(
                RT.ml_policy(mpi={}),
                ("mlPolicy", "mpi"),
                {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            ),
            id="mpi defaults to OpenMPI, /root/.ssh, false and 1 slot",
        ),
        pytest.param(
            DefaultsCase(
                CTR.ml_policy(mpi={}),
                ("mlPolicy", "mpi"),
                {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            ),
            id="ClusterTrainingRuntime mpi has the same defaults",
        ),
        pytest.param(
            DefaultsCase(RT.ml_policy(flux={}), ("mlPolicy", "flux"), {"numProcPerNode": 1}),
            id="flux numProcPerNode defaults to 1",
        ),
        pytest.param(
            DefaultsCase(RT.coscheduling(), ("podGroupPolicy",), {"coscheduling": {"scheduleTimeoutSeconds": 60}}),
            id="coscheduling scheduleTimeoutSeconds defaults to 60",
        ),
        pytest.param(
            DefaultsCase(
                RT.volcano(networkTopology={}),
                ("podGroupPolicy",),
                {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}},
            ),
            id="volcano networkTopology defaults to hard and tier 1",
        ),
    ],
)
def test_runtime_defaults(case: DefaultsCase) -> None:
    runtime, validation = check_runtime(case.runtime.raw())
    assert validation.errors == ()
    assert runtime is not None
    node: Any = runtime.spec.to_wire()
    for key in case.path:
        node = node[key]
    assert node == case.want


def test_runtime_defaults_replicated_job_replicas_and_group_name() -> None:
    runtime, _ = check_runtime(RT.raw())
    assert runtime is not None
    assert [
        (rj["name"], rj["replicas"], rj["groupName"]) for rj in runtime.spec.template.spec.to_wire()["replicatedJobs"]
    ] == [(c.DATASET_INITIALIZER, 1, "default"), (c.MODEL_INITIALIZER, 1, "default"), (c.NODE, 1, "default")]


# ------------------------------------------------------------------------------------------ TrainJob admission


FRAMEWORK = Framework.from_registry()


def priority_classes(*names: str) -> dict[Read, tuple[dict[str, Any], ...] | None]:
    """What the shell hands back for the Volcano plugin's declared read: these PriorityClasses exist."""
    return {PRIORITY_CLASSES: tuple({"metadata": {"name": name}} for name in names)}


def launcher_job(**fields: Any) -> dict[str, Any]:
    """upstream's LauncherReplica(): a `launcher` job without ancestor label whose container is named node."""
    return replicated_job(c.LAUNCHER, None, [container(c.NODE, command=["mpirun"], args=["echo.sh"])], **fields)


def mpi_jobs() -> list[dict[str, Any]]:
    jobs = standard_jobs()
    return [*jobs[:2], launcher_job(), jobs[2]]


def torchtune_runtime(name: str) -> RuntimeBuilder:
    return RuntimeBuilder.make(name=name).ml_policy(num_nodes=1, torch={})


def torchtune_job(runtime: str, **trainer: Any) -> TrainJobBuilder:
    return TrainJobBuilder.make(runtime=runtime).trainer(command=["tune", "run"], **trainer)


@dataclass(frozen=True)
class AdmissionCase:
    job: TrainJobBuilder
    runtime: RuntimeBuilder | None
    want: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    old: TrainJobBuilder | None = None
    observed: Observed = field(default_factory=Observed)


def env(*names: str) -> list[dict[str, str]]:
    return [{"name": n, "value": "x"} for n in names]


ACTIVE_JOBSET = {
    "spec": {"suspend": False},
    "status": {
        "replicatedJobsStatus": [
            {"name": c.DATASET_INITIALIZER, "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0},
            {"name": c.MODEL_INITIALIZER, "active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0},
            {"name": c.NODE, "active": 2, "ready": 2, "succeeded": 0, "failed": 0, "suspended": 0},
        ]
    },
}
IDLE_JOBSET = {
    "spec": {"suspend": True},
    "status": {
        "replicatedJobsStatus": [
            {"name": c.NODE, "active": 0, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 1},
        ]
    },
}
NODE_SELECTOR_1 = [pod_patch(c.NODE, nodeSelector={"pool": "a"})]
NODE_SELECTOR_2 = [pod_patch(c.NODE, nodeSelector={"pool": "b"})]
NOT_SUSPENDED_MSG = (
    "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is "
    "suspended before or after the update"
)
NO_INIT_VOLUME = standard_jobs()
NO_INIT_VOLUME[0]["template"]["spec"]["template"]["spec"]["containers"][0].pop("volumeMounts")
NO_INIT_VOLUME[1]["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
    {"name": "cache", "mountPath": "/workspace/model"}
]
WRONG_INIT_CONTAINERS = standard_jobs()
WRONG_INIT_CONTAINERS[0]["template"]["spec"]["template"]["spec"]["containers"] = [container("fetch")]
WRONG_INIT_CONTAINERS[1]["template"]["spec"]["template"]["spec"]["containers"] = [container("fetch")]
INIT_CONTAINER_NODE = standard_jobs()
INIT_CONTAINER_NODE[2]["template"]["spec"]["template"]["spec"]["initContainers"] = [container("setup")]
BOTH_INITIALIZERS = {"dataset": {"storageUri": "hf://d"}, "model": {"storageUri": "hf://m"}}
QLORA = ["model.quantize_base=True"]
LORA = ["model.lora_attn_modules=[q_proj,v_proj]"]
GPU2 = {"requests": {"nvidia.com/gpu": "2"}}
UNKNOWN_JOB = TJ.patch("a.io/m", [pod_patch("worker", nodeSelector={"a": "b"})])
UNKNOWN_CONTAINER = TJ.patch("a.io/m", [pod_patch(c.NODE, containers=[{"name": "sidecar"}])])
UNKNOWN_INIT_CONTAINER = TJ.patch("a.io/m", [pod_patch(c.NODE, initContainers=[{"name": "setup"}])])
NODE_ENV = TJ.patch(
    "a.io/m",
    [
        pod_patch(
            c.NODE,
            containers=[{"name": c.NODE, "env": env("A"), "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        )
    ],
)
DATASET_ENV = TJ.patch(
    "a.io/m", [pod_patch(c.DATASET_INITIALIZER, containers=[{"name": c.DATASET_INITIALIZER, "env": env("A")}])]
)
INIT_ONLY_DATASET = standard_jobs()
INIT_ONLY_DATASET[0]["template"]["spec"]["template"]["spec"]["initContainers"] = [
    container(c.DATASET_INITIALIZER, volumeMounts=[{"name": "initializer", "mountPath": "/workspace/dataset"}])
]
INIT_ONLY_DATASET[0]["template"]["spec"]["template"]["spec"]["containers"] = [container("fetch")]


def patches_json(job: TrainJobBuilder) -> str:
    """Upstream reports the whole `spec.runtimePatches` (JSON, as Kubernetes prints non-scalar values)."""
    return json.dumps(job.raw()["spec"]["runtimePatches"], separators=(",", ":"))


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(AdmissionCase(TJ, RT), id="a TrainJob referencing an existing TrainingRuntime is admitted"),
        pytest.param(
            AdmissionCase(
                TJ,
                None,
                [
                    f'spec.runtimeRef: Invalid value: {REF}: TrainingRuntime.trainer.kubeflow.org "test-runtime" not found: '
                    "specified trainingRuntime must be created before the TrainJob is created",
                ],
            ),
            id="a missing TrainingRuntime is reported on spec.runtimeRef",
        ),
        pytest.param(
            AdmissionCase(
                TJ_CTR,
                None,
                [
                    f'spec.RuntimeRef: Invalid value: {CTR_REF}: ClusterTrainingRuntime.trainer.kubeflow.org "test-runtime" '
                    "not found: specified clusterTrainingRuntime must be created before the TrainJob is created",
                ],
            ),
            id="a missing ClusterTrainingRuntime is reported on spec.RuntimeRef with a capital R",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                CTR,
                [
                    f'spec.runtimeRef: Invalid value: {REF}: TrainingRuntime.trainer.kubeflow.org "test-runtime" not found: '
                    "specified trainingRuntime must be created before the TrainJob is created",
                ],
            ),
            id="a ClusterTrainingRuntime does not satisfy a TrainingRuntime reference of the same name",
        ),
        pytest.param(
            AdmissionCase(
                TJ.set("spec.runtimeRef.kind", "Runtime"),
                RT,
                [
                    "unsupported runtime: Runtime.trainer.kubeflow.org",
                ],
            ),
            id="an unsupported runtime kind is rejected with a plain error without field path",
        ),
        pytest.param(
            AdmissionCase(
                TJ.set("spec.runtimeRef.apiGroup", "example.com"),
                RT,
                [
                    "unsupported runtime: TrainingRuntime.example.com",
                ],
            ),
            id="an unsupported runtime group is rejected with a plain error without field path",
        ),
        pytest.param(
            AdmissionCase(
                TJ_CTR,
                CTR.set("metadata.labels", {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED}),
                [],
                [
                    'Referenced ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future release of '
                    f"Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_POLICY}",
                ],
            ),
            id="a deprecated ClusterTrainingRuntime is admitted with a warning",
        ),
        pytest.param(
            AdmissionCase(TJ, RT.set("metadata.labels", {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED})),
            id="a deprecated label on a TrainingRuntime gives no warning",
        ),
        # --- JobSet: initializers
        pytest.param(
            AdmissionCase(TJ.initializer(**BOTH_INITIALIZERS), RT),
            id="initializers against the standard runtime are admitted",
        ),
        pytest.param(
            AdmissionCase(
                TJ.initializer(**BOTH_INITIALIZERS),
                RT.jobs(standard_jobs()[2:]),
                [
                    f"spec.runtimeRef: Invalid value: {REF}: must have dataset-initializer job when trainJob is configured "
                    "with input datasetConfig",
                    f"spec.runtimeRef: Invalid value: {REF}: must have model-initializer job when trainJob is configured with "
                    "input modelConfig",
                ],
            ),
            id="initializers without initializer jobs are rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.initializer(**BOTH_INITIALIZERS),
                RT.jobs(WRONG_INIT_CONTAINERS),
                [
                    f"spec.runtimeRef: Invalid value: {REF}: must have container with name - dataset-initializer in the "
                    "dataset-initializer job",
                    f"spec.runtimeRef: Invalid value: {REF}: must have container with name - model-initializer in the "
                    "model-initializer job",
                ],
            ),
            id="initializer jobs without the initializer containers are rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.initializer(**BOTH_INITIALIZERS),
                RT.jobs(NO_INIT_VOLUME),
                [
                    f"spec.runtimeRef: Invalid value: {REF}: must have volumeMount with name - initializer in container "
                    "dataset-initializer of the dataset-initializer job",
                    f"spec.runtimeRef: Invalid value: {REF}: must have volumeMount with name - initializer in container "
                    "model-initializer of the model-initializer job",
                ],
            ),
            id="initializer containers without the initializer volumeMount are rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.initializer(dataset={"storageUri": "hf://d"}),
                RT.jobs(INIT_ONLY_DATASET),
                [
                    f"spec.runtimeRef: Invalid value: {REF}: must have volumeMount with name - initializer in container "
                    "dataset-initializer of the dataset-initializer job",
                ],
            ),
            id="an init container named dataset-initializer satisfies the container check but not the mount check",
        ),
        pytest.param(
            AdmissionCase(TJ.initializer(model={"storageUri": "hf://m"}), RT.jobs(standard_jobs()[1:])),
            id="a model initializer alone only needs the model-initializer job",
        ),
        # --- JobSet: runtime patches
        pytest.param(
            AdmissionCase(TJ.patch("kueue.x-k8s.io/manager", NODE_SELECTOR_1), RT),
            id="a patch with a domain-prefixed manager is admitted",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("manager"),
                RT,
                [
                    'spec.runtimePatches.manager: Invalid value: "manager": must be a domain-prefixed path (such as '
                    '"acme.io/foo")',
                ],
            ),
            id="a manager without a domain is rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("Example.com/m"),
                RT,
                [
                    f'spec.runtimePatches.manager: Invalid value: "Example.com": {DNS1123_SUBDOMAIN}',
                ],
            ),
            id="a manager with an uppercase domain is rejected as an RFC 1123 subdomain",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("example.com/my manager"),
                RT,
                [
                    f'spec.runtimePatches.manager: Invalid value: "my manager": {HTTP_PATH}',
                ],
            ),
            id="a manager with a space in the path is rejected as an invalid path",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("under_score.io/a b"),
                RT,
                [
                    f'spec.runtimePatches.manager: Invalid value: "under_score.io": {DNS1123_SUBDOMAIN}',
                    f'spec.runtimePatches.manager: Invalid value: "a b": {HTTP_PATH}',
                ],
            ),
            id="a manager with a bad domain and a bad path gets both errors",
        ),
        pytest.param(
            AdmissionCase(TJ.patch("kueue.x-k8s.io/multikueue/sub_path~1"), RT),
            id="a manager path may hold slashes and RFC 3986 characters",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("example.com/"),
                RT,
                [
                    'spec.runtimePatches.manager: Invalid value: "example.com/": must be a domain-prefixed path (such as '
                    '"acme.io/foo")',
                ],
            ),
            id="a manager with an empty path is rejected",
        ),
        pytest.param(
            AdmissionCase(
                UNKNOWN_JOB,
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(UNKNOWN_JOB)}: must not have replicated job that "
                    "doesn't exist in the runtime job template",
                ],
            ),
            id="a patch for an unknown replicated job is rejected",
        ),
        pytest.param(
            AdmissionCase(
                UNKNOWN_CONTAINER,
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(UNKNOWN_CONTAINER)}: must not have container that "
                    "doesn't exist in the runtime job node",
                ],
            ),
            id="a patch for an unknown container is rejected",
        ),
        pytest.param(
            AdmissionCase(
                UNKNOWN_INIT_CONTAINER,
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(UNKNOWN_INIT_CONTAINER)}: must not have initContainer "
                    "that doesn't exist in the runtime job node",
                ],
            ),
            id="a patch for an unknown init container is rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch(
                    "a.io/m", [pod_patch(c.NODE, initContainers=[{"name": "setup"}], containers=[{"name": "setup"}])]
                ),
                RT.jobs(INIT_CONTAINER_NODE),
            ),
            id="init and regular container names of the job are both accepted",
        ),
        pytest.param(
            AdmissionCase(
                NODE_ENV,
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(NODE_ENV)}: must not have envs for the "
                    "dataset-initializer, model-initializer, node containers",
                ],
            ),
            id="env for the node container in a patch is rejected",
        ),
        pytest.param(
            AdmissionCase(
                DATASET_ENV,
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(DATASET_ENV)}: must not have envs for the "
                    "dataset-initializer, model-initializer, node containers",
                ],
            ),
            id="env for the dataset-initializer container in a patch is rejected",
        ),
        pytest.param(
            AdmissionCase(
                UNKNOWN_JOB.patch("a.io/n", NODE_SELECTOR_1),
                RT,
                [
                    f"spec.runtimePatches: Invalid value: {patches_json(UNKNOWN_JOB.patch('a.io/n', NODE_SELECTOR_1))}: must not "
                    "have replicated job that doesn't exist in the runtime job template",
                ],
            ),
            id="the error value is the whole runtimePatches list",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch(
                    "a.io/m",
                    [
                        pod_patch(
                            c.NODE,
                            containers=[{"name": c.NODE, "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                        )
                    ],
                ),
                RT,
            ),
            id="volumeMounts for the node container in a patch are admitted",
        ),
        # --- JobSet: runtime patches on update
        pytest.param(
            AdmissionCase(
                TJ.patch("a.io/m", NODE_SELECTOR_2), RT, [NOT_SUSPENDED_MSG], old=TJ.patch("a.io/m", NODE_SELECTOR_1)
            ),
            id="changing runtimePatches of a running TrainJob is forbidden",
        ),
        pytest.param(
            AdmissionCase(TJ.patch("a.io/m", NODE_SELECTOR_1), RT, [NOT_SUSPENDED_MSG], old=TJ),
            id="adding a runtime patch to a running TrainJob is forbidden",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("a.io/m", NODE_SELECTOR_1, time="2026-01-01T00:00:01Z"),
                RT,
                old=TJ.patch("a.io/m", NODE_SELECTOR_1, time="2026-01-01T00:00:00Z"),
            ),
            id="a changed patch time alone is not a change of runtimePatches",
        ),
        pytest.param(
            AdmissionCase(
                TJ.suspend().patch("a.io/m", NODE_SELECTOR_2), RT, old=TJ.suspend().patch("a.io/m", NODE_SELECTOR_1)
            ),
            id="changing runtimePatches while suspended is allowed",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("a.io/m", NODE_SELECTOR_2),
                RT,
                old=TJ.suspend().patch("a.io/m", NODE_SELECTOR_1),
                observed=Observed(jobset=IDLE_JOBSET),
            ),
            id="changing runtimePatches while unsuspending is allowed when no replicated job is active",
        ),
        pytest.param(
            AdmissionCase(TJ.suspend().patch("a.io/m", NODE_SELECTOR_2), RT, old=TJ.patch("a.io/m", NODE_SELECTOR_1)),
            id="changing runtimePatches while suspending is allowed without a JobSet",
        ),
        pytest.param(
            AdmissionCase(
                TJ.suspend().patch("a.io/m", NODE_SELECTOR_2),
                RT,
                [
                    "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
                    "model-initializer is still active",
                    "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node "
                    "is still active",
                ],
                old=TJ.patch("a.io/m", NODE_SELECTOR_1),
                observed=Observed(jobset=ACTIVE_JOBSET),
            ),
            id="changing runtimePatches while a replicated job is still active is forbidden per job",
        ),
        pytest.param(
            AdmissionCase(
                UNKNOWN_JOB,
                RT,
                [
                    NOT_SUSPENDED_MSG,
                    f"spec.runtimePatches: Invalid value: {patches_json(UNKNOWN_JOB)}: must not have replicated job that "
                    "doesn't exist in the runtime job template",
                ],
                old=TJ,
            ),
            id="the suspension check is reported before the checks of each patch",
        ),
        # --- Torch
        pytest.param(
            AdmissionCase(
                TJ.trainer(env=env("PET_NODE_RANK")),
                RT.ml_policy(torch={}),
                [
                    'spec.trainer.env: Invalid value: [{"name":"PET_NODE_RANK","value":"x"}]: must not have reserved envs, '
                    "invalid envs configured: [PET_NODE_RANK]",
                ],
            ),
            id="a reserved PET_NODE_RANK env is rejected for torch",
        ),
        pytest.param(
            AdmissionCase(
                TJ.trainer(env=env("PET_NNODES", "OK", "PET_MASTER_ADDR")),
                RT.ml_policy(torch={}),
                [
                    'spec.trainer.env: Invalid value: [{"name":"PET_NNODES","value":"x"},{"name":"OK","value":"x"},'
                    '{"name":"PET_MASTER_ADDR","value":"x"}]: must not have reserved envs, invalid envs configured: '
                    "[PET_MASTER_ADDR PET_NNODES]",
                ],
            ),
            id="reserved torch envs are listed sorted and space separated",
        ),
        pytest.param(
            AdmissionCase(TJ.trainer(env=env("PET_NNODES")), RT), id="PET envs are not reserved without a torch policy"
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.ml_policy(
                    torch={
                        "envInjection": {
                            "targets": [
                                {"jobName": c.NODE, "containerNames": ["sidecar", "setup"]},
                                {"jobName": "worker", "containerNames": ["w"]},
                            ]
                        }
                    }
                ).jobs(INIT_CONTAINER_NODE),
                [
                    'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["sidecar","setup"]}: envInjection '
                    'target podSet "node" container "sidecar" not found in runtime template',
                    'spec.runtimeRef: Invalid value: {"jobName":"worker","containerNames":["w"]}: envInjection target podSet '
                    '"worker" container "w" not found in runtime template',
                ],
            ),
            id="envInjection targets missing from the runtime are rejected with the target as value",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.ml_policy(
                    torch={"envInjection": {"targets": [{"jobName": c.NODE, "containerNames": ["setup"]}]}}
                ).jobs(INIT_CONTAINER_NODE),
            ),
            id="an envInjection target naming an init container is admitted",
        ),
        # --- Torch: torchtune
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.2-1b", args=LORA), torchtune_runtime("torchtune-llama3.2-1b")
            ),
            id="torchtune LoRA on llama3.2 1B is admitted",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.1-8b"),
                torchtune_runtime("torchtune-llama3.1-8b"),
                [
                    'spec.runtimeRef.name: Invalid value: "torchtune-llama3.1-8b": must have a supported pretrained model, '
                    "invalid model configured: llama3_1/8B",
                ],
            ),
            id="torchtune with an unsupported model is rejected",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.2-3b", numNodes=2),
                torchtune_runtime("torchtune-llama3.2-3b"),
                [
                    "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/3B model",
                ],
            ),
            id="torchtune llama3.2 3B on two nodes is rejected",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.3-70b", numNodes=2), torchtune_runtime("torchtune-llama3.3-70b")
            ),
            id="torchtune llama3.3 70B on two nodes is admitted",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-qwen2.5-1.5b", args=QLORA),
                torchtune_runtime("torchtune-qwen2.5-1.5b"),
                [
                    'spec.runtimeRef.name: Invalid value: "torchtune-qwen2.5-1.5b": QLoRA is not supported for qwen2_5/1.5B '
                    "model",
                ],
            ),
            id="torchtune QLoRA on qwen is rejected",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-qwen2.5-1.5b", args=["model.quantize_base= TRUE "]),
                torchtune_runtime("torchtune-qwen2.5-1.5b"),
                [
                    'spec.runtimeRef.name: Invalid value: "torchtune-qwen2.5-1.5b": QLoRA is not supported for qwen2_5/1.5B '
                    "model",
                ],
            ),
            id="QLoRA detection trims the value and ignores its case",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-qwen2.5-1.5b", args=QLORA, numNodes=2),
                torchtune_runtime("torchtune-qwen2.5-1.5b"),
                [
                    "spec.trainer.numNodes: Invalid value: 2: must be 1 for qwen2_5/1.5B model",
                    "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in "
                    "TorchTune",
                ],
            ),
            id="multi-node QLoRA on qwen selects no QLoRA config so only the node count is reported",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-qwen2.5-1.5b", args=[*QLORA, "model.use_dora=True"]),
                torchtune_runtime("torchtune-qwen2.5-1.5b"),
            ),
            id="torchtune quantize_base with DoRA is not QLoRA",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.2-1b", args=QLORA, numProcPerNode=2, resourcesPerNode=GPU2),
                torchtune_runtime("torchtune-llama3.2-1b"),
                [
                    "spec.trainer.numProcPerNode: Invalid value: 2: must be auto or 1 for llama3_2/1B model when using QLoRA",
                    'spec.trainer.resourcesPerNode: Invalid value: {"requests":{"nvidia.com/gpu":"2"}}: must have gpu '
                    "resource with value 1 for llama3_2/1B model when using QLoRA",
                ],
            ),
            id="distributed torchtune QLoRA on llama3.2 1B is rejected",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.2-3b", args=QLORA, resourcesPerNode=GPU2),
                torchtune_runtime("torchtune-llama3.2-3b"),
                [
                    'spec.trainer.numProcPerNode: Invalid value: "auto": must be auto or 1 for llama3_2/3B model when using '
                    "QLoRA",
                    'spec.trainer.resourcesPerNode: Invalid value: {"requests":{"nvidia.com/gpu":"2"}}: must have gpu '
                    "resource with value 1 for llama3_2/3B model when using QLoRA",
                ],
            ),
            id="distributed torchtune QLoRA with numProcPerNode auto reports both QLoRA errors",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job(
                    "torchtune-llama3.2-1b",
                    args=QLORA,
                    numProcPerNode=1,
                    resourcesPerNode={"limits": {"nvidia.com/gpu": 1}},
                ),
                torchtune_runtime("torchtune-llama3.2-1b"),
            ),
            id="single device torchtune QLoRA on llama3.2 1B is admitted",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job("torchtune-llama3.3-70b", args=LORA, numNodes=2),
                torchtune_runtime("torchtune-llama3.3-70b"),
                [
                    "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in "
                    "TorchTune",
                ],
            ),
            id="multi-node torchtune LoRA is rejected",
        ),
        pytest.param(
            AdmissionCase(
                torchtune_job(
                    "torchtune-llama3.2-1b",
                    args=[
                        "epochs=1",
                        "output_dir=/tmp/out",
                        "tokenizer.path=/t",
                        "checkpointer.checkpoint_dir=/c",
                        "tokenizer.merges_file=/m",
                        "dataset.source=parquet",
                    ],
                ),
                torchtune_runtime("torchtune-llama3.2-1b"),
                [
                    'spec.trainer.args[1]: Invalid value: "output_dir=/tmp/out": must not set immutable config "output_dir" '
                    "in trainer args; it is managed by the runtime",
                    'spec.trainer.args[2]: Invalid value: "tokenizer.path=/t": must not set immutable config "tokenizer.path" '
                    "in trainer args; it is managed by the runtime",
                    'spec.trainer.args[3]: Invalid value: "checkpointer.checkpoint_dir=/c": must not set immutable config '
                    '"checkpointer.checkpoint_dir" in trainer args; it is managed by the runtime',
                    'spec.trainer.args[4]: Invalid value: "tokenizer.merges_file=/m": must not set immutable config '
                    '"tokenizer.merges_file" in trainer args; it is managed by the runtime',
                ],
            ),
            id="torchtune args setting runtime-managed configs are rejected per index",
        ),
        pytest.param(
            AdmissionCase(
                TrainJobBuilder.make(runtime="torchtune-llama3.1-8b").trainer(
                    command=["tune", "run", "x"], args=["output_dir=/o"]
                ),
                torchtune_runtime("torchtune-llama3.1-8b"),
            ),
            id="a command that is not exactly tune run skips the torchtune checks",
        ),
        # --- MPI
        pytest.param(
            AdmissionCase(
                TJ.trainer(numNodes=2),
                RT.ml_policy(mpi={"runLauncherAsNode": True}),
                [
                    "spec.trainer.numNodes: Invalid value: 2: must have 1 when MPI trainingRuntime with enabled "
                    "runLauncherAsNode does not have either launcher and node",
                ],
            ),
            id="mpi runLauncherAsNode with two nodes but no launcher job is rejected",
        ),
        pytest.param(
            AdmissionCase(TJ.trainer(numNodes=1), RT.ml_policy(mpi={"runLauncherAsNode": True})),
            id="mpi runLauncherAsNode with one node and no launcher job is admitted",
        ),
        pytest.param(
            AdmissionCase(TJ.trainer(numNodes=4), RT.ml_policy(mpi={"runLauncherAsNode": True}).jobs(mpi_jobs())),
            id="mpi runLauncherAsNode with launcher and node jobs is admitted",
        ),
        pytest.param(
            AdmissionCase(
                TJ.trainer(env=env("OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_default_hostfile")),
                RT.ml_policy(mpi={}).jobs(mpi_jobs()),
                [
                    'spec.trainer.env: Invalid value: [{"name":"OMPI_MCA_plm_rsh_args","value":"x"},'
                    '{"name":"OMPI_MCA_orte_default_hostfile","value":"x"}]: must not have reserved envs, invalid envs '
                    "configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]",
                ],
            ),
            id="reserved OMPI envs are rejected for mpi",
        ),
        # --- XGBoost
        pytest.param(
            AdmissionCase(
                TJ.trainer(env=env("DMLC_TRACKER_URI", "OK", "DMLC_NUM_WORKER", "DMLC_TASK_ID", "DMLC_TRACKER_PORT")),
                RT.ml_policy(xgboost={}),
                [
                    "spec.trainer.env[0]: Forbidden: DMLC_TRACKER_URI is reserved for the XGBoost runtime",
                    "spec.trainer.env[2]: Forbidden: DMLC_NUM_WORKER is reserved for the XGBoost runtime",
                    "spec.trainer.env[3]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime",
                    "spec.trainer.env[4]: Forbidden: DMLC_TRACKER_PORT is reserved for the XGBoost runtime",
                ],
            ),
            id="reserved DMLC envs are forbidden per index for xgboost",
        ),
        pytest.param(
            AdmissionCase(TJ.trainer(env=env("DMLC_TASK_ID")), RT.ml_policy(jax={})), id="jax has no validation"
        ),
        # --- Volcano
        pytest.param(
            AdmissionCase(
                TJ.patch("a.io/m", metadata={"annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: ""}}),
                RT.volcano(),
                [
                    'spec.annotations[scheduling.volcano.sh/queue-name]: Invalid value: "": Volcano queue name must not be '
                    "empty",
                ],
            ),
            id="an empty volcano queue name from a patch is rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.volcano().set("spec.template.metadata", {"annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: ""}}),
                [
                    'spec.annotations[scheduling.volcano.sh/queue-name]: Invalid value: "": Volcano queue name must not be '
                    "empty",
                ],
            ),
            id="an empty volcano queue name from the runtime template is rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ.patch("a.io/m", metadata={"annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: "q"}}), RT.volcano()
            ),
            id="a named volcano queue is admitted",
        ),
        pytest.param(
            AdmissionCase(TJ.patch("a.io/m", metadata={"annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: ""}}), RT),
            id="an empty queue name without the volcano policy is admitted",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.volcano().job(c.NODE, "template.spec.template.spec.priorityClassName", "high"),
                [
                    'spec.templateSpec.priorityClassName: Invalid value: "high": PriorityClass "high" doesn\'t exist: '
                    'priorityclasses.scheduling.k8s.io "high" not found',
                ],
                observed=Observed(reads=priority_classes("low")),
            ),
            id="a missing volcano PriorityClass is rejected",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.volcano().job(c.NODE, "template.spec.template.spec.priorityClassName", "high"),
                observed=Observed(reads=priority_classes("high")),
            ),
            id="an existing volcano PriorityClass is admitted",
        ),
        pytest.param(
            AdmissionCase(
                TJ,
                RT.volcano()
                .job(c.DATASET_INITIALIZER, "template.spec.template.spec.priorityClassName", "system-node-critical")
                .job(c.NODE, "template.spec.template.spec.priorityClassName", "high"),
                observed=Observed(reads=priority_classes()),
            ),
            id="a system priority class short-circuits the volcano PriorityClass check",
        ),
    ],
)
def test_admit_trainjob(case: AdmissionCase) -> None:
    runtimes: dict[tuple[str, str, str], RuntimeSource] = {}
    if case.runtime is not None:
        obj = case.runtime.obj()
        runtimes[(obj.kind, obj.metadata.namespace or "default", obj.metadata.name or "")] = RuntimeSource.of(obj)

    def lookup(kind: str, namespace: str, name: str) -> RuntimeSource | None:
        ns = "default" if kind == c.CLUSTER_TRAINING_RUNTIME_KIND else namespace
        return runtimes.get((kind, ns, name))

    old = case.old.obj() if case.old is not None else None
    validation = admit_trainjob(FRAMEWORK, old, case.job.obj(), lookup, case.observed)
    assert (errors_of(validation), list(validation.warnings)) == (case.want, case.warnings)


def test_admit_trainjob_reads_the_runtime_in_the_trainjob_namespace() -> None:
    seen: list[tuple[str, str, str]] = []

    def lookup(kind: str, namespace: str, name: str) -> RuntimeSource | None:
        seen.append((kind, namespace, name))
        return None

    admit_trainjob(FRAMEWORK, None, TrainJobBuilder.make(namespace="team-a", runtime="rt").obj(), lookup)
    assert seen == [(c.TRAINING_RUNTIME_KIND, "team-a", "rt")]


# ------------------------------------------------------------------------------------------- runtime admission


@dataclass(frozen=True)
class RuntimeAdmissionCase:
    runtime: RuntimeBuilder
    want: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(RuntimeAdmissionCase(RT), id="the standard runtime is admitted"),
        pytest.param(
            RuntimeAdmissionCase(
                RT.job(c.NODE, "replicas", 2),
                [
                    "spec.template.spec.replicatedJobs[2].replicas: Invalid value: 2: always must be 1",
                ],
            ),
            id="a trainer job with two replicas is rejected",
        ),
        pytest.param(
            RuntimeAdmissionCase(
                RT.job(c.DATASET_INITIALIZER, "replicas", 0).job(c.MODEL_INITIALIZER, "replicas", 3),
                [
                    "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 0: always must be 1",
                    "spec.template.spec.replicatedJobs[1].replicas: Invalid value: 3: always must be 1",
                ],
            ),
            id="initializer jobs with replicas other than 1 are rejected",
        ),
        pytest.param(
            RuntimeAdmissionCase(RT.jobs([*standard_jobs(), launcher_job(replicas=4)])),
            id="a job without ancestor label may have several replicas",
        ),
        pytest.param(
            RuntimeAdmissionCase(
                RT.job(c.NODE, "template.spec.template.spec.containers", [container("trainer")]),
                [
                    "spec.template.spec.replicatedJobs[2].template.spec.template.spec.containers: Invalid value: "
                    '[{"name":"trainer","image":"test:runtime","resources":{}}]: must contain the required container for the '
                    "ancestor: trainer",
                ],
            ),
            id="a trainer job without a node container is rejected",
        ),
        pytest.param(
            RuntimeAdmissionCase(
                RT.job(
                    c.MODEL_INITIALIZER,
                    "template.spec.template.spec.containers",
                    [container("fetch"), container("unpack")],
                ).job(c.MODEL_INITIALIZER, "replicas", 2),
                [
                    "spec.template.spec.replicatedJobs[1].replicas: Invalid value: 2: always must be 1",
                    "spec.template.spec.replicatedJobs[1].template.spec.template.spec.containers: Invalid value: "
                    '[{"name":"fetch","image":"test:runtime","resources":{}},{"name":"unpack","image":"test:runtime",'
                    '"resources":{}}]: must contain the required container for the ancestor: model-initializer',
                ],
            ),
            id="a model-initializer job with two replicas and no model-initializer container has two errors",
        ),
        pytest.param(
            RuntimeAdmissionCase(
                CTR.job(c.NODE, "replicas", 2),
                [
                    "spec.template.spec.replicatedJobs[2].replicas: Invalid value: 2: always must be 1",
                ],
            ),
            id="a ClusterTrainingRuntime is checked the same way",
        ),
        pytest.param(
            RuntimeAdmissionCase(
                CTR.set("metadata.labels", {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED}),
                [],
                [
                    'ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future release of Kubeflow '
                    f"Trainer. See runtime deprecation policy: {DEPRECATION_POLICY}",
                ],
            ),
            id="a deprecated ClusterTrainingRuntime is admitted with a warning",
        ),
        pytest.param(
            RuntimeAdmissionCase(RT.set("metadata.labels", {c.SUPPORT_LABEL: c.SUPPORT_DEPRECATED})),
            id="a deprecated TrainingRuntime gives no warning",
        ),
    ],
)
def test_admit_runtime(case: RuntimeAdmissionCase) -> None:
    validation = admit_runtime(case.runtime.obj())
    assert (errors_of(validation), list(validation.warnings)) == (case.want, case.warnings)
