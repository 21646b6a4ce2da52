"""Upgrading to the v2.4 behaviour (issue 12): a suspended MPI TrainJob whose JobSet was built before the
Open MPI 5 (`PRTE_MCA_*`) env existed still resumes. Upstream v2.4 cannot (its release notes tell users to
recreate such TrainJobs): JobSet refuses the new env on the existing JobSet."""

from __future__ import annotations

from typing import Any

import pytest

from builders import FIXED_KEYS
from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import TrainingRuntime
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework

pytestmark = pytest.mark.cluster

PRTE = {c.PRTE_ENV_HOSTFILE, c.PRTE_ENV_KEEP_FQDN, c.PRTE_ENV_DEFAULT_SLOTS, c.PRTE_ENV_SSH_ARGS}


def mpi_runtime(namespace: str) -> dict[str, Any]:
    def rjob(name: str, ancestor: str | None, command: list[str]) -> dict[str, Any]:
        template: dict[str, Any] = {
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"containers": [{"name": "node", "image": "mpi:runtime", "command": command}]}},
            }
        }
        if ancestor:
            template["metadata"] = {"labels": {c.ANCESTOR_LABEL: ancestor}}
        return {"name": name, "template": template}

    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINING_RUNTIME_KIND,
        "metadata": {"name": "mpi-v23", "namespace": namespace},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "runLauncherAsNode": True},
            },
            "template": {
                "spec": {
                    "replicatedJobs": [
                        rjob("launcher", c.ANCESTOR_TRAINER, ["mpirun", "hostname"]),
                        rjob("node", None, ["/usr/sbin/sshd", "-De"]),
                    ]
                }
            },
        },
    }


def launcher_env(jobset: dict[str, Any]) -> set[str]:
    launcher = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == c.LAUNCHER)
    node = next(ct for ct in launcher["template"]["spec"]["template"]["spec"]["containers"] if ct["name"] == c.NODE)
    return {e["name"] for e in node.get("env") or []}


def old_shape_jobset(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The JobSet a pre-v2.4 operator built: today's, without the PRTE env (and without an owner, which the
    test cannot know before the TrainJob exists: it adds the TrainJob's controller reference then, as the old
    operator had; the operator never adopts an object another uid or nothing controls)."""
    job = TrainJob.model_validate({**trainjob, "metadata": {**trainjob["metadata"], "uid": "0"}})
    objects = Framework.from_registry().desired_objects(
        job, RuntimeSource.of(TrainingRuntime.model_validate(runtime)), Observed(keys=FIXED_KEYS)
    )
    jobset = next(o for o in objects if o["kind"] == c.JOBSET_KIND)
    jobset["metadata"].pop("ownerReferences")
    for rjob in jobset["spec"]["replicatedJobs"]:
        for ct in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            ct["env"] = [e for e in ct.get("env") or [] if e["name"] not in PRTE]
    assert not launcher_env(jobset) & PRTE and c.OMPI_ENV_HOSTFILE in launcher_env(jobset)
    return jobset


def test_suspended_mpi_trainjob_built_before_v24_resumes(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    runtime = mpi_runtime(namespace)
    trainjob = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"name": "mpi-old", "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": "mpi-v23", "kind": c.TRAINING_RUNTIME_KIND},
            "suspend": True,
            "trainer": {"numNodes": 2},
        },
    }
    kube.apply(runtime)
    old = old_shape_jobset(trainjob, runtime)
    kube.create(old, namespace=namespace)
    old_uid = eventually(
        lambda: (kube.get("jobset", "mpi-old", namespace) or {}).get("metadata", {}).get("uid"), "the old-shape JobSet"
    )
    # JobSet itself refuses the v2.4 env on that JobSet: what upstream v2.4 runs into.
    refused = kube.run(
        "patch",
        "jobset",
        "mpi-old",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op": "add", "path": "/spec/replicatedJobs/0/template/spec/template/spec/containers/0/env/-",'
        f' "value": {{"name": "{c.PRTE_ENV_HOSTFILE}", "value": "/etc/mpi/hostfile"}}}}]',
        check=False,
    )
    assert refused.returncode != 0 and "immutable" in refused.stderr, refused.stderr

    kube.apply(trainjob)
    tj_uid = eventually(
        lambda: (kube.get("trainjob", "mpi-old", namespace) or {}).get("metadata", {}).get("uid"), "the TrainJob"
    )
    owner = {"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "name": "mpi-old", "uid": tj_uid}
    kube.patch(
        "jobset",
        "mpi-old",
        namespace,
        {"metadata": {"ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}]}},
    )

    # While the TrainJob stays suspended the old-shape JobSet is kept as it is (taking over suspended JobSets
    # re-creates none); the operator has seen it refuse the update by then.
    eventually(
        lambda: (t := kube.get("trainjob", "mpi-old", namespace)) and (t.get("status") or {}).get("state"),
        "the TrainJob reconciled",
    )
    kept = kube.get("jobset", "mpi-old", namespace)
    assert kept is not None and kept["metadata"]["uid"] == old_uid and kept["spec"]["suspend"] is True

    kube.patch("trainjob", "mpi-old", namespace, {"spec": {"suspend": False}})

    def rebuilt() -> dict[str, Any] | None:
        js = kube.get("jobset", "mpi-old", namespace)
        return (
            js
            if js and js["metadata"]["uid"] != old_uid and launcher_env(js) >= PRTE and not js["spec"].get("suspend")
            else None
        )

    resumed = eventually(rebuilt, "the JobSet rebuilt in the v2.4 shape on resume, running")
    assert [r["uid"] for r in resumed["metadata"]["ownerReferences"]] == [tj_uid]
    # Resumed: the Suspended condition is removed (docs/compatibility.md D18), so the SDK sees Running.
    tj = eventually(
        lambda: (
            (t := kube.get("trainjob", "mpi-old", namespace))
            and condition(t, c.CONDITION_SUSPENDED) is None
            and (t.get("status") or {}).get("state") == "Running"
            and t
        ),
        "the TrainJob Running",
    )
    assert condition(tj, c.CONDITION_RECONCILE_FAILED) is None
