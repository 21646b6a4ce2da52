"""TrainJobStatus: trainer pods get what `kubeflow.trainer.update_trainjob_status()` needs to report progress —
the status server's URL, its CA (a `<tj>-tls-config` ConfigMap) and a projected ServiceAccount token whose
audience names this one TrainJob (upstream's plugin of the same name, docs/upstream-behaviour.md#status)."""

from typing import ClassVar

from ...api import constants as c
from ...api.core import EnvVar, Volume, VolumeMount
from ...api.trainjob import TrainJob
from ..errors import BuildError
from ..framework import ComponentBuilder, EnforcePodSpec, Manifest
from ..info import RuntimeInfo
from ..manifests import owned_metadata
from ..observed import Observed
from ..progress import status_path, token_audience
from ..upsert import upsert_env, upsert_volume, upsert_volume_mount


def tls_config_name(job: TrainJob) -> str:
    return f"{job.name}{c.STATUS_TLS_CONFIG_SUFFIX}"


def status_env(job: TrainJob, base_url: str) -> list[EnvVar]:
    return [
        EnvVar(name=c.STATUS_ENV_URL, value=base_url.rstrip("/") + status_path(job.namespace, job.name)),
        EnvVar(name=c.STATUS_ENV_CA_CERT, value=f"{c.STATUS_MOUNT_PATH}/{c.STATUS_CA_KEY}"),
        EnvVar(name=c.STATUS_ENV_TOKEN, value=f"{c.STATUS_MOUNT_PATH}/{c.STATUS_TOKEN_FILE}"),
    ]


def token_volume(job: TrainJob) -> Volume:
    return Volume.model_validate(
        {
            "name": c.STATUS_TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": token_audience(job.namespace, job.name),
                            "expirationSeconds": c.STATUS_TOKEN_EXPIRY_SECONDS,
                            "path": c.STATUS_TOKEN_FILE,
                        }
                    },
                    {
                        "configMap": {
                            "name": tls_config_name(job),
                            "items": [{"key": c.STATUS_CA_KEY, "path": c.STATUS_CA_KEY}],
                        }
                    },
                ]
            },
        }
    )


class TrainJobStatusBuilder(EnforcePodSpec, ComponentBuilder):
    name: ClassVar[str] = "TrainJobStatus"

    def enforce_pod_spec(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> None:
        if observed.status_server is None:
            return
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        if trainer is None:
            return
        env = status_env(job, observed.status_server.base_url)
        mount = VolumeMount(name=c.STATUS_TOKEN_VOLUME, mount_path=c.STATUS_MOUNT_PATH, read_only=True)
        for container in trainer.pod_spec.containers:
            upsert_env(container, env)
            upsert_volume_mount(container, mount)
        upsert_volume(trainer.pod_spec, token_volume(job))

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        server = observed.status_server
        if server is None:
            return []
        if not server.ca_pem:
            raise BuildError("failed to find status server ca.crt in tls secret")
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": owned_metadata(job, tls_config_name(job)),
                "data": {c.STATUS_CA_KEY: server.ca_pem},
            }
        ]
