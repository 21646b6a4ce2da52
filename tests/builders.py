"""Fluent builders with realistic defaults, after upstream's MakeTrainJobWrapper/MakeTrainingRuntimeWrapper.

Every method returns a modified copy, so a base fixture can be varied per case; `.raw()` gives the wire dict
and `.obj()` the typed model.
"""

import copy
from dataclasses import dataclass
from typing import Any, Self

from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import SSHKeyPair


class _Builder:
    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    def _with(self, edit: Any) -> Self:
        clone = copy.deepcopy(self._raw)
        edit(clone)
        return type(self)(clone)

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._raw)

    def set(self, path: str, value: Any) -> Self:
        """Set any field by a dotted path (list indexes as numbers): `.set("spec.suspend", True)`."""

        def edit(raw: dict[str, Any]) -> None:
            node: Any = raw
            parts = path.split(".")
            for part in parts[:-1]:
                key: Any = int(part) if part.isdigit() else part
                if isinstance(node, dict):
                    node = node.setdefault(key, {})
                else:
                    node = node[key]
            last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
            node[last] = copy.deepcopy(value)

        return self._with(edit)


def container(name: str, image: str = "test:runtime", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **fields}


def replicated_job(
    name: str,
    ancestor: str | None,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]] | None = None,
    **job_fields: Any,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": containers}
    if volumes is not None:
        pod["volumes"] = volumes
    template: dict[str, Any] = {"spec": {"template": {"spec": pod}}}
    if ancestor is not None:
        template["metadata"] = {"labels": {c.ANCESTOR_LABEL: ancestor}}
    return {"name": name, "template": template, **job_fields}


INITIALIZER_PVC = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}


def standard_jobs(image: str = "test:runtime", **node_fields: Any) -> list[dict[str, Any]]:
    """Upstream's fixture: dataset-initializer, model-initializer, node; `initializer` PVC everywhere."""
    return [
        replicated_job(
            c.DATASET_INITIALIZER,
            c.DATASET_INITIALIZER,
            [
                container(
                    c.DATASET_INITIALIZER,
                    image,
                    volumeMounts=[{"name": "initializer", "mountPath": "/workspace/dataset"}],
                )
            ],
            [INITIALIZER_PVC],
        ),
        replicated_job(
            c.MODEL_INITIALIZER,
            c.MODEL_INITIALIZER,
            [
                container(
                    c.MODEL_INITIALIZER, image, volumeMounts=[{"name": "initializer", "mountPath": "/workspace/model"}]
                )
            ],
            [INITIALIZER_PVC],
        ),
        replicated_job(
            c.NODE,
            c.ANCESTOR_TRAINER,
            [
                container(
                    c.NODE,
                    image,
                    volumeMounts=[
                        {"name": "initializer", "mountPath": "/workspace/dataset"},
                        {"name": "initializer", "mountPath": "/workspace/model"},
                    ],
                    **node_fields,
                )
            ],
            [INITIALIZER_PVC],
        ),
    ]


class RuntimeBuilder(_Builder):
    @classmethod
    def make(
        cls, name: str = "test-runtime", kind: str = c.TRAINING_RUNTIME_KIND, namespace: str | None = "default"
    ) -> "RuntimeBuilder":
        metadata: dict[str, Any] = {"name": name}
        if kind == c.TRAINING_RUNTIME_KIND and namespace:
            metadata["namespace"] = namespace
        return cls(
            {
                "apiVersion": c.API_VERSION,
                "kind": kind,
                "metadata": metadata,
                "spec": {"template": {"spec": {"replicatedJobs": standard_jobs()}}},
            }
        )

    def jobs(self, jobs: list[dict[str, Any]]) -> Self:
        return self.set("spec.template.spec.replicatedJobs", jobs)

    def ml_policy(self, num_nodes: int | None = None, **source: Any) -> Self:
        policy: dict[str, Any] = dict(source)
        if num_nodes is not None:
            policy["numNodes"] = num_nodes
        return self.set("spec.mlPolicy", policy)

    def coscheduling(self, timeout: int | None = None) -> Self:
        return self.set(
            "spec.podGroupPolicy", {"coscheduling": {} if timeout is None else {"scheduleTimeoutSeconds": timeout}}
        )

    def volcano(self, **source: Any) -> Self:
        return self.set("spec.podGroupPolicy", {"volcano": source})

    def template_labels(self, **labels: str) -> Self:
        return self.set("spec.template.metadata", {"labels": labels})

    def node_container(self, **fields: Any) -> Self:
        """Update the `node` container of the job named node (whichever index it has)."""

        def edit(raw: dict[str, Any]) -> None:
            for rjob in raw["spec"]["template"]["spec"]["replicatedJobs"]:
                if rjob["name"] == c.NODE:
                    for ctr in rjob["template"]["spec"]["template"]["spec"]["containers"]:
                        if ctr["name"] == c.NODE:
                            ctr.update(copy.deepcopy(fields))

        return self._with(edit)

    def job(self, name: str, path: str, value: Any) -> Self:
        """Set `path` (dotted, relative to the replicated job) in the replicated job `name`."""
        jobs = self._raw["spec"]["template"]["spec"]["replicatedJobs"]
        index = next(i for i, rj in enumerate(jobs) if rj["name"] == name)
        return self.set(f"spec.template.spec.replicatedJobs.{index}.{path}", value)

    def obj(self) -> TrainingRuntime | ClusterTrainingRuntime:
        model = TrainingRuntime if self._raw["kind"] == c.TRAINING_RUNTIME_KIND else ClusterTrainingRuntime
        return model.model_validate(self.raw())

    def source(self) -> RuntimeSource:
        return RuntimeSource.of(self.obj())


class TrainJobBuilder(_Builder):
    @classmethod
    def make(
        cls,
        name: str = "test-job",
        namespace: str = "default",
        uid: str | None = "uid",
        runtime: str = "test-runtime",
        kind: str = c.TRAINING_RUNTIME_KIND,
    ) -> "TrainJobBuilder":
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        return cls(
            {
                "apiVersion": c.API_VERSION,
                "kind": c.TRAINJOB_KIND,
                "metadata": metadata,
                "spec": {"runtimeRef": {"name": runtime, "kind": kind, "apiGroup": c.GROUP}},
            }
        )

    def suspend(self, value: bool = True) -> Self:
        return self.set("spec.suspend", value)

    def trainer(self, **fields: Any) -> Self:
        return self.set("spec.trainer", {**self._raw["spec"].get("trainer", {}), **fields})

    def initializer(self, **fields: Any) -> Self:
        return self.set("spec.initializer", fields)

    def patch(
        self,
        manager: str,
        jobs: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
        time: str | None = None,
    ) -> Self:
        template: dict[str, Any] = {}
        if metadata is not None:
            template["metadata"] = metadata
        if jobs is not None:
            template["spec"] = {"replicatedJobs": jobs}
        entry: dict[str, Any] = {"manager": manager, "trainingRuntimeSpec": {"template": template}}
        if time is not None:
            entry["time"] = time
        patches = [*self._raw["spec"].get("runtimePatches", []), entry]
        return self.set("spec.runtimePatches", patches)

    def obj(self) -> TrainJob:
        return TrainJob.model_validate(self.raw())


class PodBuilder(_Builder):
    """A pod as JobSet makes it for a TrainJob's JobSet (labels of the JobSet, its attempt, Job and index), as the
    API server returns it: `.raw()`."""

    @classmethod
    def make(
        cls,
        jobset: str = "test-job",
        rjob: str = c.NODE,
        job_index: int = 0,
        index: int = 0,
        suffix: str = "abcde",
        attempt: int = 0,
        jobset_uid: str = "jobset-uid",
        created: str = "2026-11-22T11:00:00Z",
    ) -> "PodBuilder":
        job = f"{jobset}-{rjob}-{job_index}"
        return cls(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job}-{index}-{suffix}",
                    "namespace": "default",
                    "uid": f"pod-{job}-{index}-{suffix}",
                    "creationTimestamp": created,
                    "labels": {
                        c.JOBSET_NAME_LABEL: jobset,
                        c.JOBSET_UID_LABEL: jobset_uid,
                        c.JOBSET_RESTART_ATTEMPT_LABEL: str(attempt),
                        c.JOBSET_REPLICATED_JOB_LABEL: rjob,
                        c.JOB_NAME_LABEL: job,
                        c.JOB_COMPLETION_INDEX_LABEL: str(index),
                        "unrelated": "dropped from the cache",
                    },
                },
                "spec": {"containers": [{"name": c.NODE, "image": "test:runtime"}], "nodeName": "kwok-node-0"},
                "status": {"phase": "Pending"},
            }
        )

    def running(self, restarts: int = 0, last_exit: int | None = None) -> Self:
        status: dict[str, Any] = {"name": c.NODE, "ready": True, "restartCount": restarts, "state": {"running": {}}}
        if last_exit is not None:
            status["lastState"] = {"terminated": {"exitCode": last_exit, "reason": "Error"}}
        return self.set("status", {"phase": "Running", "containerStatuses": [status]})

    def crash_looping(self, restarts: int, exit_code: int = 1) -> Self:
        status = {
            "name": c.NODE,
            "ready": False,
            "restartCount": restarts,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
            "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
        }
        return self.set("status", {"phase": "Running", "containerStatuses": [status]})

    def failed(self, exit_code: int = 1, reason: str = "Error") -> Self:
        status = {
            "name": c.NODE,
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "reason": reason}},
        }
        return self.set("status", {"phase": "Failed", "containerStatuses": [status]})

    def succeeded(self) -> Self:
        status = {"name": c.NODE, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        return self.set("status", {"phase": "Succeeded", "containerStatuses": [status]})

    def unschedulable(self, message: str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") -> Self:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        return self.set("status", {"phase": "Pending", "conditions": [condition]})

    def image_pull_failing(self) -> Self:
        waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope"'}
        status = {"name": c.NODE, "ready": False, "restartCount": 0, "state": {"waiting": waiting}}
        return self.set("status", {"phase": "Pending", "containerStatuses": [status]})


def pod_patch(
    job: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    job_labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """One replicated-job entry of a runtime patch: Job-level labels, pod metadata and a PodSpecPatch."""
    pod_template: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if meta:
        pod_template["metadata"] = meta
    if spec:
        pod_template["spec"] = spec
    template: dict[str, Any] = {"spec": {"template": pod_template}}
    if job_labels:
        template["metadata"] = {"labels": job_labels}
    return {"name": job, "template": template}


# --- reading results ---------------------------------------------------------------------------------


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def jobset_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (jobset,) = by_kind(objects, "JobSet")
    return jobset


def rjob(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    return next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == name)


def pod_spec(jobset: dict[str, Any], job: str) -> dict[str, Any]:
    spec: dict[str, Any] = rjob(jobset, job)["template"]["spec"]["template"]["spec"]
    return spec


def container_of(jobset: dict[str, Any], job: str, name: str = c.NODE, init: bool = False) -> dict[str, Any]:
    pod = pod_spec(jobset, job)
    return next(ct for ct in pod["initContainers" if init else "containers"] if ct["name"] == name)


def env_of(ctr: dict[str, Any]) -> dict[str, Any]:
    """Env as a name → value (or valueFrom) mapping: upstream's env order is unspecified."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr.get("env") or []}


def as_set(items: list[dict[str, Any]] | None, key: str = "name") -> dict[Any, dict[str, Any]]:
    return {item[key]: item for item in items or []}


def torch_runtime(
    namespace: str,
    name: str = "torch",
    pod_annotations: dict[str, str] | None = None,
    jobset_fields: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    replicas: int | None = None,
    num_nodes: int = 1,
    command: tuple[str, ...] = ("torchrun", "train.py"),
    env: list[dict[str, Any]] | None = None,
    backoff_limit: int | None = 0,
) -> dict[str, Any]:
    """A torch TrainingRuntime for the cluster tests: one `node` job of trainer pods (pytorch image), the fields a
    test varies as arguments."""
    node: dict[str, Any] = {"name": "node", "image": "pytorch/pytorch:2.13.0", "command": list(command)}
    if env is not None:
        node["env"] = env
    pod: dict[str, Any] = {"spec": {"containers": [node]}}
    if pod_annotations:
        pod["metadata"] = {"annotations": pod_annotations}
    job_spec: dict[str, Any] = {"template": pod}
    if backoff_limit is not None:
        job_spec = {"backoffLimit": backoff_limit, **job_spec}
    rjob: dict[str, Any] = {
        "name": "node",
        "template": {"metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}}, "spec": job_spec},
    }
    if replicas is not None:
        rjob["replicas"] = replicas
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": meta,
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {}},
            "template": {"spec": {"replicatedJobs": [rjob], **(jobset_fields or {})}},
        },
    }


def trainjob_object(namespace: str, name: str, runtime_name: str = "torch", **spec: Any) -> dict[str, Any]:
    """A TrainJob for the cluster tests, referring to the TrainingRuntime `runtime_name`."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime_name, "kind": "TrainingRuntime"}, **spec},
    }


@dataclass
class ManualClock:
    """A clock that moves only when a test sets `now` (leader election, log aggregation windows)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def billion_laughs(levels: int = 12) -> str:
    """A TrainJob YAML whose aliases expand to 10**levels items (hostile input for the YAML loaders and the CLI)."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    return "\n".join(lines) + "\nkind: TrainJob\n"


FIXED_SSH_KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")


@dataclass(frozen=True)
class FixedKeys:
    """A `KeySource` for tests: the same key pair every time, so a build is reproducible."""

    key: SSHKeyPair = FIXED_SSH_KEY
    curve: bytes = bytes(range(32))

    def ssh_key(self) -> SSHKeyPair:
        return self.key

    def curve_secret(self) -> bytes:
        return self.curve


FIXED_KEYS = FixedKeys()
