"""Start-up decisions, pure: what the operator needs of a cluster, what to do about what is missing, and the one
line that tells the user why it cannot start. The executor (`controller/preflight.py`) gathers the facts."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..api import constants as c
from .framework import ChildKind
from .pipeline import Framework

JOBSET_VERSION = "v0.12.0"
TRAINER_CRDS_FIX = "install them: `kubectl apply --server-side -f crds/` (in this repository)"
JOBSET_FIX = (
    f"install JobSet {JOBSET_VERSION}: `kubectl apply --server-side -f "
    f"https://github.com/kubernetes-sigs/jobset/releases/download/{JOBSET_VERSION}/manifests.yaml`"
)
RBAC_FIX = (
    "grant it the rules of charts/trainjob-operator/templates/rbac.yaml (what `helm install` binds to the "
    "operator's ServiceAccount), or pass a --context/--kubeconfig whose user may"
)


# --- what the operator needs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """A resource the operator watches or writes, served by a CRD."""

    group_version: str
    plural: str
    crd: str
    fix: str


REQUIRED_APIS: tuple[Api, ...] = (
    Api(c.API_VERSION, "trainjobs", f"trainjobs.{c.GROUP}", TRAINER_CRDS_FIX),
    Api(c.API_VERSION, "trainingruntimes", f"trainingruntimes.{c.GROUP}", TRAINER_CRDS_FIX),
    Api(c.API_VERSION, "clustertrainingruntimes", f"clustertrainingruntimes.{c.GROUP}", TRAINER_CRDS_FIX),
    Api(c.JOBSET_API_VERSION, "jobsets", "jobsets.jobset.x-k8s.io", JOBSET_FIX),
)


@dataclass(frozen=True)
class Need:
    """One permission: `verb` on `resource` (maybe `plural/subresource`) of `group`, in `namespace` (None: cluster-wide
    or cluster-scoped), maybe only for the object `name`."""

    verb: str
    group: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    fix: str = ""
    """What else avoids needing it (a flag), besides granting it."""
    required: bool = True
    """False: only some runtimes need it; a warning, not a reason to stop."""

    def describe(self) -> str:
        plural, _, sub = self.resource.partition("/")
        what = f"{plural}.{self.group}" if self.group else plural
        if sub:
            what += f"/{sub}"
        if self.name:
            what += f" {self.name!r}"
        return f"{self.verb} {what} " + (f"in namespace {self.namespace}" if self.namespace else "cluster-wide")


@dataclass(frozen=True)
class Plan:
    """What this run of the operator will do, from its settings."""

    operator_namespace: str
    namespaces: tuple[str, ...] = ()
    """Watched namespaces; empty means the whole cluster."""
    webhooks: bool = True
    leader_election: bool = True
    status_server: bool = True
    lease_name: str = "trainer.kubeflow.org"
    cert_secret_name: str = "trainjob-operator-webhook-cert"
    webhook_configurations: tuple[str, str] = ("validator.trainer.kubeflow.org", "defaulter.trainer.kubeflow.org")
    streaming_lists: bool = True
    """Ask whether the API server streams initial events (config `client.streaming_lists: auto`)."""
    metrics_auth: bool = False
    """`metrics.auth.enabled`: /metrics over TLS, each scrape authenticated (TokenReview) and authorised
    (SubjectAccessReview), as controller-runtime's filter does upstream."""

    @property
    def needs_namespace(self) -> bool:
        """The Lease and the certificate Secret (webhooks and the status server share it) live there."""
        return self.webhooks or self.leader_election or self.status_server or self.metrics_auth


NO_WEBHOOKS = "or run with --no-webhooks"
NO_LEADER_ELECTION = "or run with --no-leader-election"
NO_STATUS_SERVER = "or run with --no-status-server"
NO_METRICS_AUTH = "or set metrics.auth.enabled: false"


def permissions(plan: Plan, kinds: Sequence[ChildKind] | None = None) -> list[Need]:
    """Every request the operator makes, as the chart's RBAC grants them (a unit test keeps the two in step).
    `kinds`: the child kinds (default: the plugin registry's)."""
    if kinds is None:
        kinds = Framework.from_registry().kinds()
    scopes: Sequence[str | None] = plan.namespaces or (None,)
    needs: list[Need] = []
    for ns in scopes:
        needs += [
            Need(verb, c.GROUP, plural, ns)
            for plural in ("trainjobs", "trainingruntimes")
            for verb in ("get", "list", "watch")
        ]
        needs.append(Need("patch", c.GROUP, "trainjobs/status", ns))
        # The child kinds, from the plugin registry (optional kinds, such as PodGroups that only gang-scheduling
        # runtimes make, are worth a warning, not a refusal to start).
        needs += [
            Need(verb, kind.group, kind.plural, ns, fix=_unless(kind), required=not kind.optional)
            for kind in kinds
            for verb in kind.verbs
        ]
        needs.append(Need("create", "", "events", ns))
        # Only with the OwnerReferencesPermissionEnforcement admission plugin: a warning.
        needs.append(Need("update", c.GROUP, "trainjobs/finalizers", ns, required=False))
        # Only TrainJobs with a TTL (delete) or a startup deadline (list their pods) need these: a warning.
        needs.append(Need("delete", c.GROUP, "trainjobs", ns, required=False))
        needs.append(Need("list", "", "pods", ns, required=False))
        # STATE follows the JobSets' pods (runtime/health.py); without, the Jobs' counts decide: a warning.
        needs.append(Need("watch", "", "pods", ns, required=False))
        # Why Kueue suspended a queued TrainJob (runtime/kueue.py); without, its reason stays unexplained: a warning.
        needs.append(Need("list", "kueue.x-k8s.io", "workloads", ns, required=False))
        if plan.status_server:  # the status server finds the pod a progress report's token is bound to
            needs.append(Need("get", "", "pods", ns, fix=NO_STATUS_SERVER))
    needs += [Need(verb, c.GROUP, "clustertrainingruntimes") for verb in ("get", "list", "watch")]
    ons = plan.operator_namespace
    if plan.webhooks:
        for plural, name in zip(
            ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
            plan.webhook_configurations,
            strict=True,
        ):
            needs += [
                Need(verb, "admissionregistration.k8s.io", plural, None, name, NO_WEBHOOKS)
                for verb in ("get", "create", "patch")
            ]
            # An operator that cannot go on (a fatal error) takes its configurations away, or with failurePolicy
            # Fail they would refuse every TrainJob write: a warning without it.
            needs.append(
                Need(
                    "delete",
                    "admissionregistration.k8s.io",
                    plural,
                    None,
                    name,
                    "left in place when the operator stops on a fatal error",
                    required=False,
                )
            )
        # The Volcano plugin's check that a TrainJob's PriorityClass exists: skipped (a warning) without it.
        needs.append(Need("list", "scheduling.k8s.io", "priorityclasses", None, fix=NO_WEBHOOKS, required=False))
    if plan.webhooks or plan.status_server or plan.metrics_auth:
        fix = (
            NO_WEBHOOKS
            if not plan.status_server
            else (NO_STATUS_SERVER if not plan.webhooks else "or run with --no-webhooks --no-status-server")
        )
        needs += [
            Need("get", "", "secrets", ons, plan.cert_secret_name, fix),
            Need("create", "", "secrets", ons, None, fix),
            Need("update", "", "secrets", ons, plan.cert_secret_name, fix),
        ]
    # The ConfigMap the kubeflow SDK's TrainerClient() reads, created when missing: without these, a warning.
    needs += [
        Need("get", "", "configmaps", ons, c.PUBLIC_CONFIGMAP, required=False),
        Need("create", "", "configmaps", ons, required=False),
    ]
    if plan.status_server:
        needs.append(Need("create", "authentication.k8s.io", "tokenreviews", None, None, NO_STATUS_SERVER))
    if plan.metrics_auth:  # who scrapes /metrics (TokenReview), and whether they may (SubjectAccessReview)
        needs.append(Need("create", "authentication.k8s.io", "tokenreviews", None, None, NO_METRICS_AUTH))
        needs.append(Need("create", "authorization.k8s.io", "subjectaccessreviews", None, None, NO_METRICS_AUTH))
    if plan.leader_election:
        needs += [
            Need("create", "coordination.k8s.io", "leases", ons, None, NO_LEADER_ELECTION),
            Need("get", "coordination.k8s.io", "leases", ons, plan.lease_name, NO_LEADER_ELECTION),
            Need("update", "coordination.k8s.io", "leases", ons, plan.lease_name, NO_LEADER_ELECTION),
        ]
    return _once(needs)


def _once(needs: list[Need]) -> list[Need]:
    """In order, without repeats: the same permission asked for two reasons is checked once (the first reason's
    fix is kept)."""
    seen: dict[tuple[str, str, str, str | None, str | None], Need] = {}
    for need in needs:
        key = (need.verb, need.group, need.resource, need.namespace, need.name)
        if key not in seen or (need.required and not seen[key].required):  # required wins, in the first place
            seen[key] = need
    return list(seen.values())


def _unless(kind: ChildKind) -> str:
    """What a denied optional child kind costs (the start-up warning says it)."""
    return (
        f"{kind.purpose or kind.plural} cannot be written: TrainJobs whose runtime makes them fail"
        if kind.optional
        else ""
    )


def public_configmap(namespace: str) -> dict[str, Any]:
    """The ConfigMap the kubeflow SDK's `TrainerClient()` reads at start-up (`verify_backend`: without it, a 404 dump),
    as the chart ships it: the Kubeflow Trainer version this operator serves."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": c.PUBLIC_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "trainjob-operator"},
        },
        "data": {"kubeflow_trainer_version": c.TRAINER_VERSION},
    }


def may_publish_public_configmap(plan: Plan, facts: "Facts") -> bool:
    """Whether the operator may read and create the SDK's ConfigMap in its namespace (else a warning said why)."""
    return not any(need.resource == "configmaps" and need.namespace == plan.operator_namespace for need in facts.denied)


# --- facts and the decision ---------------------------------------------------------------------------------------

NamespaceState = Literal["exists", "missing", "unknown"]


@dataclass(frozen=True)
class Facts:
    """What the executor found out."""

    served: Mapping[str, frozenset[str] | None]
    """Resources served per group/version (discovery); None when the API server does not serve that group/version."""
    namespace: NamespaceState = "exists"
    """The operator namespace; "unknown" when this user may not read namespaces."""
    can_create_namespace: bool = False
    denied: tuple[Need, ...] = ()
    user: str = "this user"
    streams_initial_events: bool = False
    """The API server answers a watch with `sendInitialEvents` (streaming lists, Kubernetes 1.34+ with the watch
    cache on): the watches then start from the watch cache instead of paged LISTs (docs/performance.md)."""


def may_watch_pods(facts: Facts) -> bool:
    """RBAC lets the operator list and watch pods wherever it watches TrainJobs."""
    return not any(need.resource == "pods" and need.verb in ("list", "watch") for need in facts.denied)


@dataclass(frozen=True)
class Decision:
    fatal: str | None = None
    """The one line to print before exiting; None to go on."""
    create_namespace: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.fatal is None


def missing_apis(served: Mapping[str, frozenset[str] | None]) -> list[Api]:
    return [api for api in REQUIRED_APIS if api.plural not in (served.get(api.group_version) or frozenset())]


def _names(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def decide(plan: Plan, facts: Facts) -> Decision:
    """Go on (maybe creating the operator namespace first), or the one line that says what is missing and its fix.
    Missing CRDs come first: without them nothing else can be judged."""
    missing = missing_apis(facts.served)
    if missing:
        fixes = list(dict.fromkeys(api.fix for api in missing))
        return Decision(fatal=f"CRDs not installed: {_names([api.crd for api in missing])}; " + "; and ".join(fixes))
    create = False
    if plan.needs_namespace and facts.namespace == "missing":
        if not facts.can_create_namespace:
            ns = plan.operator_namespace
            return Decision(
                fatal=f"operator namespace {ns} does not exist and {facts.user} may not create it: "
                f"`kubectl create namespace {ns}`, or pass --operator-namespace <an existing "
                f"namespace>"
            )
        create = True
    required = [need for need in facts.denied if need.required]
    if required:
        first = required[0]
        also = (
            f" (and {len(required) - 1} more: {_names([n.describe() for n in required[1:]])})"
            if len(required) > 1
            else ""
        )
        hint = ""
        if facts.namespace == "unknown" and first.namespace == plan.operator_namespace:
            hint = f" (does namespace {plan.operator_namespace} exist?)"
        fix = RBAC_FIX + (f", {first.fix}" if first.fix else "")
        return Decision(fatal=f"RBAC: {facts.user} may not {first.describe()}{hint}{also}; {fix}")
    warnings = tuple(
        f"RBAC: {facts.user} may not {need.describe()}; " + (need.fix or "runtimes or clusters that need it will fail")
        for need in facts.denied
        if not need.required
    )
    return Decision(create_namespace=create, warnings=warnings)


# --- reaching the API server --------------------------------------------------------------------------------------

CONNECT_DEADLINE = 20.0
"""Seconds of retrying an API server that does not answer before giving up: with the interpreter's start and the
kubeconfig resolved, the whole run stays under 30 s."""


def backoff(attempt: int, base: float = 0.5, cap: float = 5.0) -> float:
    """Seconds to wait after failed attempt number `attempt` (0-based): 0.5, 1, 2, 4, 5, 5, ..."""
    return float(min(cap, base * 2 ** max(attempt, 0)))


def unreachable(server: str, source: str, error: str, waited: float) -> str:
    return (
        f"cannot reach the API server {server} ({source}) after {waited:.0f} s: {error}; is the cluster up and "
        f"is this the right --kubeconfig/--context? (`kubectl cluster-info` tries the same)"
    )


def unauthorized(server: str, source: str, status: int, message: str) -> str:
    what = "rejected the credentials" if status == 401 else "refused the request"
    return (
        f"the API server {server} {what} of {source} ({status}: {message}); refresh or fix the user's credentials "
        f"in the kubeconfig, or pass another --context"
    )


def untrusted(server: str, source: str, error: str) -> str:
    return (
        f"TLS to {server} ({source}) failed: {error}; set the cluster's certificate-authority(-data) in the "
        f"kubeconfig (insecure-skip-tls-verify: true only for throw-away clusters)"
    )


# --- the API server reaches the webhooks ---------------------------------------------------------------------------

WebhookProbe = Literal["reachable", "unreachable", "unknown", "again"]
PROBE_RUNTIME = "trainjob-operator-webhook-probe"
"""A runtime that never exists: the dry-run TrainJob that names it is refused by our webhook, if it is called."""


def webhook_probe(status: int, message: str) -> WebhookProbe:
    """The answer to a dry-run create of a TrainJob naming a missing runtime: our webhook refused it (so the API
    server reaches it), the API server could not call it, we may not ask (RBAC), or not decided yet (the API server
    has not loaded the new configurations: ask again)."""
    if "failed calling webhook" in message:
        return "unreachable"
    if "denied the request" in message and PROBE_RUNTIME in message:
        return "reachable"
    if status == 403:
        return "unknown"
    return "again"


def webhooks_unreachable(url: str, detail: str) -> str:
    return (
        f"the API server cannot call the operator's webhooks at {url} ({detail}); set webhook.host and "
        f"webhook.url_host in --config to an address of this machine the API server reaches, or run with "
        f"--no-webhooks"
    )


# --- readiness ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Readiness:
    preflight_done: bool = False
    pending_caches: tuple[str, ...] = ()
    webhooks_enabled: bool = True
    webhooks_registered: bool = False
    """With webhooks or the status server: the certificate is settled (and the webhook configurations registered)."""
    status_server: bool = False
    leader_election: bool = True
    leader: bool = False
    holder: str | None = None
    lease: str = ""


def readiness(state: Readiness) -> tuple[bool, str]:
    """/readyz: ready once the operator serves: the cluster checked, caches synced and, with webhooks, the webhook
    configurations registered. A replica that does not hold the Lease is ready too: it serves webhooks (which a
    Service routes only to ready replicas) and keeps warm caches; its body says it is standing by."""
    if not state.preflight_done:
        return False, "starting: checking the cluster (CRDs, operator namespace, RBAC)"
    if state.pending_caches:
        return False, f"starting: waiting for caches to sync: {', '.join(state.pending_caches)}"
    if state.webhooks_enabled and not state.webhooks_registered:
        return False, "starting: webhook certificate and configurations not registered yet"
    if state.status_server and not state.webhooks_registered:
        return False, "starting: the status server's certificate is not settled yet"
    serving = "serving webhooks" if state.webhooks_enabled else "webhooks disabled"
    if state.leader_election and not state.leader:
        holder = f" held by {state.holder}" if state.holder else ""
        return True, f"ok: standing by, not the leader (Lease {state.lease}{holder}); {serving}; not reconciling"
    return True, f"ok: leader, reconciling; {serving}" if state.leader_election else f"ok: reconciling; {serving}"


# --- caches synced ------------------------------------------------------------------------------------------------


@dataclass
class CacheSync:
    """When kopf's initial listing of a resource has reached our caches (as controller-runtime's WaitForCacheSync).
    The operator calls `complete` when the watch stream says the listing is over (every object of it was delivered
    first). `expect` (a count of objects, e.g. from a one-item LIST) is the other way: synced once as many objects
    arrived from the initial listing, or once a live watch event arrived; a lower count seen later (objects deleted
    meanwhile) lowers the expectation."""

    resources: tuple[str, ...] = ()
    """Every watched collection; one not counted yet is pending."""
    expected: dict[str, int] = field(default_factory=dict)
    listed: dict[str, int] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)

    def expect(self, resource: str, count: int) -> None:
        current = self.expected.get(resource)
        self.expected[resource] = count if current is None else min(current, count)

    def seen(self, resource: str, initial: bool) -> None:
        if initial:
            self.listed[resource] = self.listed.get(resource, 0) + 1
        else:
            self.live.add(resource)

    def complete(self, resource: str) -> None:
        """The initial listing is over and every object of it reached the cache (the watch stream said so)."""
        self.live.add(resource)

    def pending(self) -> tuple[str, ...]:
        return tuple(
            sorted(
                r
                for r in {*self.resources, *self.expected}
                if r not in self.live and (r not in self.expected or self.listed.get(r, 0) < self.expected[r])
            )
        )
