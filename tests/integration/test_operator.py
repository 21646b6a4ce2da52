"""The operator (`trainjob-operator run`, its own process) against a real kube-apiserver with the real JobSet
controller and kwok nodes: reconcile, status, the fixes beyond upstream, webhooks, writes, failover."""

from __future__ import annotations

import time
from typing import Any

import pytest

from builders import torch_runtime, trainjob_object
from operator_fixtures import OPERATOR_NAMESPACE, Kube, OperatorProcess, condition, condition_status, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUN_FOR = "trainjob-operator.test/run-for"
EXIT_CODE = "trainjob-operator.test/exit-code"
WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE")
CHILD_RESOURCES = ("configmaps", "secrets", "jobsets", "podgroups", "trainjobs", "events")


runtime = torch_runtime
trainjob = trainjob_object


def get_trainjob(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.get("trainjob", name, namespace)
    assert obj is not None
    return obj


def reconciles(operator: OperatorProcess) -> float:
    return operator.metric("trainjob_operator_reconcile_duration_seconds_count")


def writes(operator: OperatorProcess) -> float:
    return sum(
        operator.metric("trainjob_operator_api_requests_total", verb=verb, resource=resource)
        for verb in WRITE_VERBS
        for resource in CHILD_RESOURCES
    )


def alone(kube: Kube, namespace: str) -> None:
    """Wait until the namespaces of earlier tests are gone, so that the operator's write counter counts only ours.

    The operator is shared by the session: a TTL or a deadline firing in an earlier test's namespace while it
    terminates would otherwise be counted here (CI once saw 6 writes for this test's 3)."""
    owned = "trainjob-operator.test/owned=true"

    def others() -> list[str]:
        names = kube.run("get", "namespace", "-l", owned, "-o", "name").stdout.split()
        return [n for n in names if n != f"namespace/{namespace}"]

    eventually(lambda: not others(), "the namespaces of earlier tests deleted", timeout=120)


def settle(operator: OperatorProcess, kube: Kube, namespace: str, name: str) -> None:
    """Wait until the operator has reconciled `name` once more (a sync point instead of a sleep)."""
    before = reconciles(operator)
    kube.patch("trainjob", name, namespace, {"metadata": {"labels": {"test.io/nudge": str(time.monotonic_ns())}}})
    eventually(lambda: reconciles(operator) > before, f"a reconcile of {name}", timeout=30)


def test_torch_trainjob_runs_to_complete_with_upstreams_status(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(runtime(namespace), trainjob(namespace, "torch-job", trainer={"numNodes": 2}))
    jobset = eventually(lambda: kube.get("jobset", "torch-job", namespace), "the JobSet")
    job = get_trainjob(kube, namespace, "torch-job")
    assert jobset["metadata"]["ownerReferences"] == [
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "name": "torch-job",
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    node = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert (env["PET_NNODES"], env["PET_MASTER_ADDR"]) == ("2", "torch-job-node-0-0.torch-job")
    snapshot = kube.get("configmap", "torch-job-runtime-snapshot", namespace)
    assert snapshot is not None and "kind: TrainingRuntime" in snapshot["data"]["runtime"]

    done = eventually(
        lambda: condition(kube.get("trainjob", "torch-job", namespace), "Complete"), "Complete", timeout=90
    )
    assert (done["status"], done["reason"], done["message"]) == (
        "True",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    job = get_trainjob(kube, namespace, "torch-job")
    assert [cond["type"] for cond in job["status"]["conditions"]] == ["Complete"]
    assert (job["status"]["state"], job["status"]["nodes"]) == ("Complete", 2)
    assert job["status"]["jobsStatus"][0]["name"] == "node"
    assert not any(k.startswith("kopf.zalando.org") for k in job["metadata"].get("annotations", {}))
    header, row = kube.run("get", "trainjobs", "-n", namespace).stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "STATE", "REASON", "NODES", "RESTARTS"]
    assert row.split()[:4] == ["torch-job", "Complete", "2", "0"], "a Complete TrainJob has no REASON to show"


def test_failing_pod_fails_the_trainjob(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.apply(runtime(namespace, pod_annotations={EXIT_CODE: "3"}), trainjob(namespace, "failing"))
    failed = eventually(lambda: condition(kube.get("trainjob", "failing", namespace), "Failed"), "Failed", timeout=90)
    # Copied verbatim from the JobSet (v0.12 names the first failed Job).
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: failing-node-0)",
    )
    assert get_trainjob(kube, namespace, "failing")["status"]["state"] == "Failed"


def test_suspend_then_atomic_patch_and_resume(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.apply(
        runtime(namespace, pod_annotations={RUN_FOR: "120s"}),
        trainjob(namespace, "queued", suspend=True, trainer={"numNodes": 1}),
    )
    eventually(
        lambda: (kube.get("jobset", "queued", namespace) or {}).get("spec", {}).get("suspend") is True,
        "a suspended JobSet",
    )
    suspended = eventually(lambda: condition(kube.get("trainjob", "queued", namespace), "Suspended"), "Suspended")
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "True",
        "Suspended",
        "TrainJob is suspended",
    )
    assert get_trainjob(kube, namespace, "queued")["status"]["state"] == "Suspended"

    # What Kueue does on admission: one update that adds its runtime patch and unsuspends.
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "gpu-a"}}}}},
                        }
                    ]
                }
            }
        },
    }
    kube.patch("trainjob", "queued", namespace, {"spec": {"suspend": False, "runtimePatches": [patch]}})

    def resumed_jobset() -> dict[str, Any] | None:
        jobset = kube.get("jobset", "queued", namespace) or {}
        return jobset if jobset.get("spec", {}).get("suspend") is False else None

    jobset = eventually(resumed_jobset, "the resumed JobSet")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu-a"}
    # Resumed: the Suspended condition goes (no Suspended=False), so the kubeflow SDK can report Running (D18).
    resumed = eventually(
        lambda: (
            (job := kube.get("trainjob", "queued", namespace))
            and condition(job, "Suspended") is None
            and job["status"].get("startTime")
            and job
        ),
        "resumed",
    )
    assert "conditions" not in resumed["status"]
    stamped = get_trainjob(kube, namespace, "queued")["spec"]["runtimePatches"][0]
    assert stamped["manager"] == "kueue.x-k8s.io/manager" and stamped["time"]

    # While running, the webhook refuses patch changes and the JobSet is never mutated.
    refused = kube.patch("trainjob", "queued", namespace, {"spec": {"runtimePatches": []}}, check=False)
    assert refused.returncode != 0
    assert (
        "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
        in refused.stderr
    )


def test_mpi_secret_is_created_once_and_never_logged(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    mpi_runtime = runtime(namespace, "mpi")
    mpi_runtime["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {"numProcPerNode": 1}}
    node = mpi_runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    launcher = {
        "name": "launcher",
        "template": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {"containers": [{"name": "node", "image": "mpi", "command": ["mpirun", "hostname"]}]}
                },
            }
        },
    }
    node["template"]["metadata"] = {}
    launcher["template"]["metadata"] = {"labels": {c.ANCESTOR_LABEL: "trainer"}}
    mpi_runtime["spec"]["template"]["spec"]["replicatedJobs"] = [launcher, node]
    kube.apply(mpi_runtime, trainjob(namespace, "mpi-job", runtime_name="mpi", trainer={"numNodes": 2}))
    secret = eventually(lambda: kube.get("secret", "mpi-job-mpi-ssh-auth", namespace), "the SSH Secret")
    assert (secret["type"], secret["immutable"], sorted(secret["data"])) == (
        "kubernetes.io/ssh-auth",
        True,
        ["ssh-privatekey", "ssh-publickey"],
    )
    hostfile = eventually(lambda: kube.get("configmap", "mpi-job-mpi-hostfile", namespace), "the hostfile")
    assert hostfile["data"]["hostfile"] == "mpi-job-node-0-0.mpi-job slots=1\nmpi-job-node-0-1.mpi-job slots=1\n"
    eventually(lambda: condition(kube.get("trainjob", "mpi-job", namespace), "Complete"), "Complete", timeout=90)
    assert (
        kube.existing("secret", "mpi-job-mpi-ssh-auth", namespace)["metadata"]["resourceVersion"]
        == secret["metadata"]["resourceVersion"]
    )
    assert secret["data"]["ssh-privatekey"] not in operator.log()
    assert "PRIVATE KEY" not in operator.log()
    built = [
        line
        for line in (operator.log_path.read_text() if operator.log_path else "").splitlines()  # all of it
        if '"JobSet built"' in line and '"mpi-job"' in line and f'"{namespace}"' in line
    ]
    assert len(built) == 1, "one info line for the JobSet built"


def test_flux_trainjob_gets_its_scripts_and_curve_secret_once(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    flux_runtime = runtime(namespace, "flux")
    flux_runtime["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 2}}
    kube.apply(flux_runtime, trainjob(namespace, "flux-job", runtime_name="flux", trainer={"numNodes": 2}))
    secret = eventually(lambda: kube.get("secret", "flux-job-flux-curve", namespace), "the curve Secret")
    assert (secret.get("type"), secret.get("immutable"), sorted(secret["data"])) == ("Opaque", True, ["curve.cert"])
    scripts = eventually(lambda: kube.get("configmap", "flux-job-flux-entrypoint", namespace), "the scripts")
    assert sorted(scripts["data"]) == ["entrypoint.sh", "init.sh"]
    assert 'flags="-N 2 -n 4"' in scripts["data"]["entrypoint.sh"]
    jobset = eventually(lambda: kube.get("jobset", "flux-job", namespace), "the JobSet")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [ic["name"] for ic in pod["initContainers"]] == ["flux-installer"]
    assert pod["containers"][0]["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "torchrun train.py"]
    eventually(lambda: condition(kube.get("trainjob", "flux-job", namespace), "Complete"), "Complete", timeout=90)
    assert (
        kube.existing("secret", "flux-job-flux-curve", namespace)["metadata"]["resourceVersion"]
        == secret["metadata"]["resourceVersion"]
    )
    assert secret["data"]["curve.cert"] not in operator.log()
    assert "secret-key" not in operator.log()


def test_terminal_trainjob_never_gets_new_children(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.apply(runtime(namespace), trainjob(namespace, "finished"))
    eventually(lambda: condition(kube.get("trainjob", "finished", namespace), "Complete"), "Complete", timeout=90)
    kube.delete("jobset", "finished", namespace)
    eventually(lambda: kube.get("jobset", "finished", namespace) is None, "the JobSet gone")
    settle(operator, kube, namespace, "finished")
    assert kube.get("jobset", "finished", namespace) is None
    assert condition_status(get_trainjob(kube, namespace, "finished"), "Complete") == "True"


def test_errors_reach_the_status_and_clear_when_fixed(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    squatter = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "blocked-runtime-snapshot", "namespace": namespace},
        "data": {"owner": "someone-else"},
    }
    kube.apply(runtime(namespace), squatter)
    kube.apply(trainjob(namespace, "blocked"))
    failed = eventually(
        lambda: condition(kube.get("trainjob", "blocked", namespace), "ReconcileFailed"),
        "the ReconcileFailed condition",
    )
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "InvalidRuntimeSnapshot",
        "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
    )
    assert get_trainjob(kube, namespace, "blocked")["status"]["state"] == "Error"
    events = eventually(
        lambda: [
            e
            for e in kube.items("events", namespace)
            if e["involvedObject"].get("name") == "blocked" and e["reason"] == "TrainJobResourcesCreationFailed"
        ],
        "a Warning event",
    )
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == (
        "TrainJob resources reconciliation failed: invalid runtime snapshot: a snapshot "
        "configmap exists but is owned by another object"
    )
    assert kube.get("jobset", "blocked", namespace) is None

    kube.delete("configmap", "blocked-runtime-snapshot", namespace)
    eventually(lambda: kube.get("jobset", "blocked", namespace), "the JobSet once the cause is gone", timeout=90)
    eventually(
        lambda: condition(kube.get("trainjob", "blocked", namespace), "ReconcileFailed") is None,
        "the condition cleared",
    )


def test_webhooks_refuse_bad_input_naming_the_field(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    missing = kube.create(trainjob(namespace, "orphan", runtime_name="nope"), check=False)
    assert missing.returncode != 0
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in missing.stderr
    assert "spec.runtimeRef" in missing.stderr
    assert "specified trainingRuntime must be created before the TrainJob is created" in missing.stderr

    kube.apply(runtime(namespace))
    reserved_env = {"env": [{"name": "PET_NODE_RANK", "value": "1"}]}
    reserved = kube.create(trainjob(namespace, "reserved", trainer=reserved_env), check=False)
    assert reserved.returncode != 0
    assert "spec.trainer.env" in reserved.stderr
    assert "must not have reserved envs, invalid envs configured: [PET_NODE_RANK]" in reserved.stderr

    bad_runtime = kube.create(runtime(namespace, "two-replicas", replicas=2), check=False)
    assert bad_runtime.returncode != 0
    assert "spec.template.spec.replicatedJobs[0].replicas" in bad_runtime.stderr
    assert "always must be 1" in bad_runtime.stderr
    opted_out = runtime(namespace, "opted-out", replicas=2, labels={c.WEBHOOK_VALIDATION_LABEL: "disabled"})
    assert kube.create(opted_out, check=False).returncode == 0

    crd_level = kube.create(trainjob(namespace, "Bad-Name"), check=False)
    assert crd_level.returncode != 0 and "metadata.name must match RFC 1035 DNS label format" in crd_level.stderr


def test_runtime_created_a_moment_before_its_trainjob_is_never_refused(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    for i in range(3):
        result = kube.apply(
            runtime(namespace, f"fresh-{i}"), trainjob(namespace, f"fresh-{i}", f"fresh-{i}"), check=False
        )
        assert result.returncode == 0, result.stderr
    for i in range(3):
        eventually(lambda i=i: kube.get("jobset", f"fresh-{i}", namespace), f"JobSet fresh-{i}")


def test_the_sdks_configmap_is_created_where_the_operator_runs(kube: Kube, operator: OperatorProcess) -> None:
    """`TrainerClient()` reads it at start-up; `run` creates it in its namespace before it turns ready."""
    configmap = kube.get("configmap", c.PUBLIC_CONFIGMAP, OPERATOR_NAMESPACE)
    assert configmap is not None, operator.log()[-2000:]
    assert configmap["data"] == {"kubeflow_trainer_version": c.TRAINER_VERSION}


def test_external_manager_is_left_alone(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.apply(runtime(namespace), trainjob(namespace, "remote", managedBy=c.MULTIKUEUE_MANAGED_BY))
    settle(operator, kube, namespace, "remote")
    assert kube.get("jobset", "remote", namespace) is None
    assert get_trainjob(kube, namespace, "remote").get("status") in (None, {})


def test_active_deadline_fails_a_running_job_and_deletes_its_jobset(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(
        runtime(namespace, pod_annotations={RUN_FOR: "300s"}), trainjob(namespace, "slow", activeDeadlineSeconds=3)
    )
    eventually(lambda: kube.get("jobset", "slow", namespace), "the JobSet")
    failed = eventually(
        lambda: condition(kube.get("trainjob", "slow", namespace), "Failed"), "DeadlineExceeded", timeout=60
    )
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    eventually(lambda: kube.get("jobset", "slow", namespace) is None, "the JobSet deleted")


def test_never_suspended_trainjob_takes_at_most_three_writes_to_its_jobset(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    # The JobSet is managed by nobody, so its status never changes and the count settles.
    kube.apply(runtime(namespace, jobset_fields={"managedBy": "example.com/nobody"}))
    alone(kube, namespace)
    before = writes(operator)
    kube.apply(trainjob(namespace, "counted", trainer={"numNodes": 2}))
    eventually(lambda: kube.get("jobset", "counted", namespace), "the JobSet")
    settle(operator, kube, namespace, "counted")
    spent = writes(operator) - before
    print(f"\nAPI writes from creation to JobSet created (and settled): {spent:.0f}")
    assert spent <= 3
    job = get_trainjob(kube, namespace, "counted")
    assert not job.get("status")  # nothing to report yet: no write, no condition (the kubeflow SDK sees "Created")


def test_leader_failover_to_a_second_replica(
    kube: Kube, operator: OperatorProcess, namespace: str, tmp_path: Any
) -> None:
    standby = OperatorProcess(
        operator.kubeconfig,
        "operator-b",
        {
            "leader_election": {
                "lease_name": "trainjob-operator-test",
                "lease_duration_seconds": 4,
                "renew_deadline_seconds": 3,
                "retry_period_seconds": 1,
            }
        },
    ).start(tmp_path)
    try:
        eventually(standby.ready, "the standby's readiness", timeout=60)
        assert standby.metric("trainjob_operator_leader") == 0
        operator.stop(kill=True)
        killed = time.monotonic()
        eventually(lambda: standby.metric("trainjob_operator_leader") == 1, "the standby taking over", timeout=30)
        failover = time.monotonic() - killed
        print(f"\nleader failover after SIGKILL: {failover:.1f} s (lease 4 s)")
        kube.apply(runtime(namespace), trainjob(namespace, "after-failover"))
        eventually(lambda: kube.get("jobset", "after-failover", namespace), "a JobSet from the new leader")
    finally:
        standby.stop()
        operator.start(tmp_path)
        eventually(operator.ready, "the first replica back", timeout=60)
        eventually(lambda: operator.metric("trainjob_operator_leader") == 1, "leadership back", timeout=30)
