"""TorchTune mode of the Torch plugin: the `tune run` command rewrite and its validation
(docs/upstream-behaviour.md#torch)."""

from ...api import constants as c
from ...api.trainjob import TrainJob

RDZV_TEMPLATE = "--rdzv_endpoint={address}:{port}"


def is_torchtune(command: list[str] | None) -> bool:
    return command is not None and tuple(command) == c.TORCHTUNE_COMMAND


def model_of(runtime_name: str) -> str:
    """`torchtune-llama3.2-1b` → `llama3_2/1B`; anything not of three dash-separated parts → ""."""
    parts = runtime_name.split("-")
    if len(parts) != 3:
        return ""
    return f"{parts[1].replace('.', '_')}/{parts[2].upper()}"


def uses_lora(args: list[str]) -> bool:
    return any("model.lora_attn_modules" in arg for arg in args)


def _flag(args: list[str], key: str) -> bool:
    """An arg `…<key>=true`: the key contains `key`, the value trimmed is "true" in any case (as upstream)."""
    for arg in args:
        name, sep, value = arg.partition("=")
        if sep and key in name and value.strip().lower() == "true":
            return True
    return False


def uses_qlora(args: list[str]) -> bool:
    return _flag(args, "model.quantize_base") and not _flag(args, "model.use_dora")


def recipe_and_config(num_nodes: int, num_proc: int | str, gpus: int, args: list[str]) -> tuple[str, str]:
    lora, qlora = uses_lora(args), uses_qlora(args)
    if num_nodes == 1 and (num_proc == 1 or gpus == 1):
        if qlora:
            return "lora_finetune_single_device", "_qlora_single_device"
        if lora:
            return "lora_finetune_single_device", "_lora_single_device"
        return "full_finetune_single_device", "_full_single_device"
    if num_nodes == 1 and qlora:
        return "lora_finetune_distributed", "_qlora"
    if num_nodes == 1 and lora:
        return "lora_finetune_distributed", "_lora"
    if num_nodes > 1:
        return "full_finetune_distributed", "_full_multinode"
    return "full_finetune_distributed", "_full"


def config_key(arg: str) -> str:
    return arg.split("=", 1)[0]


def rewrite_command(
    job: TrainJob, num_nodes: int, num_proc: int | str, gpus: int, runtime_command: list[str] | None
) -> list[str]:
    """`tune run` + rendezvous (when distributed) + recipe, config and the runtime's managed configs."""
    trainer = job.spec.trainer
    command = list(trainer.command or []) if trainer is not None else []
    args = list(trainer.args or []) if trainer is not None else []
    distributed = num_nodes > 1 or (isinstance(num_proc, int) and num_proc > 1) or (num_proc == "auto" and gpus > 1)
    if distributed:
        command.append(
            RDZV_TEMPLATE.format(address=f"{job.name}-{c.NODE}-0-0.{job.name}", port=c.CONTAINER_TRAINER_PORT)
        )
    recipe, suffix = recipe_and_config(num_nodes, num_proc, gpus, args)
    command += [recipe, "--config", model_of(job.spec.runtime_ref.name) + suffix]
    command += [a for a in runtime_command or [] if config_key(a) in c.TORCHTUNE_IMMUTABLE_CONFIGS]
    return command
