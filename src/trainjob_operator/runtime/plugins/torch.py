"""Torch: torchrun `PET_*` env, numProcPerNode resolution, envInjection and torchtune
(docs/upstream-behaviour.md#torch)."""

from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.trainjob import TrainJob
from ..errors import BuildError, FieldError, Validation, invalid
from ..framework import ClaimsTrainer, CustomValidation, EnforceMLPolicy
from ..info import RuntimeInfo
from ..observed import Observed
from ..resources import cpu_count, gpu_count
from ..upsert import upsert_env, upsert_port
from . import torchtune
from .common import completion_index_env, decision_resources, first_pod_address, set_trainer_count


def envinjection_missing(job_name: str, container: str) -> str:
    return f'envInjection target podSet "{job_name}" container "{container}" not found in runtime template'


class Torch(ClaimsTrainer, EnforceMLPolicy, CustomValidation):
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
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer_spec is not None and node is not None:
            upsert_env(node, trainer_spec.env or [])
            if torchtune.is_torchtune(trainer_spec.command):
                info.trainer_command = torchtune.rewrite_command(job, num_nodes, num_proc, gpus, node.command)
                upsert_env(node, pet, fresh=True)
            else:
                upsert_env(node, pet + master, fresh=True)  # made here; injection targets get copies
            upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))
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
        trainer = new.spec.trainer
        if trainer is None:
            return Validation(tuple(errors))
        reserved = sorted({e.name for e in trainer.env or []} & c.TORCH_RESERVED_ENVS)
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
