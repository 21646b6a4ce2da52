"""MPI (OpenMPI): SSH key Secret, hostfile ConfigMap, OMPI env, runLauncherAsNode (docs/upstream-behaviour.md#mpi)."""

import base64
from typing import ClassVar

from ...api import constants as c
from ...api.core import EnvVar, Volume, VolumeMount
from ...api.runtime import MPIMLPolicySource
from ...api.trainjob import TrainJob
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
from ..info import PodSet, RuntimeInfo, merge_node_resources
from ..limits import CONFIGMAP_DATA_LIMIT, hosts_bytes, too_large
from ..manifests import owned_metadata
from ..observed import Observed
from ..resources import gpu_count
from ..upsert import upsert_env, upsert_volume, upsert_volume_mount
from .common import decision_resources, pod_hosts

OPEN_MPI = "OpenMPI"


def ssh_secret_name(job: TrainJob) -> str:
    return f"{job.name}-mpi-ssh-auth"


def hostfile_name(job: TrainJob) -> str:
    return f"{job.name}-mpi-hostfile"


def slots(info: RuntimeInfo, job: TrainJob, policy: MPIMLPolicySource) -> int:
    if job.spec.trainer is not None and job.spec.trainer.num_proc_per_node is not None:
        return job.spec.trainer.num_proc_per_node
    runtime_slots = policy.num_proc_per_node if policy.num_proc_per_node is not None else 1
    gpus = gpu_count(decision_resources(info, job))
    if runtime_slots == 1 and gpus > 1:
        return gpus
    return runtime_slots


class MPI(ClaimsTrainer, EnforceMLPolicy, ComponentBuilder, CustomValidation, OwnsKinds):
    name: ClassVar[str] = "MPI"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return info.ml_policy is not None and info.ml_policy.mpi is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        policy = info.ml_policy.mpi if info.ml_policy is not None else None
        if policy is None:
            return
        if policy.mpi_implementation != OPEN_MPI:
            raise BuildError(f"MPI implementation for {policy.mpi_implementation} doesn't supported")
        resources = job.spec.trainer.resources_per_node if job.spec.trainer is not None else None
        node_set = info.pod_set(c.NODE)
        # The launcher runs as a node: `node` gets the TrainJob's resources too (a trainer's got them already).
        node_outside_trainer = node_set if node_set is not None and node_set.ancestor != c.ANCESTOR_TRAINER else None
        if policy.run_launcher_as_node and resources is not None and node_outside_trainer is not None:
            merge_node_resources(node_outside_trainer.job, resources)
        if node_set is not None:
            node_set.count = node_count(job, policy, node_set.count)
        secret_volume = Volume.model_validate(
            {
                "name": c.MPI_SSH_AUTH_VOLUME,
                "secret": {
                    "secretName": ssh_secret_name(job),
                    "defaultMode": 0o400,
                    "items": [
                        {"key": c.MPI_SSH_PRIVATE_KEY, "path": "id_rsa", "mode": 0o640},
                        {"key": c.MPI_SSH_PUBLIC_KEY, "path": "id_rsa.pub", "mode": 0o644},
                        {"key": c.MPI_SSH_PUBLIC_KEY, "path": "authorized_keys", "mode": 0o644},
                    ],
                },
            }
        )
        hostfile_volume = Volume.model_validate(
            {
                "name": c.MPI_HOSTFILE_VOLUME,
                "configMap": {
                    "name": hostfile_name(job),
                    "items": [{"key": c.MPI_HOSTFILE_NAME, "path": c.MPI_HOSTFILE_NAME, "mode": 0o444}],
                },
            }
        )
        ssh_mount = VolumeMount(name=c.MPI_SSH_AUTH_VOLUME, mount_path=policy.ssh_auth_mount_path or "/root/.ssh")
        image = job.spec.trainer.image if job.spec.trainer is not None else None
        for pod_set in (info.pod_set(c.NODE), info.pod_set(c.LAUNCHER)):
            if pod_set is None:
                continue
            upsert_volume(pod_set.pod_spec, secret_volume)
            node = pod_set.container(c.NODE)
            if node is not None and image:
                # v2.4 (#4301): the TrainJob's image runs every MPI rank, on the launcher and on the nodes.
                node.image = image
            if node is not None:
                upsert_volume_mount(node, ssh_mount)
            if pod_set.name != c.LAUNCHER:
                continue
            upsert_volume(pod_set.pod_spec, hostfile_volume)
            if node is not None:
                upsert_volume_mount(node, VolumeMount(name=c.MPI_HOSTFILE_VOLUME, mount_path=c.MPI_HOSTFILE_DIR))
                upsert_env(node, launcher_env(str(slots(info, job, policy))))

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        policy = info.ml_policy.mpi if info.ml_policy is not None else None
        if policy is None:
            return []
        objects: list[Manifest] = []
        if not observed.exists("v1", "Secret", ssh_secret_name(job)):
            if observed.keys is None:
                raise BuildError("no key source for the MPI SSH Secret (the shell supplies one)")
            key = observed.keys.ssh_key()
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": owned_metadata(job, ssh_secret_name(job)),
                    "type": "kubernetes.io/ssh-auth",
                    "immutable": True,
                    "data": {
                        c.MPI_SSH_PRIVATE_KEY: base64.b64encode(key.private_pem).decode(),
                        c.MPI_SSH_PUBLIC_KEY: base64.b64encode(key.public_openssh).decode(),
                    },
                }
            )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": owned_metadata(job, hostfile_name(job)),
                "data": {c.MPI_HOSTFILE_NAME: hostfile(info, job, policy)},
            }
        )
        return objects

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        policy = info.ml_policy.mpi if info.ml_policy is not None else None
        trainer = new.spec.trainer
        if policy is None or trainer is None:
            return Validation()
        errors: list[FieldError] = []
        if (
            (trainer.num_nodes or 0) >= 2
            and policy.run_launcher_as_node
            and (info.pod_set(c.LAUNCHER) is None or info.pod_set(c.NODE) is None)
        ):
            errors.append(
                invalid(
                    "spec.trainer.numNodes",
                    trainer.num_nodes,
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not "
                    "have either launcher and node",
                )
            )
        node_set = info.pod_set(c.NODE)
        if node_set is not None:
            errors += hostfile_size_errors(info, new, policy, node_count(new, policy, node_set.count))
        reserved = sorted({e.name for e in trainer.env or []} & c.OMPI_RESERVED_ENVS)
        if reserved:
            errors.append(
                invalid(
                    "spec.trainer.env",
                    [e.to_wire() for e in trainer.env or []],
                    f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
                )
            )
        return Validation(tuple(errors))

    def kinds(self) -> list[ChildKind]:
        return [
            # Optional: a cluster that runs no MPI may withhold Secrets (the chart's rbac.secrets: false); then
            # start-up warns, and an MPI TrainJob's Secret create is refused with an Event saying so.
            ChildKind(
                "v1",
                "Secret",
                "secrets",
                Mode.CREATE_ONCE,
                optional=True,
                purpose="MPI SSH key Secrets (created once)",
            ),
            ChildKind("v1", "ConfigMap", "configmaps", purpose="MPI hostfile ConfigMaps"),
        ]


def launcher_env(slots_per_node: str) -> list[EnvVar]:
    """The Open MPI settings of the launcher's `node` container: ORTE names (Open MPI 4) and PRTE names (5)."""
    hostfile_path = f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}"
    return [
        EnvVar(name=c.OMPI_ENV_HOSTFILE, value=hostfile_path),
        EnvVar(name=c.OMPI_ENV_KEEP_FQDN, value="true"),
        EnvVar(name=c.OMPI_ENV_DEFAULT_SLOTS, value=slots_per_node),
        EnvVar(name=c.OMPI_ENV_RSH_ARGS, value=c.MPI_SSH_ARGS),
        EnvVar(name=c.PRTE_ENV_HOSTFILE, value=hostfile_path),
        # false, not mirrored: the hostfile's short `<pod>.<subdomain>` names never match what PRTE resolves for
        # itself, and with `true` PRTE takes the launcher's own entry for a remote host and SSHes to itself.
        EnvVar(name=c.PRTE_ENV_KEEP_FQDN, value="false"),
        EnvVar(name=c.PRTE_ENV_DEFAULT_SLOTS, value=slots_per_node),
        EnvVar(name=c.PRTE_ENV_SSH_ARGS, value=c.MPI_SSH_ARGS),
    ]


def hostfile_pod_sets(info: RuntimeInfo, policy: MPIMLPolicySource) -> list[PodSet]:
    return [p for p in info.pod_sets if p.name == c.NODE or (p.name == c.LAUNCHER and policy.run_launcher_as_node)]


def node_count(job: TrainJob, policy: MPIMLPolicySource, runtime_count: int) -> int:
    """The pods of `node`: the TrainJob's numNodes (less the launcher when it runs as a node), else the runtime's."""
    num_nodes = job.spec.trainer.num_nodes if job.spec.trainer is not None else None
    if num_nodes is None:
        return runtime_count
    return max(num_nodes - 1, 1) if policy.run_launcher_as_node else num_nodes


def hostfile_size_errors(
    info: RuntimeInfo, job: TrainJob, policy: MPIMLPolicySource, nodes: int | None = None
) -> list[FieldError]:
    """The hostfile within a ConfigMap's limit, computed without writing it (`nodes`: the pods of `node` when the
    ML policy has not set them yet, as in admission)."""
    line_end = len(f" slots={slots(info, job, policy)}\n")
    size = sum(
        hosts_bytes(info, job, p, line_end, nodes if p.name == c.NODE else None)
        for p in hostfile_pod_sets(info, policy)
    )
    if size <= CONFIGMAP_DATA_LIMIT:
        return []
    asked = job.spec.trainer.num_nodes if job.spec.trainer is not None else None
    return [too_large(f"MPI hostfile (ConfigMap {hostfile_name(job)})", size, CONFIGMAP_DATA_LIMIT, asked or 0)]


def hostfile(info: RuntimeInfo, job: TrainJob, policy: MPIMLPolicySource) -> str:
    """One `<endpoint> slots=N` line per pod of `node` (and `launcher` with runLauncherAsNode), template order.
    Raises BuildError past a ConfigMap's limit, before any line is made."""
    too_large_errors = hostfile_size_errors(info, job, policy)
    if too_large_errors:
        raise BuildError(str(too_large_errors[0]))
    per_node = slots(info, job, policy)
    lines = []
    for pod_set in info.pod_sets:
        if pod_set.name != c.NODE and not (pod_set.name == c.LAUNCHER and policy.run_launcher_as_node):
            continue
        lines += [f"{host} slots={per_node}\n" for host in pod_hosts(info, job, pod_set)]
    return "".join(lines)
