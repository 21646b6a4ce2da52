"""Flux (KEP-2841): run the trainer pods as one Flux cluster (docs/upstream-behaviour.md#other-frameworks).

What a TrainJob with `mlPolicy.flux` gets, with upstream v2.3.0's names, keys and modes:
- ConfigMap `<tj>-flux-entrypoint` with `init.sh` (run by the `flux-installer` init container: copies the Flux
  view out of the installer image into the shared `flux-install` volume and writes the broker configuration and
  host list) and `entrypoint.sh` (wraps the trainer command: the lead broker runs it with `flux run`, the other
  pods join as followers);
- Secret `<tj>-flux-curve` with `curve.cert`, the CURVE certificate the brokers authenticate each other with,
  created once and immutable, its key from the key source (`Observed.keys`; upstream derives it from the TrainJob
  uid, which anyone who reads the TrainJob knows: docs/compatibility.md);
- on the PodSet named `node`: the init container, five volumes and five mounts on container `node`;
- the trainer command becomes `/bin/bash /etc/flux-config/entrypoint.sh "<command and args>"` and the TrainJob's
  args are no longer copied onto the container (the runtime's args stay, as upstream's).

The two scripts are this project's own (`scripts/init.sh` and `scripts/entrypoint.sh` beside this module, package
data with `@name@` placeholders); what they are built from (hosts, broker settings, resource spec, `flux
run` flags) is what upstream's are built from, and the differential test compares exactly that.
"""

import base64
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import ClassVar, Final

from ....api import constants as c
from ....api.core import Container, Volume, VolumeMount
from ....api.runtime import FluxMLPolicySource
from ....api.trainjob import TrainJob
from ...errors import BuildError, FieldError, Validation, invalid, required
from ...framework import (
    ChildKind,
    ClaimsTrainer,
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    Manifest,
    Mode,
    OwnsKinds,
)
from ...info import RuntimeInfo
from ...manifests import owned_metadata
from ...observed import Observed
from ...resources import gpu_count
from ...upsert import upsert_volume, upsert_volume_mount
from ..common import decision_resources, plain_trainer
from .curve import curve_certificate

INSTALLER_CONTAINER: Final = "flux-installer"
INSTALLER_IMAGE: Final = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
INSTALL_VOLUME: Final = "flux-install"
INSTALL_PATH: Final = "/mnt/flux"
CONFIG_PATH: Final = "/etc/flux-config"
CURVE_VOLUME: Final = "flux-curve"
CURVE_PATH: Final = "/curve"
CURVE_KEY: Final = "curve.cert"
MEMORY_VOLUME: Final = "shared-memory"
MEMORY_PATH: Final = "/dev/shm"
SOFTWARE_VOLUME: Final = "spack-install"
SOFTWARE_PATH: Final = "/opt/software"
ENTRYPOINT_KEY: Final = "entrypoint.sh"
INIT_KEY: Final = "init.sh"
CONFIG_MAP_MODE: Final = 0o755
CURVE_MODE: Final = 0o400
BROKER_PORT: Final = 8050
VIEW_ROOT: Final = "/opt/view"

# Broker settings a TrainJob (or the runtime's `node` container) may override through env of the same name.
SETTING_VIEW_IMAGE: Final = "FLUX_VIEW_IMAGE"
SETTING_NETWORK_DEVICE: Final = "FLUX_NETWORK_DEVICE"
SETTING_QUEUE_POLICY: Final = "FLUX_QUEUE_POLICY"
DEFAULT_SETTINGS: Final[Mapping[str, str]] = {
    SETTING_VIEW_IMAGE: INSTALLER_IMAGE,
    SETTING_NETWORK_DEVICE: "eth0",
    SETTING_QUEUE_POLICY: "fcfs",
}


def entrypoint_name(job: TrainJob) -> str:
    return f"{job.name}-flux-entrypoint"


def curve_secret_name(job: TrainJob) -> str:
    return f"{job.name}-flux-curve"


def flux_policy(info: RuntimeInfo) -> FluxMLPolicySource | None:
    return info.ml_policy.flux if info.ml_policy is not None else None


class Flux(ClaimsTrainer, EnforceMLPolicy, ComponentBuilder, CustomValidation, OwnsKinds):
    name: ClassVar[str] = "Flux"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return flux_policy(info) is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if flux_policy(info) is None:
            return
        plain_trainer(info, job)
        settings = broker_settings(info, job)
        info.trainer_command = ["/bin/bash", f"{CONFIG_PATH}/{ENTRYPOINT_KEY}", original_command(info, job)]
        info.trainer_args = None
        config_map = entrypoint_name(job)
        installer = Container(
            name=INSTALLER_CONTAINER,
            image=settings[SETTING_VIEW_IMAGE],
            command=["/bin/bash", f"{CONFIG_PATH}/{INIT_KEY}"],
            volume_mounts=[
                VolumeMount(name=INSTALL_VOLUME, mount_path=INSTALL_PATH),
                VolumeMount(name=config_map, mount_path=CONFIG_PATH, read_only=True),
            ],
        )
        for pod_set in info.pod_sets:
            if pod_set.name != c.NODE:
                continue
            pod = pod_set.pod_spec
            for volume in volumes(job):
                upsert_volume(pod, volume)
            pod.init_containers = [*(pod.init_containers or []), installer.model_copy(deep=True)]
            node = pod_set.container(c.NODE)
            if node is None:
                continue
            for mount in (
                VolumeMount(name=INSTALL_VOLUME, mount_path=INSTALL_PATH),
                VolumeMount(name=SOFTWARE_VOLUME, mount_path=SOFTWARE_PATH),
                VolumeMount(name=config_map, mount_path=CONFIG_PATH, read_only=True),
                VolumeMount(name=CURVE_VOLUME, mount_path=CURVE_PATH, read_only=True),
                VolumeMount(name=MEMORY_VOLUME, mount_path=MEMORY_PATH, read_only=True),
            ):
                upsert_volume_mount(node, mount)

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        policy = flux_policy(info)
        if policy is None:
            return []
        settings = broker_settings(info, job)
        objects: list[Manifest] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": owned_metadata(job, entrypoint_name(job)),
                "data": {
                    ENTRYPOINT_KEY: entrypoint_script(info, job, policy),
                    INIT_KEY: init_script(job, settings),
                },
            }
        ]
        if not observed.exists("v1", "Secret", curve_secret_name(job)):
            if observed.keys is None:
                raise BuildError("no key source for the Flux CURVE Secret (the shell supplies one)")
            cert = curve_certificate(job.name, observed.keys.curve_secret())
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": owned_metadata(job, curve_secret_name(job)),
                    "immutable": True,
                    "data": {CURVE_KEY: base64.b64encode(cert.encode()).decode()},
                }
            )
        return objects

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        policy = flux_policy(info)
        if policy is None:
            return Validation()
        errors: list[FieldError] = []
        trainer = new.spec.trainer
        if trainer is None or trainer.num_nodes is None:  # upstream reads both; what admission accepts must build
            errors.append(
                required(
                    "spec.trainer.numNodes" if trainer is not None else "spec.trainer",
                    "must be set for a TrainJob whose runtime has mlPolicy.flux",
                )
            )
        per_node = (
            trainer.num_proc_per_node
            if trainer is not None and trainer.num_proc_per_node is not None
            else policy.num_proc_per_node
        )
        if per_node is not None and per_node < 1:
            errors.append(
                invalid("spec.trainer.numProcPerNode", per_node, "must be greater than or equal to 1 for Flux TrainJob")
            )
        node = info.pod_set(c.NODE)
        for init in (node.pod_spec.init_containers or []) if node is not None else []:
            if init.name == INSTALLER_CONTAINER:
                errors.append(
                    invalid(
                        "spec.trainer.initContainers", init.name, f"InitContainer '{INSTALLER_CONTAINER}' is reserved"
                    )
                )
        return Validation(tuple(errors))

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind("v1", "ConfigMap", "configmaps", purpose="Flux entrypoint ConfigMaps"),
            ChildKind(
                "v1",
                "Secret",
                "secrets",
                Mode.CREATE_ONCE,
                optional=True,  # as MPI's: withheld on clusters that run neither (rbac.secrets: false)
                purpose="Flux CURVE certificate Secrets (created once)",
            ),
        ]


def volumes(job: TrainJob) -> list[Volume]:
    """The five volumes of the `node` PodSet, in upstream's order."""
    config_map = entrypoint_name(job)
    return [
        Volume.model_validate(v)
        for v in (
            {"name": SOFTWARE_VOLUME, "emptyDir": {}},
            {"name": INSTALL_VOLUME, "emptyDir": {}},
            {"name": config_map, "configMap": {"name": config_map, "defaultMode": CONFIG_MAP_MODE}},
            {"name": MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
            {"name": CURVE_VOLUME, "secret": {"secretName": curve_secret_name(job), "defaultMode": CURVE_MODE}},
        )
    ]


def _trainer_or_fail(job: TrainJob) -> None:
    if job.spec.trainer is None:
        raise BuildError("spec.trainer is required for a TrainJob whose runtime has mlPolicy.flux")


def broker_settings(info: RuntimeInfo, job: TrainJob) -> dict[str, str]:
    """The defaults, then the runtime trainer `node` container's env values, then the TrainJob's env (a TrainJob
    entry wins even when it has no literal value, as upstream's)."""
    _trainer_or_fail(job)
    settings = dict(DEFAULT_SETTINGS)
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    node = trainer.container(c.NODE) if trainer is not None else None
    for var in (node.env or []) if node is not None else []:
        if var.name in settings and var.value:
            settings[var.name] = var.value
    for var in (job.spec.trainer.env or []) if job.spec.trainer is not None else []:
        if var.name in settings:
            settings[var.name] = var.value or ""
    return settings


def original_command(info: RuntimeInfo, job: TrainJob) -> str:
    """The command the entrypoint hands to `flux run`: the runtime's (or the TrainJob's) command plus the
    TrainJob's args, joined by spaces."""
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    node = trainer.container(c.NODE) if trainer is not None else None
    command = list(node.command or []) if node is not None else []
    args: list[str] = []
    if job.spec.trainer is not None:
        if job.spec.trainer.command is not None:
            command = list(job.spec.trainer.command)
        if job.spec.trainer.args is not None:
            args = list(job.spec.trainer.args)
    return " ".join(command + args).strip()


def index_range(size: int, start: int = 0) -> str:
    """Flux idset notation: `0` for one, `0-3` for four."""
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def num_nodes(job: TrainJob) -> int:
    trainer = job.spec.trainer
    if trainer is None or trainer.num_nodes is None:
        raise BuildError("spec.trainer.numNodes is required for a TrainJob whose runtime has mlPolicy.flux")
    return trainer.num_nodes


def host_list(job: TrainJob) -> str:
    """Every trainer pod's hostname as a Flux hostlist: `<tj>-node-0-[0-3]`."""
    return f"{job.name}-{c.NODE}-0-[{index_range(num_nodes(job))}]"


def lead_host(job: TrainJob) -> str:
    return f"{job.name}-{c.NODE}-0-0"


def resource_spec_and_flags(info: RuntimeInfo, job: TrainJob, policy: FluxMLPolicySource) -> tuple[str, str]:
    """`flux R encode` arguments for one node and the `flux run` flags: -N nodes, -n tasks, -g GPUs per task."""
    nodes = num_nodes(job)
    trainer = job.spec.trainer
    tasks = (
        trainer.num_proc_per_node
        if trainer is not None and trainer.num_proc_per_node is not None
        else policy.num_proc_per_node
    )
    if tasks is None:
        raise BuildError("spec.mlPolicy.flux.numProcPerNode is required")
    spec = f"--cores={index_range(tasks)}"
    flags = f"-N {nodes} -n {tasks * nodes}"
    gpus = gpu_count(decision_resources(info, job))
    if gpus > 0:
        spec += f" --gpu={index_range(gpus)}"
        flags += f" -g {gpus}"
    return spec, flags


def broker_config(job: TrainJob, settings: Mapping[str, str]) -> str:
    """The broker's TOML: bootstrap over TCP with the CURVE certificate, the R file, archive, queue policy."""
    fqdn = f"{job.name}.{job.namespace}.svc.cluster.local"
    return "\n".join(
        [
            "[access]",
            "allow-guest-user = true",
            "allow-root-owner = true",
            "",
            "[resource]",
            f'path = "{INSTALL_PATH}/config/etc/flux/system/R"',
            "",
            "[bootstrap]",
            f'curve_cert = "{INSTALL_PATH}/config/etc/curve/{CURVE_KEY}"',
            f"default_port = {BROKER_PORT}",
            f'default_bind = "tcp://{settings[SETTING_NETWORK_DEVICE]}:%p"',
            f'default_connect = "tcp://%h.{fqdn}:%p"',
            "hosts = [",
            f'{{ host="{host_list(job)}"}},',
            "]",
            "",
            "[archive]",
            f'dbpath = "{INSTALL_PATH}/config/var/lib/flux/job-archive.sqlite"',
            'period = "1m"',
            'busytimeout = "50s"',
            "",
            "[sched-fluxion-qmanager]",
            f'queue-policy = "{settings[SETTING_QUEUE_POLICY]}"',
        ]
    )


PLACEHOLDER: Final = re.compile(r"@([a-z_]+)@")


@cache
def script(name: str) -> str:
    """One of the shell scripts shipped beside this module (package data, in the wheel and the image)."""
    return resources.files(__package__).joinpath("scripts", name).read_text(encoding="utf-8")


def fill(template: str, values: Mapping[str, str]) -> str:
    """The script with each `@name@` replaced by its value, in one pass (a value is never scanned again)."""
    return PLACEHOLDER.sub(lambda found: values[found.group(1)], template)


def init_script(job: TrainJob, settings: Mapping[str, str]) -> str:
    values = {
        "view_root": VIEW_ROOT,
        "hosts": host_list(job),
        "install_path": INSTALL_PATH,
        "broker": broker_config(job, settings),
    }
    return fill(script(INIT_KEY), values)


def entrypoint_script(info: RuntimeInfo, job: TrainJob, policy: FluxMLPolicySource) -> str:
    spec, flags = resource_spec_and_flags(info, job, policy)
    values = {
        "install_path": INSTALL_PATH,
        "lead_host": lead_host(job),
        "flags": flags,
        "software_path": SOFTWARE_PATH,
        "curve_key": CURVE_KEY,
        "curve_path": CURVE_PATH,
        "resource_spec": spec,
    }
    return fill(script(ENTRYPOINT_KEY), values)
