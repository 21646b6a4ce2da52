"""The generated CRDs on a real kube-apiserver: accepted, defaulting, pruning nothing, rejecting bad objects
with our messages. Applied server-side, as the operator's install does (client-side apply works too: with their
descriptions each CRD is < 230 KB of JSON, under the 256 KiB last-applied-configuration annotation limit).
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest

from cluster_fixtures import wait_for
from harness import cluster as cluster_lib
from trainjob_dev import crdgen
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

CRD_NAMES = [kind.name for kind in crdgen.KINDS]


@pytest.fixture(scope="module")
def crds(cluster: Any) -> Any:
    """Our CRDs, applied (taking over from any upstream copy the cluster was started with) and established."""
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=trainjob-operator-crdgen-test",
        "-f",
        str(crdgen.CRD_DIR),
    )
    wait_for(
        lambda: cluster_lib.crds_established(cluster, c.GROUP, len(CRD_NAMES)), timeout=60, what="our CRDs Established"
    )
    return cluster


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _create(cluster: Any, obj: dict[str, Any], namespace: str | None = None) -> Any:
    """`kubectl create`; the CompletedProcess (check=False) so rejections can be inspected."""
    args = ["create", "-o", "json", "-f", "-"] + (["-n", namespace] if namespace else [])
    return cluster.kubectl(*args, input=json.dumps(obj), check=False)


def _created(cluster: Any, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    proc = _create(cluster, obj, namespace)
    assert proc.returncode == 0, proc.stderr
    created: dict[str, Any] = json.loads(proc.stdout)
    return created


def _rejected(cluster: Any, obj: dict[str, Any], namespace: str | None = None) -> str:
    proc = _create(cluster, obj, namespace)
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    stderr: str = proc.stderr
    return stderr


def torch_runtime(name: str, kind: str = c.CLUSTER_TRAINING_RUNTIME_KIND) -> dict[str, Any]:
    """A torch-distributed runtime like upstream's default one."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": {c.FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {c.ANCESTOR_LABEL: c.ANCESTOR_TRAINER}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "pytorch/pytorch",
                                                    "command": ["torchrun", "train.py"],
                                                    "ports": [{"containerPort": 29400}],
                                                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                                                    "securityContext": {"runAsNonRoot": True},
                                                }
                                            ],
                                            "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                        }
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def unmanaged_trainjob(name: str, **spec: Any) -> dict[str, Any]:
    """A TrainJob our operator leaves alone (managed by MultiKueue, suspended), should one run in the cluster."""
    return trainjob(name, managedBy=c.MULTIKUEUE_MANAGED_BY, suspend=True, **spec)


def printed(cluster: Any, kind: str, name: str, namespace: str) -> dict[str, str]:
    """`kubectl get` of one object as {column: value}: the printer columns as the API server renders them."""
    header, row = cluster.kubectl("get", kind, name, "-n", namespace).stdout.splitlines()[:2]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


def test_crds_are_established_and_structural(crds: Any) -> None:
    for name in CRD_NAMES:
        got = crds.kubectl_json("get", "crd", name)
        conditions = {cond["type"]: cond["status"] for cond in got["status"]["conditions"]}
        assert conditions.get("Established") == "True", got["status"]
        assert conditions.get("NamesAccepted") == "True", got["status"]
        assert "NonStructuralSchema" not in conditions, got["status"]


def test_a_torch_runtime_is_accepted_defaulted_and_unpruned(crds: Any) -> None:
    runtime = torch_runtime(_unique("torch"))
    created = _created(crds, runtime)
    try:
        job = created["spec"]["template"]["spec"]["replicatedJobs"][0]
        assert job["replicas"] == 1
        assert job["groupName"] == "default"
        pod = job["template"]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["ports"] == [{"containerPort": 29400, "protocol": "TCP"}]
        assert container["securityContext"] == {"runAsNonRoot": True}
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
        assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert job["template"]["metadata"]["labels"] == {c.ANCESTOR_LABEL: c.ANCESTOR_TRAINER}
        assert created["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    finally:
        crds.kubectl("delete", "clustertrainingruntime", runtime["metadata"]["name"], check=False)


def test_a_namespaced_runtime_is_accepted(crds: Any, namespace: str) -> None:
    runtime = torch_runtime("torch-distributed", kind=c.TRAINING_RUNTIME_KIND)
    runtime["spec"]["mlPolicy"] = {"numNodes": 2, "mpi": {}}
    created = _created(crds, runtime, namespace)
    assert created["spec"]["mlPolicy"]["mpi"] == {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda spec: spec["mlPolicy"].update(mpi={}),
            "Only one of the policy can be configured",
            id="two-ml-policies",
        ),
        pytest.param(
            lambda spec: spec["mlPolicy"]["torch"].update(
                envInjection={"targets": [{"jobName": "node", "containerNames": ["node"]}]}
            ),
            "containerNames must not include the main node container because PET_* envs are always injected into it",
            id="env-injection-into-node",
        ),
        pytest.param(
            lambda spec: spec["mlPolicy"].update(torch=None, mpi={"numProcPerNode": 0}),
            "NumProcPerNode in mpiPolicy must be >= 1",
            id="mpi-num-proc-0",
        ),
        pytest.param(
            lambda spec: (
                spec["template"]["spec"].update(startupPolicy={"startupPolicyOrder": "InOrder"}),
                spec["template"]["spec"]["replicatedJobs"][0].update(
                    dependsOn=[{"name": "init", "status": "Complete"}]
                ),
            ),
            "StartupPolicy and DependsOn APIs are mutually exclusive",
            id="startup-policy-and-depends-on",
        ),
        pytest.param(
            lambda spec: spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].update(
                containers=[{"name": "node", "ports": [{"containerPort": "x"}]}]
            ),
            "containerPort",
            id="typed-pod-spec",
        ),
        pytest.param(  # v2.4 (#4394): the API server's words are the offline validator's, byte for byte
            lambda spec: spec["template"]["spec"]["replicatedJobs"][0].update(name="a-replicated-job-name"),
            'spec.template.spec.replicatedJobs[0].name: Invalid value: "a-replicated-job-name": replicatedJob name '
            "must be no more than 20 characters",
            id="replicated-job-name-21-characters",
        ),
    ],
)
def test_invalid_runtimes_are_rejected(crds: Any, mutate: Any, message: str) -> None:
    runtime = torch_runtime(_unique("bad"))
    mutate(runtime["spec"])
    runtime["spec"]["mlPolicy"] = {k: v for k, v in runtime["spec"]["mlPolicy"].items() if v is not None}
    assert message in _rejected(crds, runtime)


def test_a_trainjob_is_accepted_and_defaulted(crds: Any, namespace: str) -> None:
    job = trainjob("job-ok", trainer={"numNodes": 0})
    job["spec"]["runtimeRef"]["name"] = "no-such-runtime"  # an operator in the cluster would not build it
    created = _created(crds, job, namespace)
    assert created["spec"]["runtimeRef"] == {
        "name": "no-such-runtime",
        "apiGroup": c.GROUP,
        "kind": c.CLUSTER_TRAINING_RUNTIME_KIND,
    }
    assert created["spec"]["suspend"] is False
    assert created["spec"]["managedBy"] == c.DEFAULT_MANAGED_BY
    assert list(printed(crds, "trainjob", "job-ok", namespace)) == [
        "NAME",
        "STATE",
        "REASON",
        "NODES",
        "RESTARTS",
        "AGE",
    ]


@pytest.mark.parametrize(
    ("name", "spec", "message"),
    [
        pytest.param("job.dotted", {}, "metadata.name must match RFC 1035 DNS label format", id="name-rfc1035"),
        pytest.param("j" * 64, {}, "metadata.name must be no more than 63 characters", id="name-too-long"),
        pytest.param(
            "job",
            {"trainer": {"numNodes": -1}},
            "spec.trainer.numNodes in body should be greater than or equal to 0",
            id="negative-num-nodes",
        ),
        pytest.param(
            "job",
            {"trainer": {"numProcPerNode": 0}},
            "numProcPerNode must be greater than or equal to 1",
            id="num-proc-per-node-0",
        ),
        pytest.param(
            "job",
            {"initializer": {"dataset": {"storageUri": "not-a-uri"}}},
            "storageUri may be empty, or it must be a valid URI (scheme://...)",
            id="bad-storage-uri",
        ),
        pytest.param(
            "job",
            {"managedBy": "someone-else"},
            "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
            id="bad-managed-by",
        ),
        pytest.param(
            "job",
            {"runtimePatches": [{"manager": "a/b"}] * 17},
            "must have at most 16 items",
            id="too-many-patches",
        ),
    ],
)
def test_invalid_trainjobs_are_rejected(
    crds: Any, namespace: str, name: str, spec: dict[str, Any], message: str
) -> None:
    assert message in _rejected(crds, trainjob(name, **spec), namespace)


def test_trainjob_immutability(crds: Any, namespace: str) -> None:
    job = unmanaged_trainjob("job-immutable", trainer={"numNodes": 1})
    job["spec"]["runtimePatches"] = [{"manager": "example.com/tool"}]
    _created(crds, job, namespace)

    def patch(body: dict[str, Any]) -> Any:
        return crds.kubectl(
            "patch",
            "trainjob",
            "job-immutable",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            json.dumps(body),
            check=False,
        )

    # Suspended: numNodes and resourcesPerNode may change (issue 13), nothing else of spec.trainer.
    assert patch({"spec": {"trainer": {"numNodes": 2}}}).returncode == 0
    changed = patch({"spec": {"trainer": {"image": "other"}}})
    assert changed.returncode != 0
    assert "spec.trainer: Invalid value: field is immutable" in changed.stderr
    assert patch({"spec": {"suspend": False}}).returncode == 0
    running = patch({"spec": {"trainer": {"numNodes": 3}}})
    assert running.returncode != 0
    assert "spec.trainer: Invalid value: field is immutable" in running.stderr


def test_trainjob_status_rules(crds: Any, namespace: str) -> None:
    _created(crds, unmanaged_trainjob("job-status"), namespace)

    def patch_status(status: dict[str, Any]) -> Any:
        return crds.kubectl(
            "patch",
            "trainjob",
            "job-status",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
            check=False,
        )

    missing_time = patch_status({"trainerStatus": {"progressPercentage": 10}})
    assert missing_time.returncode != 0
    assert "lastUpdatedTime is required when trainerStatus is present" in missing_time.stderr

    condition = {
        "type": "Complete",
        "status": "True",
        "reason": "JobsCompleted",
        "message": "done",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    ok = patch_status({"conditions": [condition], "state": "Complete", "nodes": 2})
    assert ok.returncode == 0, ok.stderr
    columns = printed(crds, "trainjob", "job-status", namespace)
    assert (columns["STATE"], columns["NODES"]) == ("Complete", "2")
    why = patch_status(
        {"state": "Pending", "reason": "Unschedulable", "message": "pod p: 0/3 nodes are available", "restarts": 1}
    )
    assert why.returncode == 0, why.stderr
    columns = printed(crds, "trainjob", "job-status", namespace)
    assert (columns["STATE"], columns["REASON"], columns["RESTARTS"]) == ("Pending", "Unschedulable", "1")
    assert patch_status({"reason": "x" * 65}).returncode != 0, "a reason is one word"
    assert patch_status({"state": "Bogus"}).returncode != 0

    bad = copy.deepcopy(condition)
    bad["status"] = "Maybe"
    assert patch_status({"conditions": [bad]}).returncode != 0
