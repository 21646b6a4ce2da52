"""Torch: torchrun `PET_*` env, numProcPerNode resolution, envInjection and torchtune
(docs/upstream-behaviour.md#torch)."""

import json
from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.runtime import TorchElasticPolicy
from ...api.trainjob import TrainJob
from ..elastic import rendezvous_manifest, rendezvous_service
from ..errors import BuildError, FieldError, Validation, invalid
from ..framework import (
    ChildKind,
    ClaimsTrainer,
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    Manifest,
    Mode,
    OwnsKinds,
)
from ..info import RuntimeInfo
from ..limits import INDEXED_JOB_LIMIT
from ..observed import Observed
from ..resources import cpu_count, gpu_count
from ..upsert import upsert_env, upsert_port
from . import torchtune
from .common import completion_index_env, decision_resources, first_pod_address, set_trainer_count


def envinjection_missing(job_name: str, container: str) -> str:
    return f'envInjection target podSet "{job_name}" container "{container}" not found in runtime template'


def elastic_policy(info: RuntimeInfo, job: TrainJob) -> TorchElasticPolicy | None:
    """The elastic policy of a torch TrainJob: the TrainJob's `trainer.elasticPolicy` field by field over the
    runtime's `mlPolicy.torch.elasticPolicy` (KEP-2903: the job narrows the runtime's default)."""
    if info.ml_policy is None or info.ml_policy.torch is None:
        return None
    runtime = info.ml_policy.torch.elastic_policy
    own = job.spec.trainer.elastic_policy if job.spec.trainer is not None else None
    if own is None:
        return runtime
    if runtime is None:
        return own
    return runtime.model_copy(update=own.model_dump(exclude_none=True, by_alias=False))


def elastic_bounds(policy: TorchElasticPolicy, num_nodes: int) -> tuple[int, int]:
    """(minNodes, maxNodes) with their defaults: 1, and the TrainJob's node count."""
    low = policy.min_nodes if policy.min_nodes is not None else 1
    high = policy.max_nodes if policy.max_nodes is not None else max(num_nodes, low)
    return low, high


def rendezvous_host(job: TrainJob) -> str:
    """The c10d rendezvous endpoint's host of an elastic TrainJob: a headless Service `<tj>-rdzv` selecting one
    trainer pod, index `status.elastic.rendezvousIndex` (0 until that pod is lost; runtime/elastic.py moves it).

    torch's c10d backend keeps the rendezvous in a TCPStore served by one agent's process. Every elastic agent is
    told to serve one (`is_host=true`, `rendezvous_conf`), and every agent connects to the store at the endpoint's
    address: the Service decides whose store is the rendezvous, so it can move to a survivor when its pod is lost.
    The name is no pod's hostname (a pod resolves its own hostname to itself through /etc/hosts, so index 0 would
    keep its own store after a move) and resolves in every pod through its namespace's search domain, whatever the
    cluster domain (docs/elastic.md, "The rendezvous")."""
    return rendezvous_service(job.name)


def rendezvous_index(job: TrainJob) -> int:
    """The completion index the rendezvous Service selects (`status.elastic.rendezvousIndex`, 0 at first)."""
    elastic = job.status.elastic if job.status is not None else None
    return elastic.rendezvous_index if elastic is not None else 0


def rendezvous_conf(env: list[EnvVar] | None) -> EnvVar:
    """`PET_RDZV_CONF` of an elastic trainer: the options the runtime's trainer container sets (as a value; one from
    `valueFrom` cannot be read and is replaced), with `is_host=true` in place of any of theirs: every agent serves a
    store, the Service picks the one used. (A TrainJob's own is refused: ELASTIC_RESERVED_ENVS.)"""
    given = next((e for e in env or [] if e.name == c.TORCH_ENV_RDZV_CONF), None)
    options = [
        option.strip()
        for option in ((given.value or "") if given is not None else "").split(",")
        if option.strip() and option.split("=", 1)[0].strip() != "is_host"
    ]
    return EnvVar(name=c.TORCH_ENV_RDZV_CONF, value=",".join([*options, "is_host=true"]))


class Torch(ClaimsTrainer, EnforceMLPolicy, CustomValidation, ComponentBuilder, OwnsKinds):
    name: ClassVar[str] = "Torch"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return info.ml_policy is not None and info.ml_policy.torch is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.ml_policy is None or info.ml_policy.torch is None:
            return
        set_trainer_count(info, job)
        trainer_spec = job.spec.trainer
        num_proc: int | str = "auto"
        if trainer_spec is not None and trainer_spec.num_proc_per_node is not None:
            num_proc = trainer_spec.num_proc_per_node
        resources = decision_resources(info, job)
        gpus = gpu_count(resources)
        if num_proc == "auto" and gpus == 0:
            num_proc = cpu_count(resources)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        num_nodes = trainer.count if trainer is not None else 1
        master = [
            EnvVar(name=c.TORCH_ENV_MASTER_ADDR, value=first_pod_address(job)),
            EnvVar(name=c.TORCH_ENV_MASTER_PORT, value=str(c.CONTAINER_TRAINER_PORT)),
        ]
        pet = [
            EnvVar(name=c.TORCH_ENV_NUM_NODES, value=str(num_nodes)),
            EnvVar(name=c.TORCH_ENV_NUM_PROC_PER_NODE, value=str(num_proc)),
            completion_index_env(c.TORCH_ENV_NODE_RANK),
        ]
        policy = elastic_policy(info, job)
        if policy is not None:
            low, high = elastic_bounds(policy, num_nodes)
            kueue = c.KUEUE_QUEUE_NAME_LABEL in (job.metadata.labels or {})
            info.annotations[c.ELASTIC_ANNOTATION] = json.dumps(
                {
                    "minNodes": low,
                    "maxNodes": high,
                    "belowMinNodesSeconds": policy.below_min_nodes_seconds or c.ELASTIC_DEFAULT_BELOW_MIN_SECONDS,
                    # Kueue admitted this many pods: the TrainJob never grows past them (KQ#9411).
                    **({"admittedNodes": num_nodes} if kueue else {}),
                },
                separators=(",", ":"),
                sort_keys=True,
            )
            pet[0] = EnvVar(name=c.TORCH_ENV_NUM_NODES, value=f"{low}:{high}")
            pet += [
                EnvVar(name=c.TORCH_ENV_RDZV_BACKEND, value="c10d"),
                EnvVar(name=c.TORCH_ENV_RDZV_ENDPOINT, value=f"{rendezvous_host(job)}:{c.TORCH_RDZV_PORT}"),
                EnvVar(name=c.TORCH_ENV_RDZV_ID, value=job.metadata.uid or job.name),
                EnvVar(
                    name=c.TORCH_ENV_MAX_RESTARTS,
                    value=str(
                        policy.max_restarts if policy.max_restarts is not None else c.ELASTIC_DEFAULT_MAX_RESTARTS
                    ),
                ),
            ]
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer_spec is not None and node is not None:
            upsert_env(node, trainer_spec.env or [])
            if policy is not None:
                pet.append(rendezvous_conf(node.env))
            if torchtune.is_torchtune(trainer_spec.command):
                info.trainer_command = torchtune.rewrite_command(job, num_nodes, num_proc, gpus, node.command)
                upsert_env(node, pet, fresh=True)
            else:
                upsert_env(node, pet + master, fresh=True)  # made here; injection targets get copies
            upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))
            if policy is not None:
                upsert_port(node, ContainerPort(name="c10d", container_port=c.TORCH_RDZV_PORT))
        injection = info.ml_policy.torch.env_injection
        for target in (injection.targets or []) if injection is not None else []:
            pod_set = info.pod_set(target.job_name)
            for name in target.container_names:
                container = pod_set.container(name, include_init=True) if pod_set is not None else None
                if container is None:
                    raise BuildError(envinjection_missing(target.job_name, name))
                upsert_env(container, pet + master)

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        if info.ml_policy is None or info.ml_policy.torch is None:
            return Validation()
        errors: list[FieldError] = []
        injection = info.ml_policy.torch.env_injection
        for target in (injection.targets or []) if injection is not None else []:
            pod_set = info.pod_set(target.job_name)
            for name in target.container_names:
                if pod_set is None or pod_set.container(name, include_init=True) is None:
                    errors.append(
                        invalid("spec.runtimeRef", target.to_wire(), envinjection_missing(target.job_name, name))
                    )
        policy = elastic_policy(info, new)
        if policy is not None:
            errors += _validate_elastic(info, new, policy)
        trainer = new.spec.trainer
        if trainer is None:
            return Validation(tuple(errors))
        names = c.TORCH_RESERVED_ENVS | (ELASTIC_RESERVED_ENVS if policy is not None else frozenset())
        reserved = sorted({e.name for e in trainer.env or []} & names)
        if reserved:
            errors.append(
                invalid(
                    "spec.trainer.env",
                    [e.to_wire() for e in trainer.env or []],
                    f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
                )
            )
        if torchtune.is_torchtune(trainer.command):
            errors += _validate_torchtune(info, new)
        return Validation(tuple(errors))

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        if info.trainer_owner != self.name or elastic_policy(info, job) is None:
            return []
        return [rendezvous_manifest(job, rendezvous_index(job))]

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind(
                "v1",
                "Service",
                "services",
                Mode.CREATE_ONCE,
                optional=True,
                purpose="elastic PyTorch rendezvous Services (created once; a move deletes and creates one)",
            )
        ]


ELASTIC_RESERVED_ENVS = frozenset(
    {
        c.TORCH_ENV_RDZV_BACKEND,
        c.TORCH_ENV_RDZV_ENDPOINT,
        c.TORCH_ENV_RDZV_ID,
        c.TORCH_ENV_MAX_RESTARTS,
        c.TORCH_ENV_RDZV_CONF,
    }
)
"""Set by the operator for an elastic TrainJob (a TrainJob's own would break its rendezvous; rendezvous options
go in the runtime's env, where the operator adds `is_host=true` to them)."""


def _validate_elastic(info: RuntimeInfo, job: TrainJob, policy: TorchElasticPolicy) -> list[FieldError]:
    """An elastic TrainJob: its node count within the policy's bounds, the bounds within what an Indexed Job takes,
    no metrics (nothing would act on them), and not with torchtune (its recipe fixes `--nnodes`)."""
    errors: list[FieldError] = []
    trainer = job.spec.trainer
    trainer_set = info.ancestor(c.ANCESTOR_TRAINER)
    runtime_nodes = trainer_set.count if trainer_set is not None else 1
    nodes = trainer.num_nodes if trainer is not None and trainer.num_nodes is not None else runtime_nodes
    low, high = elastic_bounds(policy, nodes)
    field = "spec.trainer.numNodes" if trainer is not None and trainer.num_nodes is not None else "spec.runtimeRef"
    where = "spec.runtimeRef"
    if low > high:
        errors.append(
            invalid(
                where,
                job.spec.runtime_ref.name,
                f"elasticPolicy maxNodes ({high}) must be greater than or equal to minNodes ({low})",
            )
        )
    elif not low <= nodes <= high:
        errors.append(invalid(field, nodes, f"must be between elasticPolicy minNodes ({low}) and maxNodes ({high})"))
    if high > INDEXED_JOB_LIMIT:
        errors.append(
            invalid(
                where,
                job.spec.runtime_ref.name,
                f"elasticPolicy maxNodes must be no more than {INDEXED_JOB_LIMIT} (an Indexed Job's completions limit), got {high}",
            )
        )
    if policy.metrics:
        errors.append(
            invalid(
                where,
                job.spec.runtime_ref.name,
                "elasticPolicy metrics are not supported: no autoscaler acts on them; leave metrics empty "
                "(the operator resizes on lost and returning capacity and on numNodes edits)",
            )
        )
    if trainer is not None and torchtune.is_torchtune(trainer.command):
        errors.append(
            invalid(
                where,
                job.spec.runtime_ref.name,
                "elasticPolicy is not supported with torchtune (its recipe fixes the node count)",
            )
        )
    return errors


def _validate_torchtune(info: RuntimeInfo, job: TrainJob) -> list[FieldError]:
    """Upstream's torchtune checks; QLoRA ones follow the config the build would choose."""
    trainer = job.spec.trainer
    assert trainer is not None
    errors: list[FieldError] = []
    model = torchtune.model_of(job.spec.runtime_ref.name)
    args = list(trainer.args or [])
    if model not in c.TORCHTUNE_SUPPORTED_MODELS:
        errors.append(
            invalid(
                "spec.runtimeRef.name",
                job.spec.runtime_ref.name,
                f"must have a supported pretrained model, invalid model configured: {model}",
            )
        )
    num_nodes = trainer.num_nodes
    if num_nodes is not None and num_nodes > 1 and model != "llama3_3/70B":
        errors.append(invalid("spec.trainer.numNodes", num_nodes, f"must be 1 for {model} model"))
    trainer_set = info.ancestor(c.ANCESTOR_TRAINER)
    nodes = num_nodes if num_nodes is not None else (trainer_set.count if trainer_set is not None else 1)
    num_proc: int | str = trainer.num_proc_per_node if trainer.num_proc_per_node is not None else "auto"
    gpus = gpu_count(decision_resources(info, job))
    _, config = torchtune.recipe_and_config(nodes, num_proc, gpus, args)
    if "qlora" in config and model.startswith("qwen2_5"):
        errors.append(
            invalid("spec.runtimeRef.name", job.spec.runtime_ref.name, f"QLoRA is not supported for {model} model")
        )
    if config == "_qlora" and model in ("llama3_2/1B", "llama3_2/3B"):
        errors.append(
            invalid("spec.trainer.numProcPerNode", num_proc, f"must be auto or 1 for {model} model when using QLoRA")
        )
        resources = trainer.resources_per_node.to_wire() if trainer.resources_per_node is not None else None
        errors.append(
            invalid(
                "spec.trainer.resourcesPerNode",
                resources,
                f"must have gpu resource with value 1 for {model} model when using QLoRA",
            )
        )
    if num_nodes is not None and num_nodes > 1 and (torchtune.uses_lora(args) or torchtune.uses_qlora(args)):
        errors.append(
            invalid(
                "spec.trainer.numNodes",
                num_nodes,
                "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            )
        )
    for i, arg in enumerate(args):
        key = torchtune.config_key(arg)
        if key in c.TORCHTUNE_IMMUTABLE_CONFIGS:
            detail = f'must not set immutable config "{key}" in trainer args; it is managed by the runtime'
            errors.append(invalid(f"spec.trainer.args[{i}]", arg, detail))
    return errors
