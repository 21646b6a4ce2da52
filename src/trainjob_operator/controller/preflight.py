"""The start-up checks' executor: asks the API server the questions `runtime/startup.py` decides on, creates the
operator namespace when that is the decision, and raises `StartupError` with the one line to print otherwise."""

import asyncio
import json
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp

from ..api import constants as c
from ..k8s.client import BUILTIN, ApiError, KubeClient
from ..logs import error_fields, get
from ..runtime import startup
from ..runtime.startup import Facts, NamespaceState, Need, Plan

log = get("trainjob_operator.startup")

ATTEMPT_TIMEOUT = 5.0


class StartupError(Exception):
    """The operator cannot start; the message is the one line for the user."""


def _gv_path(group_version: str) -> str:
    return "/api/v1" if group_version == "v1" else f"/apis/{group_version}"


def _tls_failure(err: BaseException) -> str | None:
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        return str(err.certificate_error)
    if isinstance(err, aiohttp.ClientSSLError | ssl.SSLError):
        return str(err)
    return None


async def connect(
    client: KubeClient, deadline: float = startup.CONNECT_DEADLINE, sleep: Callable[[float], Any] = asyncio.sleep
) -> dict[str, Any]:
    """GET /version until it answers, backing off; the server's version. Credentials or TLS that will never work
    fail at once; an API server that does not answer fails after `deadline` seconds."""
    connection = client.connection
    loop = asyncio.get_running_loop()
    started = loop.time()
    attempt = 0
    while True:
        remaining = deadline - (loop.time() - started)
        try:
            version: dict[str, Any] = await asyncio.wait_for(
                client.request("GET", "/version"), max(0.5, min(ATTEMPT_TIMEOUT, remaining))
            )
            return version
        except ApiError as err:
            if err.status in (401, 403):
                raise StartupError(
                    startup.unauthorized(connection.server, connection.source, err.status, err.message)
                ) from err
            if err.status < 500 and err.status != 429:
                raise StartupError(
                    f"the API server {connection.server} ({connection.source}) answered GET /version "
                    f"with {err}; is it a Kubernetes API server?"
                ) from err
            error = str(err)
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            tls = _tls_failure(err)
            if tls is not None:
                raise StartupError(startup.untrusted(connection.server, connection.source, tls)) from err
            error = str(err) or type(err).__name__
        delay = startup.backoff(attempt)
        waited = loop.time() - started
        if waited + delay > deadline:
            raise StartupError(startup.unreachable(connection.server, connection.source, error, waited))
        log.warning(
            "API server not reachable yet; retrying",
            server=connection.server,
            error=error,
            retry_in=delay,
            attempt=attempt + 1,
        )
        attempt += 1
        await sleep(delay)


async def served(client: KubeClient, group_versions: list[str]) -> dict[str, frozenset[str] | None]:
    """Discovery: the resources each group/version serves (None when it is not served at all)."""

    async def one(group_version: str) -> frozenset[str] | None:
        try:
            listing = await client.request("GET", _gv_path(group_version))
        except ApiError as err:
            if err.status in (404, 503):
                return None
            raise
        return frozenset(str(r.get("name")) for r in listing.get("resources") or [])

    found = await asyncio.gather(*(one(gv) for gv in group_versions))
    return dict(zip(group_versions, found, strict=True))


async def who_am_i(client: KubeClient) -> str:
    try:
        review = await client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    except ApiError:
        return "this user"
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "this user")


async def allowed(client: KubeClient, need: Need) -> bool:
    plural, _, sub = need.resource.partition("/")
    attributes = {
        "verb": need.verb,
        "group": need.group,
        "resource": plural,
        "subresource": sub,
        "namespace": need.namespace or "",
        "name": need.name or "",
    }
    review = await client.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return bool((review.get("status") or {}).get("allowed"))


async def namespace_state(client: KubeClient, name: str) -> NamespaceState:
    try:
        await client.request("GET", f"/api/v1/namespaces/{name}")
    except ApiError as err:
        if err.status == 404:
            return "missing"
        if err.status == 403:
            return "unknown"
        raise
    return "exists"


STREAMING_PROBE_SELECTOR = "trainer.kubeflow.org/streaming-list-probe=none"
"""A label no TrainJob carries: the probe's stream holds nothing but the bookmark that ends its initial events."""
STREAMING_PROBE_TIMEOUT = 5.0
STREAMING_PROBE_DEADLINE = 15.0
"""How long the probe waits out 429s (a watch cache still initialising) before it settles for paged LISTs."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


async def streams_initial_events(client: KubeClient, plan: Plan) -> bool:
    """Whether the API server streams a watch's initial state (`sendInitialEvents=true`): asked once, of TrainJobs
    with a selector that matches none, so the answer is one bookmark. An API server without streaming lists (before
    Kubernetes 1.34, the WatchList feature gate off, the watch cache off) refuses the parameters or never sends the
    bookmark: the watches then list in pages, as before. Any failure counts as "no"."""
    path = BUILTIN.resource_of(c.API_VERSION, c.TRAINJOB_KIND).path(plan.namespaces[0] if plan.namespaces else None)
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "labelSelector": STREAMING_PROBE_SELECTOR,
        "timeoutSeconds": "2",
    }

    async def first_bookmark() -> bool:
        async for line in client.stream_lines(path, params, read_timeout=STREAMING_PROBE_TIMEOUT):
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "BOOKMARK":
                annotations = (event.get("object") or {}).get("metadata", {}).get("annotations") or {}
                return annotations.get(INITIAL_EVENTS_END) == "true"
        return False

    loop = asyncio.get_running_loop()
    deadline = loop.time() + STREAMING_PROBE_DEADLINE
    while True:
        try:
            return await asyncio.wait_for(first_bookmark(), STREAMING_PROBE_TIMEOUT)
        except ApiError as err:
            # 429 "storage is (re)initializing": a CRD installed moments ago has no watch cache yet (seen in
            # tests/integration/test_startup_cluster.py, CRDs applied just before the operator starts)
            pause = err.retry_after or 1.0
            if err.status == 429 and loop.time() + pause < deadline:
                await asyncio.sleep(pause)
                continue
            reason = str(err)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
            reason = str(err) or type(err).__name__
        log.info("the API server does not stream initial events; watches list in pages", reason=reason[:200])
        return False


async def gather_facts(client: KubeClient, plan: Plan) -> Facts:
    group_versions = list(dict.fromkeys(api.group_version for api in startup.REQUIRED_APIS))
    apis = await served(client, group_versions)
    if startup.missing_apis(apis):
        return Facts(served=apis)
    needs = startup.permissions(plan)
    user, state, can_create, verdicts, streams = await asyncio.gather(
        who_am_i(client),
        namespace_state(client, plan.operator_namespace) if plan.needs_namespace else _exists(),
        allowed(client, Need("create", "", "namespaces")),
        asyncio.gather(*(allowed(client, need) for need in needs)),
        streams_initial_events(client, plan) if plan.streaming_lists else _no(),
    )
    denied = tuple(need for need, ok in zip(needs, verdicts, strict=True) if not ok)
    return Facts(
        served=apis,
        namespace=state,
        can_create_namespace=can_create,
        denied=denied,
        user=user,
        streams_initial_events=streams,
    )


async def _no() -> bool:
    return False


async def _exists() -> NamespaceState:
    return "exists"


async def create_namespace(client: KubeClient, name: str) -> None:
    try:
        await client.request(
            "POST",
            "/api/v1/namespaces",
            body={
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "trainjob-operator"}},
            },
        )
    except ApiError as err:
        if err.status != 409:
            raise
    log.info("created the operator namespace", namespace=name)


async def publish_public_configmap(client: KubeClient, namespace: str) -> None:
    """The ConfigMap the kubeflow SDK's TrainerClient() reads, created when missing (idempotent; one that exists, the
    chart's, is left as it is). Not being able to is a warning: training works without it."""
    want = startup.public_configmap(namespace)
    try:
        if await client.get("v1", "ConfigMap", c.PUBLIC_CONFIGMAP, namespace) is not None:
            return
        await client.create(want, field_manager=c.FIELD_MANAGER)
    except ApiError as err:
        if err.status != 409:  # another replica created it first
            log.warning(
                "cannot create the ConfigMap the kubeflow SDK reads", name=c.PUBLIC_CONFIGMAP, **error_fields(err)
            )
        return
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        log.warning("cannot create the ConfigMap the kubeflow SDK reads", name=c.PUBLIC_CONFIGMAP, **error_fields(err))
        return
    log.info("created the ConfigMap the kubeflow SDK reads", name=c.PUBLIC_CONFIGMAP, namespace=namespace)


async def preflight(client: KubeClient, plan: Plan, deadline: float = startup.CONNECT_DEADLINE) -> Facts:
    """Reach the API server, check CRDs, the operator namespace and RBAC; create the namespace when missing and
    allowed. Raises StartupError with the one line to print."""
    version = await connect(client, deadline)
    try:
        facts = await gather_facts(client, plan)
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
        raise StartupError(f"checking the cluster at {client.connection.server} failed: {err}") from err
    decision = startup.decide(plan, facts)
    for warning in decision.warnings:
        log.warning(warning)
    if decision.fatal is not None:
        raise StartupError(decision.fatal)
    if decision.create_namespace:
        await create_namespace(client, plan.operator_namespace)
    if startup.may_publish_public_configmap(plan, facts):
        await publish_public_configmap(client, plan.operator_namespace)
    log.info(
        "cluster checked",
        server=client.connection.server,
        source=client.connection.source,
        kubernetes=version.get("gitVersion"),
        user=facts.user,
        operator_namespace=plan.operator_namespace,
        namespace_created=decision.create_namespace,
        streaming_lists=facts.streams_initial_events,
    )
    return facts
