"""TensorFlow (ours, not upstream's): `TF_CONFIG` for MultiWorkerMirroredStrategy on every trainer pod.

Kubeflow Trainer v2.3 has no `mlPolicy.tensorflow`, and the wire format stays v2.3's: a runtime opts in with the
label `trainer.kubeflow.org/framework: tensorflow` (the label the SDK already reads) and an ML policy without a
framework source (only `numNodes`). The trainer `node` container then gets, in this order:

- `TF_TASK_INDEX`: the pod's Job completion index (downward API), which is its index in the worker list;
- `TF_CONFIG`: `{"cluster":{"worker":["<pod host>:29500",...]},"task":{"type":"worker","index":$(TF_TASK_INDEX)}}`.

Kubernetes expands `$(TF_TASK_INDEX)` itself (dependent environment variables: a variable defined earlier in the
same list), so each pod reads its own index without a wrapper script. Pod hosts are JobSet's stable names
`<trainjob>-<replicated job>-<job index>-<pod index>.<subdomain>`.
"""

import json
from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.trainjob import TrainJob
from ..errors import BuildError, FieldError, Validation, forbidden
from ..framework import ClaimsTrainer, CustomValidation, EnforceMLPolicy
from ..info import RuntimeInfo
from ..limits import ENV_VALUE_LIMIT, hosts_bytes, too_large, trainer_nodes
from ..observed import Observed
from ..upsert import upsert_env, upsert_port
from .common import completion_index_env, plain_trainer, pod_hosts

INDEX_PLACEHOLDER = "__TF_TASK_INDEX__"


def is_tensorflow(info: RuntimeInfo) -> bool:
    """The runtime is labelled `tensorflow` and no framework before it in the registry claims the trainer (those
    with an `mlPolicy` source come first)."""
    return info.trainer_owner == TensorFlow.name


def tf_config(workers: list[str], index: str) -> str:
    """TF_CONFIG as compact JSON; `index` is written as is (a number, or `$(TF_TASK_INDEX)` for Kubernetes)."""
    doc = {"cluster": {c.TF_WORKER: workers}, "task": {"type": c.TF_WORKER, "index": INDEX_PLACEHOLDER}}
    return json.dumps(doc, separators=(",", ":")).replace(f'"{INDEX_PLACEHOLDER}"', index)


class TensorFlow(ClaimsTrainer, EnforceMLPolicy, CustomValidation):
    name: ClassVar[str] = "TensorFlow"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return info.runtime.labels.get(c.FRAMEWORK_LABEL) == c.TENSORFLOW_FRAMEWORK

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if not is_tensorflow(info):
            return
        plain_trainer(info, job)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer is None or node is None:
            return
        too_many = tf_config_size_errors(info, job)
        if too_many:  # before the worker list is made
            raise BuildError(str(too_many[0]))
        workers = [f"{host}:{c.CONTAINER_TRAINER_PORT}" for host in pod_hosts(info, job, trainer)]
        # Dependent env only sees variables defined earlier: drop any earlier copies, then the index, then the config.
        node.env = [e for e in node.env or [] if e.name not in c.TF_RESERVED_ENVS]
        upsert_env(
            node,
            [
                completion_index_env(c.TF_ENV_TASK_INDEX),
                EnvVar(name=c.TF_ENV_CONFIG, value=tf_config(workers, f"$({c.TF_ENV_TASK_INDEX})")),
            ],
        )
        upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        if not is_tensorflow(info):
            return Validation()
        errors = tf_config_size_errors(info, new)
        errors += [
            forbidden(f"spec.trainer.env[{i}]", f"{env.name} is reserved for the TensorFlow runtime")
            for i, env in enumerate(new.spec.trainer.env or [] if new.spec.trainer is not None else [])
            if env.name in c.TF_RESERVED_ENVS
        ]
        return Validation(tuple(errors))


def tf_config_size_errors(info: RuntimeInfo, job: TrainJob) -> list[FieldError]:
    """TF_CONFIG within the bound of one generated value, computed without making the worker list: each worker is
    `"<host>:<port>",` around the hosts."""
    trainer, nodes = info.ancestor(c.ANCESTOR_TRAINER), trainer_nodes(info, job)
    if trainer is None or nodes is None:
        return []
    workers = hosts_bytes(info, job, trainer, len(f'"":{c.CONTAINER_TRAINER_PORT},'), nodes) - 1  # no last comma
    size = max(workers, 0) + len(tf_config([], f"$({c.TF_ENV_TASK_INDEX})"))
    if size <= ENV_VALUE_LIMIT:
        return []
    return [too_large(f"{c.TF_ENV_CONFIG} value", size, ENV_VALUE_LIMIT, nodes)]
