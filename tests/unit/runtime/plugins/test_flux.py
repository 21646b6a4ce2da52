"""Flux (mlPolicy.flux, KEP-2841): what upstream v2.3.0's Flux plugin builds, as whole objects.

Expected values come from upstream v2.3.0's output for the same inputs (its unit table and examples/flux); the
two scripts are compared by what they are built from (tests/flux_digest.py), the rest byte for byte.
"""

import base64
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import (
    FIXED_KEYS,
    RuntimeBuilder,
    TrainJobBuilder,
    by_kind,
    container,
    jobset_of,
    pod_spec,
    replicated_job,
)
from flux_digest import curve_cert_digest, flux_configmap_digest
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.observed import ObjectRef, Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.flux import curve_certificate, curve_keys, z85

FRAMEWORK = Framework.from_registry()
OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "test-job",
    "uid": "uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
# upstream v2.3.0's curve keys for a TrainJob whose uid is "uid" (oracle of examples/flux, any TrainJob name): its
# secret is sha256(uid); ours comes from the key source (docs/compatibility.md), the encoding is the same
UID_PUBLIC = "FNBl8Hqa!mZdJi}CLdIjQ<Oz%8nV=E2?nwPs7of&"
UID_SECRET = "7Q]i#4^.x]fuU}0j*C<sfq%=FxUJ^For{siHd?dg"


def flux_runtime(num_proc: int | None = None, **node: Any) -> RuntimeBuilder:
    """upstream's examples/flux/flux-runtime.yaml: one `node` job (ancestor trainer), `flux: {}`."""
    flux: dict[str, Any] = {} if num_proc is None else {"numProcPerNode": num_proc}
    jobs = [replicated_job("node", "trainer", [container("node", "ubuntu:jammy", **node)])]
    return RuntimeBuilder.make().jobs(jobs).ml_policy(num_nodes=1, flux=flux)


def render(job: TrainJobBuilder, runtime: RuntimeBuilder, observed: Observed | None = None) -> list[dict[str, Any]]:
    return FRAMEWORK.desired_objects(job.obj(), runtime.source(), observed or Observed(keys=FIXED_KEYS))


def volumes(job: str = "test-job") -> list[dict[str, Any]]:
    return [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {"name": f"{job}-flux-entrypoint", "configMap": {"name": f"{job}-flux-entrypoint", "defaultMode": 493}},
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": f"{job}-flux-curve", "defaultMode": 256}},
    ]


def installer(image: str = VIEW_IMAGE, job: str = "test-job") -> dict[str, Any]:
    return {
        "name": "flux-installer",
        "image": image,
        "command": ["/bin/bash", "/etc/flux-config/init.sh"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": "/mnt/flux"},
            {"name": f"{job}-flux-entrypoint", "mountPath": "/etc/flux-config", "readOnly": True},
        ],
    }


def node_mounts(job: str = "test-job") -> list[dict[str, Any]]:
    return [
        {"name": "flux-install", "mountPath": "/mnt/flux"},
        {"name": "spack-install", "mountPath": "/opt/software"},
        {"name": f"{job}-flux-entrypoint", "mountPath": "/etc/flux-config", "readOnly": True},
        {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
        {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
    ]


def broker(hosts: str, bind: str = "eth0", queue: str = "fcfs", job: str = "test-job") -> dict[str, Any]:
    return {
        "access": {"allow-guest-user": True, "allow-root-owner": True},
        "resource": {"path": "/mnt/flux/config/etc/flux/system/R"},
        "bootstrap": {
            "curve_cert": "/mnt/flux/config/etc/curve/curve.cert",
            "default_port": 8050,
            "default_bind": f"tcp://{bind}:%p",
            "default_connect": f"tcp://%h.{job}.default.svc.cluster.local:%p",
            "hosts": [{"host": hosts}],
        },
        "archive": {"dbpath": "/mnt/flux/config/var/lib/flux/job-archive.sqlite", "period": "1m", "busytimeout": "50s"},
        "sched-fluxion-qmanager": {"queue-policy": queue},
    }


def test_flux_builds_the_jobset_configmap_and_secret_of_upstream() -> None:
    """examples/flux/lammps-train-gpus.yaml against examples/flux/flux-runtime.yaml (upstream v2.3.0's output)."""
    job = TrainJobBuilder.make().trainer(
        numNodes=2,
        image="ghcr.io/flux-framework/tutorials:gpu-lammps-hwloc",
        command=["lmp_gpu", "-k", "on", "g", "8"],
        args=["-in", "in.reaxff.hns", "-nocite"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
        env=[{"name": "OMPI_MCA_btl", "value": "tcp,self"}, {"name": "FLUX_VIEW_IMAGE", "value": VIEW_IMAGE}],
    )
    objects = render(job, flux_runtime())
    assert [o["kind"] for o in objects] == ["ConfigMap", "Secret", "JobSet"]
    assert rjob_spec(jobset_of(objects)) == {
        "parallelism": 2,
        "completions": 2,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "node",
                        "image": "ghcr.io/flux-framework/tutorials:gpu-lammps-hwloc",
                        "command": [
                            "/bin/bash",
                            "/etc/flux-config/entrypoint.sh",
                            "lmp_gpu -k on g 8 -in in.reaxff.hns -nocite",
                        ],
                        "env": [
                            {"name": "OMPI_MCA_btl", "value": "tcp,self"},
                            {"name": "FLUX_VIEW_IMAGE", "value": VIEW_IMAGE},
                        ],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                        "volumeMounts": node_mounts(),
                    }
                ],
                "initContainers": [installer()],
                "volumes": volumes(),
            }
        },
    }
    (configmap,) = by_kind(objects, "ConfigMap")
    assert {k: v for k, v in configmap.items() if k != "data"} == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "test-job-flux-entrypoint", "namespace": "default", "ownerReferences": [OWNER]},
    }
    assert flux_configmap_digest(configmap["data"]) == {
        "keys": ["entrypoint.sh", "init.sh"],
        "broker.toml": broker("test-job-node-0-[0-1]"),
        "hostlist": "test-job-node-0-[0-1]",
        "lead host": "test-job-node-0-0",
        "flux run flags": ["-N", "2", "-n", "2", "-g", "1"],
        "resources": "--cores=0 --gpu=0",
    }
    (secret,) = by_kind(objects, "Secret")
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "test-job-flux-curve", "namespace": "default", "ownerReferences": [OWNER]},
        "immutable": True,
        "data": {"curve.cert": base64.b64encode(curve_certificate("test-job", FIXED_KEYS.curve).encode()).decode()},
    }
    cert = base64.b64decode(secret["data"]["curve.cert"]).decode()
    assert f'secret-key = "{z85(FIXED_KEYS.curve)}"' in cert, "the key source's secret, not one derived from the uid"
    assert curve_cert_digest(secret["data"]["curve.cert"]) == {
        "name": "test-job",
        "sections": ["metadata", "curve"],
        "key pair": True,
    }


def rjob_spec(jobset: dict[str, Any]) -> dict[str, Any]:
    (node,) = jobset["spec"]["replicatedJobs"]
    spec: dict[str, Any] = node["template"]["spec"]
    return spec


@dataclass
class ScriptCase:
    trainer: dict[str, Any]
    runtime: RuntimeBuilder = field(default_factory=flux_runtime)
    hosts: str = "test-job-node-0-[0-1]"
    flags: list[str] = field(default_factory=lambda: ["-N", "2", "-n", "2"])
    resources: str = "--cores=0"
    bind: str = "eth0"
    queue: str = "fcfs"
    image: str = VIEW_IMAGE


SCRIPT_CASES = {
    "numProcPerNode 4 of the TrainJob on two nodes: 8 tasks, cores 0-3 (examples/flux/lammps-train-job)": ScriptCase(
        {"numNodes": 2, "numProcPerNode": 4}, flags=["-N", "2", "-n", "8"], resources="--cores=0-3"
    ),
    "the runtime's numProcPerNode when the TrainJob sets none": ScriptCase(
        {"numNodes": 3},
        runtime=flux_runtime(num_proc=2),
        hosts="test-job-node-0-[0-2]",
        flags=["-N", "3", "-n", "6"],
        resources="--cores=0-1",
    ),
    "one node: a host list of one index": ScriptCase(
        {"numNodes": 1}, hosts="test-job-node-0-[0]", flags=["-N", "1", "-n", "1"]
    ),
    "GPUs in the runtime's node container limits: -g per task and --gpu=0-1": ScriptCase(
        {"numNodes": 2},
        runtime=flux_runtime(resources={"limits": {"nvidia.com/gpu": 2}}),
        flags=["-N", "2", "-n", "2", "-g", "2"],
        resources="--cores=0 --gpu=0-1",
    ),
    "GPU requests of the TrainJob replace the runtime's resources": ScriptCase(
        {"numNodes": 2, "resourcesPerNode": {"requests": {"amd.com/gpu": 4}}},
        runtime=flux_runtime(resources={"limits": {"nvidia.com/gpu": 2}}),
        flags=["-N", "2", "-n", "2", "-g", "4"],
        resources="--cores=0 --gpu=0-3",
    ),
    "broker settings from the runtime's node env": ScriptCase(
        {"numNodes": 2},
        runtime=flux_runtime(
            env=[
                {"name": "FLUX_NETWORK_DEVICE", "value": "eth1"},
                {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
                {"name": "FLUX_VIEW_IMAGE", "value": "ghcr.io/converged-computing/flux-view-rocky:tag-9"},
            ]
        ),
        bind="eth1",
        queue="easy",
        image="ghcr.io/converged-computing/flux-view-rocky:tag-9",
    ),
    "the TrainJob's env wins over the runtime's": ScriptCase(
        {"numNodes": 2, "env": [{"name": "FLUX_QUEUE_POLICY", "value": "conservative"}]},
        runtime=flux_runtime(env=[{"name": "FLUX_QUEUE_POLICY", "value": "easy"}]),
        queue="conservative",
    ),
}


@pytest.mark.parametrize("case", SCRIPT_CASES.values(), ids=SCRIPT_CASES.keys())
def test_flux_scripts_and_installer_image(case: ScriptCase) -> None:
    objects = render(TrainJobBuilder.make().trainer(**case.trainer), case.runtime)
    (configmap,) = by_kind(objects, "ConfigMap")
    assert flux_configmap_digest(configmap["data"]) == {
        "keys": ["entrypoint.sh", "init.sh"],
        "broker.toml": broker(case.hosts, case.bind, case.queue),
        "hostlist": case.hosts,
        "lead host": "test-job-node-0-0",
        "flux run flags": case.flags,
        "resources": case.resources,
    }
    assert pod_spec(jobset_of(objects), "node")["initContainers"] == [installer(case.image)]


COMMAND_CASES = {
    "the TrainJob's command and args become one argument; its args are not copied": (
        {"command": ["lmp", "-v", "x", "4"], "args": ["-in", "in.hns"]},
        {},
        ["lmp -v x 4 -in in.hns"],
        None,
    ),
    "the runtime's command is wrapped when the TrainJob has none; the runtime's args stay on the container": (
        {"args": ["--steps", "10"]},
        {"command": ["python", "train.py"], "args": ["--runtime-arg"]},
        ["python train.py --steps 10"],
        ["--runtime-arg"],
    ),
    "no command anywhere: an empty command (the lead starts an interactive broker)": ({}, {}, [""], None),
}


@pytest.mark.parametrize(("trainer", "node", "wrapped", "args"), COMMAND_CASES.values(), ids=COMMAND_CASES.keys())
def test_flux_wraps_the_trainer_command(
    trainer: dict[str, Any], node: dict[str, Any], wrapped: list[str], args: list[str] | None
) -> None:
    objects = render(TrainJobBuilder.make().trainer(numNodes=2, **trainer), flux_runtime(**node))
    (ctr,) = pod_spec(jobset_of(objects), "node")["containers"]
    assert ctr["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", *wrapped]
    assert ctr.get("args") == args


def test_runtime_volumes_and_mounts_of_the_same_name_or_path_are_replaced_not_doubled() -> None:
    runtime = flux_runtime(volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}]).job(
        "node", "template.spec.template.spec.volumes", [{"name": "shared-memory", "emptyDir": {}}]
    )
    pod = pod_spec(jobset_of(render(TrainJobBuilder.make().trainer(numNodes=1), runtime)), "node")
    # upserts keep the runtime's entry's place (volumes by name, mounts by mountPath)
    assert pod["volumes"] == [volumes()[3], *volumes()[:3], volumes()[4]]
    assert pod["containers"][0]["volumeMounts"] == [node_mounts()[4], *node_mounts()[:4]]


def test_flux_objects_only_for_the_job_named_node() -> None:
    jobs = [
        replicated_job("launcher", None, [container("node")]),
        replicated_job("node", "trainer", [container("node")]),
    ]
    objects = render(
        TrainJobBuilder.make().trainer(numNodes=1), RuntimeBuilder.make().jobs(jobs).ml_policy(num_nodes=1, flux={})
    )
    assert "initContainers" not in pod_spec(jobset_of(objects), "launcher")
    assert "volumes" not in pod_spec(jobset_of(objects), "launcher")
    assert pod_spec(jobset_of(objects), "node")["initContainers"] == [installer()]


def test_curve_secret_is_not_rebuilt_when_it_exists() -> None:
    objects = render(
        TrainJobBuilder.make().trainer(numNodes=1),
        flux_runtime(),
        Observed(existing=frozenset({ObjectRef("v1", "Secret", "test-job-flux-curve")})),
    )
    assert [o["kind"] for o in objects] == ["ConfigMap", "JobSet"]


def test_runtimes_without_flux_get_nothing_of_it() -> None:
    objects = render(
        TrainJobBuilder.make().trainer(numNodes=1, command=["python"]), RuntimeBuilder.make().ml_policy(num_nodes=1)
    )
    assert [o["kind"] for o in objects] == ["JobSet"]
    assert pod_spec(jobset_of(objects), "node")["containers"][0]["command"] == ["python"]


ERROR_CASES = {
    "no trainer": (TrainJobBuilder.make(), "spec.trainer is required for a TrainJob whose runtime has mlPolicy.flux"),
    "no trainer.numNodes": (
        TrainJobBuilder.make().trainer(image="x"),
        "spec.trainer.numNodes is required for a TrainJob whose runtime has mlPolicy.flux",
    ),
}


@pytest.mark.parametrize(("job", "message"), ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_flux_build_errors_name_the_missing_field(job: TrainJobBuilder, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        render(job, flux_runtime())


def test_a_runtime_with_its_own_flux_installer_is_refused_by_the_trainjob_webhook() -> None:
    runtime = flux_runtime().job(
        "node", "template.spec.template.spec.initContainers", [container("flux-installer", "mine")]
    )
    result = FRAMEWORK.validate(None, TrainJobBuilder.make().trainer(numNodes=1).obj(), runtime.source())
    assert [str(e) for e in result.errors] == [
        "spec.trainer.initContainers: Invalid value: \"flux-installer\": InitContainer 'flux-installer' is reserved"
    ]


def test_z85_and_curve_keys_follow_zeromq_and_upstream() -> None:
    # ZeroMQ RFC 32's test vector
    assert z85(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"
    assert curve_keys(hashlib.sha256(b"uid").digest()) == (UID_PUBLIC, UID_SECRET)


def test_the_curve_key_is_drawn_from_the_key_source_and_nobody_can_derive_it_from_the_uid() -> None:
    """Issue 33: upstream's secret is sha256(uid), and the uid is readable by anyone who can get the TrainJob (or its
    JobSet's ownerReferences); with it any pod that reaches the broker port could join the Flux instance. The key
    comes from the key source; two TrainJobs (or two offline renders) never share one."""
    from trainjob_operator.keys import FRESH_KEYS

    def secret_key(observed: Observed) -> str:
        (secret,) = by_kind(render(TrainJobBuilder.make().trainer(numNodes=1), flux_runtime(), observed), "Secret")
        assert curve_cert_digest(secret["data"]["curve.cert"])["key pair"]
        found = re.search(r'secret-key = "([^"]*)"', base64.b64decode(secret["data"]["curve.cert"]).decode())
        assert found is not None
        return found.group(1)

    first, second = secret_key(Observed(keys=FRESH_KEYS)), secret_key(Observed(keys=FRESH_KEYS))
    assert first != second and UID_SECRET not in (first, second)
    assert z85(hashlib.sha256(b"uid").digest()) not in (first, second)
    with pytest.raises(BuildError, match="no key source for the Flux CURVE Secret"):
        render(TrainJobBuilder.make().trainer(numNodes=1), flux_runtime(), Observed())
