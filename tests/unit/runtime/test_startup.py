"""Start-up decisions (runtime/startup.py): what is missing and the one line that says so, the permissions the
operator needs (kept in step with the shipped RBAC), backoff, readiness and cache sync."""

from pathlib import Path
from typing import Any

import pytest

from trainjob_operator.runtime import startup
from trainjob_operator.runtime.startup import CacheSync, Decision, Facts, Need, Plan, Readiness

REPO = Path(__file__).resolve().parents[3]
TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
ALL_SERVED = {
    TRAINER: frozenset({"trainjobs", "trainjobs/status", "trainingruntimes", "clustertrainingruntimes"}),
    JOBSET: frozenset({"jobsets", "jobsets/status"}),
}
PLAN = Plan(operator_namespace="kubeflow-system")
USER = "system:serviceaccount:ops:runner"

LEASE_CREATE = Need("create", "coordination.k8s.io", "leases", "kubeflow-system", None, startup.NO_LEADER_ELECTION)
LIST_TRAINJOBS = Need("list", "trainer.kubeflow.org", "trainjobs")
PATCH_VALIDATING = Need(
    "patch",
    "admissionregistration.k8s.io",
    "validatingwebhookconfigurations",
    None,
    "validator.trainer.kubeflow.org",
    startup.NO_WEBHOOKS,
)
PODGROUPS = Need("create", "scheduling.volcano.sh", "podgroups", required=False)

CRDS_LINE = (
    "CRDs not installed: trainjobs.trainer.kubeflow.org, trainingruntimes.trainer.kubeflow.org, "
    "clustertrainingruntimes.trainer.kubeflow.org; " + startup.TRAINER_CRDS_FIX
)
JOBSET_LINE = "CRDs not installed: jobsets.jobset.x-k8s.io; " + startup.JOBSET_FIX


def facts(**changes: Any) -> Facts:
    base: dict[str, Any] = {"served": ALL_SERVED, "user": USER}
    return Facts(**{**base, **changes})


DECISIONS = [
    ("everything is there: go on", PLAN, facts(), Decision()),
    (
        "no Trainer CRDs: names them and how to install them",
        PLAN,
        facts(served={**ALL_SERVED, TRAINER: None}),
        Decision(fatal=CRDS_LINE),
    ),
    (
        "no JobSet: names its CRD and the JobSet release to install",
        PLAN,
        facts(served={**ALL_SERVED, JOBSET: None}),
        Decision(fatal=JOBSET_LINE),
    ),
    (
        "neither: one line with both",
        PLAN,
        facts(served={TRAINER: None, JOBSET: None}),
        Decision(
            fatal="CRDs not installed: trainjobs.trainer.kubeflow.org, trainingruntimes.trainer.kubeflow.org, "
            "clustertrainingruntimes.trainer.kubeflow.org and 1 more; "
            f"{startup.TRAINER_CRDS_FIX}; and {startup.JOBSET_FIX}"
        ),
    ),
    (
        "an old CRD set without ClusterTrainingRuntime",
        PLAN,
        facts(served={**ALL_SERVED, TRAINER: frozenset({"trainjobs", "trainingruntimes"})}),
        Decision(fatal="CRDs not installed: clustertrainingruntimes.trainer.kubeflow.org; " + startup.TRAINER_CRDS_FIX),
    ),
    (
        "CRDs come first: a missing namespace is not judged without them",
        PLAN,
        facts(served={**ALL_SERVED, JOBSET: None}, namespace="missing"),
        Decision(fatal=JOBSET_LINE),
    ),
    (
        "operator namespace missing and the user may create namespaces: create it",
        PLAN,
        facts(namespace="missing", can_create_namespace=True),
        Decision(create_namespace=True),
    ),
    (
        "operator namespace missing and the user may not create it: say so, with both fixes",
        PLAN,
        facts(namespace="missing"),
        Decision(
            fatal=f"operator namespace kubeflow-system does not exist and {USER} may not create it: "
            "`kubectl create namespace kubeflow-system`, or pass --operator-namespace "
            "<an existing namespace>"
        ),
    ),
    (
        "no webhooks, leader election or status server: nothing lives in the operator namespace",
        Plan("gone", webhooks=False, leader_election=False, status_server=False),
        facts(namespace="missing"),
        Decision(),
    ),
    (
        "the status server alone keeps its certificate Secret in the operator namespace",
        Plan("gone", webhooks=False, leader_election=False),
        facts(namespace="missing", can_create_namespace=True),
        Decision(create_namespace=True),
    ),
    (
        "a verb it needs is denied: names verb and resource, and how to grant it",
        PLAN,
        facts(denied=(LIST_TRAINJOBS,)),
        Decision(fatal=f"RBAC: {USER} may not list trainjobs.trainer.kubeflow.org cluster-wide; {startup.RBAC_FIX}"),
    ),
    (
        "several denied: the first, then how many more",
        PLAN,
        facts(denied=(LIST_TRAINJOBS, PATCH_VALIDATING, LEASE_CREATE, PODGROUPS)),
        Decision(
            fatal=f"RBAC: {USER} may not list trainjobs.trainer.kubeflow.org cluster-wide (and 2 more: patch "
            "validatingwebhookconfigurations.admissionregistration.k8s.io 'validator.trainer.kubeflow.org' "
            "cluster-wide, create leases.coordination.k8s.io in namespace kubeflow-system); "
            f"{startup.RBAC_FIX}"
        ),
    ),
    (
        "a webhook permission denied: --no-webhooks avoids it",
        PLAN,
        facts(denied=(PATCH_VALIDATING,)),
        Decision(
            fatal=f"RBAC: {USER} may not patch validatingwebhookconfigurations.admissionregistration.k8s.io "
            f"'validator.trainer.kubeflow.org' cluster-wide; {startup.RBAC_FIX}, or run with --no-webhooks"
        ),
    ),
    (
        "may not read namespaces and may not create the Lease there: asks whether the namespace exists",
        PLAN,
        facts(namespace="unknown", denied=(LEASE_CREATE,)),
        Decision(
            fatal=f"RBAC: {USER} may not create leases.coordination.k8s.io in namespace kubeflow-system (does "
            f"namespace kubeflow-system exist?); {startup.RBAC_FIX}, or run with --no-leader-election"
        ),
    ),
    (
        "only what some runtimes need is denied: a warning, and go on",
        PLAN,
        facts(denied=(PODGROUPS,)),
        Decision(
            warnings=(
                f"RBAC: {USER} may not create podgroups.scheduling.volcano.sh cluster-wide; runtimes or "
                "clusters that need it will fail",
            )
        ),
    ),
]


@pytest.mark.parametrize(("plan", "found", "want"), [d[1:] for d in DECISIONS], ids=[d[0] for d in DECISIONS])
def test_decide(plan: Plan, found: Facts, want: Decision) -> None:
    assert startup.decide(plan, found) == want


def test_a_denied_subresource_reads_as_kubectl_would_name_it() -> None:
    need = Need("patch", "trainer.kubeflow.org", "trainjobs/status", "team-a")
    assert need.describe() == "patch trainjobs.trainer.kubeflow.org/status in namespace team-a"


def test_watched_namespaces_are_checked_one_by_one_cluster_scoped_runtimes_cluster_wide() -> None:
    needs = startup.permissions(Plan("ops", namespaces=("a", "b"), webhooks=False, leader_election=False))
    lists = [(n.resource, n.namespace) for n in needs if n.verb == "list"]
    assert lists == [
        ("trainjobs", "a"),
        ("trainingruntimes", "a"),
        ("jobsets", "a"),
        ("pods", "a"),
        ("workloads", "a"),
        ("trainjobs", "b"),
        ("trainingruntimes", "b"),
        ("jobsets", "b"),
        ("pods", "b"),
        ("workloads", "b"),
        ("clustertrainingruntimes", None),
    ]
    assert not [n for n in needs if n.resource in ("leases", "validatingwebhookconfigurations")]
    # list and watch (STATE follows the pods); get (progress)
    assert [n.required for n in needs if n.resource == "pods"] == [False, False, True, False, False, True]
    without_progress = startup.permissions(Plan("ops", webhooks=False, leader_election=False, status_server=False))
    assert not [n for n in without_progress if n.resource == "tokenreviews" or (n.resource, n.verb) == ("pods", "get")]


# --- the shipped RBAC grants exactly what the checks ask for: tests/unit/runtime/test_startup_rbac.py -------------


# --- reaching the API server ----------------------------------------------------------------------------------------


def test_backoff_doubles_to_a_cap_and_gives_up_within_the_deadline() -> None:
    delays = [startup.backoff(n) for n in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    waited, attempts = 0.0, 0
    while waited + startup.backoff(attempts) <= startup.CONNECT_DEADLINE:
        waited += startup.backoff(attempts)
        attempts += 1
    assert (attempts, waited) == (6, 17.5)  # six retries, and the whole start stays under 30 s


def test_error_lines_name_the_server_the_context_and_the_fix() -> None:
    assert startup.unreachable("https://127.0.0.1:6443", "context dev of /k", "connection refused", 23.6) == (
        "cannot reach the API server https://127.0.0.1:6443 (context dev of /k) after 24 s: connection refused; is "
        "the cluster up and is this the right --kubeconfig/--context? (`kubectl cluster-info` tries the same)"
    )
    assert startup.unauthorized("https://k", "context dev of /k", 401, "Unauthorized") == (
        "the API server https://k rejected the credentials of context dev of /k (401: Unauthorized); refresh or fix "
        "the user's credentials in the kubeconfig, or pass another --context"
    )


# --- the API server reaches the webhooks ---------------------------------------------------------------------------

PROBES = [
    (
        "our webhook refused the probe: reachable",
        403,
        'admission webhook "validator.trainjob.trainer.kubeflow.org" '
        'denied the request: spec.runtimeRef: Invalid value: "trainjob-operator-webhook-probe": ...',
        "reachable",
    ),
    (
        "the API server could not call it: unreachable",
        500,
        "Internal error occurred: failed calling webhook "
        '"defaulter.trainjob.trainer.kubeflow.org": Post "https://127.0.0.1:9443/...": connect: connection refused',
        "unreachable",
    ),
    (
        "RBAC: may not create TrainJobs, cannot tell",
        403,
        'trainjobs.trainer.kubeflow.org is forbidden: User "x" cannot create resource "trainjobs"',
        "unknown",
    ),
    ("admitted: the configurations are not loaded yet, ask again", 201, "", "again"),
    (
        "another webhook refused it: ask again",
        400,
        'admission webhook "other.example.com" denied the request: no',
        "again",
    ),
]


@pytest.mark.parametrize(("status", "message", "want"), [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_webhook_probe(status: int, message: str, want: str) -> None:
    assert startup.webhook_probe(status, message) == want


# --- readiness ------------------------------------------------------------------------------------------------------

READY = Readiness(preflight_done=True, webhooks_registered=True, leader=True)
READINESS = [
    ("checking the cluster", Readiness(), (False, "starting: checking the cluster (CRDs, operator namespace, RBAC)")),
    (
        "caches not synced",
        Readiness(preflight_done=True, pending_caches=("jobsets", "trainjobs")),
        (False, "starting: waiting for caches to sync: jobsets, trainjobs"),
    ),
    (
        "webhooks enabled, configurations not registered",
        Readiness(preflight_done=True, leader=True),
        (False, "starting: webhook certificate and configurations not registered yet"),
    ),
    ("the leader", READY, (True, "ok: leader, reconciling; serving webhooks")),
    (
        "a standby replica is ready: it serves webhooks, and says it stands by",
        Readiness(preflight_done=True, webhooks_registered=True, holder="pod-a_1_x", lease="ops/trainer.kubeflow.org"),
        (
            True,
            "ok: standing by, not the leader (Lease ops/trainer.kubeflow.org held by pod-a_1_x); serving webhooks; "
            "not reconciling",
        ),
    ),
    (
        "no webhooks, no leader election",
        Readiness(preflight_done=True, webhooks_enabled=False, leader_election=False),
        (True, "ok: reconciling; webhooks disabled"),
    ),
]


@pytest.mark.parametrize(("state", "want"), [r[1:] for r in READINESS], ids=[r[0] for r in READINESS])
def test_readiness(state: Readiness, want: tuple[bool, str]) -> None:
    assert startup.readiness(state) == want


# --- caches synced --------------------------------------------------------------------------------------------------


def sync_after(steps: list[tuple[str, str, Any]]) -> tuple[str, ...]:
    sync = CacheSync(resources=tuple(dict.fromkeys(resource for _, resource, _ in steps)))
    for step, resource, value in steps:
        if step == "expect":
            sync.expect(resource, value)
        elif step == "complete":
            sync.complete(resource)
        else:
            sync.seen(resource, initial=value)
    return sync.pending()


SYNC = [
    ("nothing to list: synced", [("expect", "trainjobs", 0)], ()),
    (
        "two listed of three: pending",
        [("expect", "trainjobs", 3), ("seen", "trainjobs", True), ("seen", "trainjobs", True)],
        ("trainjobs",),
    ),
    ("all listed: synced", [("expect", "trainjobs", 2), ("seen", "trainjobs", True), ("seen", "trainjobs", True)], ()),
    ("a live event means the listing is over", [("expect", "jobsets", 5), ("seen", "jobsets", False)], ()),
    (
        "objects deleted since the count: a lower count counts",
        [("expect", "jobsets", 5), ("seen", "jobsets", True), ("expect", "jobsets", 1)],
        (),
    ),
    (
        "a higher count later does not raise the bar",
        [("expect", "jobsets", 1), ("expect", "jobsets", 4), ("seen", "jobsets", True)],
        (),
    ),
    (
        "each resource on its own",
        [("expect", "trainjobs", 1), ("expect", "jobsets", 1), ("seen", "trainjobs", True)],
        ("jobsets",),
    ),
    ("not counted yet: pending, however many arrived", [("seen", "trainjobs", True)], ("trainjobs",)),
    (
        "the stream says the listing is over: synced without a count",
        [("seen", "trainjobs", True), ("complete", "trainjobs", None)],
        (),
    ),
    (
        "one collection's listing over, the other's not",
        [("seen", "jobsets", True), ("complete", "trainjobs", None)],
        ("jobsets",),
    ),
]


@pytest.mark.parametrize(("steps", "pending"), [s[1:] for s in SYNC], ids=[s[0] for s in SYNC])
def test_cache_sync(steps: list[tuple[str, str, Any]], pending: tuple[str, ...]) -> None:
    assert sync_after(steps) == pending


@pytest.mark.parametrize(
    ("denied", "publishes"),
    [
        pytest.param((), True, id="allowed: the SDK's ConfigMap is created when missing"),
        pytest.param(
            (Need("create", "", "configmaps", "kubeflow-system", required=False),),
            False,
            id="may not create ConfigMaps in its namespace: it is not tried (the start-up warning says why)",
        ),
        pytest.param(
            (Need("get", "", "configmaps", "kubeflow-system", "kubeflow-trainer-public", required=False),),
            False,
            id="may not read it: not tried either",
        ),
        pytest.param(
            (Need("delete", "trainer.kubeflow.org", "trainjobs", required=False),),
            True,
            id="another optional permission denied: no matter",
        ),
    ],
)
def test_the_sdks_configmap_is_published_when_allowed(denied: tuple[Need, ...], publishes: bool) -> None:
    facts = Facts(served={}, denied=denied)
    assert startup.may_publish_public_configmap(PLAN, facts) is publishes
    needs = startup.permissions(PLAN)
    assert {n for n in needs if n.resource == "configmaps" and n.namespace == "kubeflow-system"} == {
        Need("get", "", "configmaps", "kubeflow-system", "kubeflow-trainer-public", required=False),
        Need("create", "", "configmaps", "kubeflow-system", required=False),
    }
