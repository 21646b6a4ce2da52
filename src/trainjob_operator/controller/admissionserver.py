"""The admission webhooks over TLS: an AdmissionReview v1 server, its CA and serving certificate, and the
webhook configurations that point the API server at it (kept current, caBundle included)."""

import asyncio
import base64
import datetime as dt
import json
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from .. import certs
from ..api import constants as c
from ..config import Webhook
from ..k8s.client import ApiError, KubeClient, is_transient
from ..logs import Aggregator, error_fields, get
from ..metrics import Metrics
from ..runtime import startup
from ..runtime.errors import describe, printable

log = get("trainjob_operator.admission")

MUTATE_TRAINJOB = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_TRAINJOB = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_RUNTIME = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
VALIDATE_CLUSTER_RUNTIME = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"


@dataclass(frozen=True)
class AdmissionVerdict:
    allowed: bool = True
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: list[dict[str, Any]] | None = None
    code: int = 403


def load_certificate(context: ssl.SSLContext, bundle: certs.Bundle) -> None:
    """Serve `bundle`'s certificate from `context`: new handshakes use it (rotation without a restart).

    `load_cert_chain` reads only files, so the key is written to a private (0700) directory for that one call and
    removed with it: no private key outlives the load on the pod's disk, and a process killed by SIGKILL leaves at
    most one such directory, not one per server and start (they used to accumulate in /tmp, hundreds per host).
    """
    with tempfile.TemporaryDirectory(prefix="trainjob-operator-certs-") as directory:
        cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.write(bundle.key)
        with open(cert, "wb") as handle:
            handle.write(bundle.cert)
        context.load_cert_chain(cert, key)


Review = dict[str, Any]
Handler = Callable[[Review], Awaitable[AdmissionVerdict]]


def response(request: Review, verdict: AdmissionVerdict) -> dict[str, Any]:
    body: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": verdict.allowed}
    if not verdict.allowed:
        body["status"] = {
            "code": verdict.code,
            "message": printable(verdict.message),  # kubectl prints it to a terminal as it is
            "reason": "Forbidden" if verdict.code == 403 else "BadRequest",
        }
    if verdict.warnings:
        body["warnings"] = [printable(warning) for warning in verdict.warnings]
    if verdict.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": body}


class AdmissionServer:
    """Serves `handlers` by path; the certificate can be swapped while running (rotation)."""

    def __init__(
        self, host: str, port: int, handlers: dict[str, Handler], metrics: Metrics, drain_seconds: float = 0.0
    ) -> None:
        self.host, self.port, self.handlers, self.metrics = host, port, handlers, metrics
        self.drain_seconds = drain_seconds
        self.draining = False
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._runner: web.AppRunner | None = None
        self.started = False
        self.failures = Aggregator()

    def load(self, bundle: certs.Bundle) -> None:
        load_certificate(self.ssl, bundle)

    async def _serve(self, request: web.Request) -> web.Response:
        handler = self.handlers.get(request.path)
        if handler is None:
            return web.json_response({"message": f"no webhook at {request.path}"}, status=404)
        started = time.perf_counter()
        try:
            review = await request.json()
            inner = review.get("request") or {}
        except (ValueError, AttributeError, RecursionError):
            return web.json_response({"message": "the body is not an AdmissionReview"}, status=400)
        except OSError as err:  # the API server gave up on the call (its timeout, a restart): nobody to answer
            if self.failures.admit(f"{request.path} read {type(err).__name__}") is not None:
                log.warning("webhook request lost while reading it", path=request.path, **error_fields(err))
            return web.json_response({"message": "the request was cut"}, status=400)
        try:
            verdict = await handler(inner)
        except Exception as err:  # never let one bad object take the webhook down: refuse it, naming the cause
            if self.failures.admit(f"{request.path} {type(err).__name__}") is not None:
                if is_transient(err):  # the API server failed, not our code: no traceback (docs/reliability.md)
                    log.warning("webhook could not read what it needs; refused", path=request.path, **error_fields(err))
                else:
                    log.error(
                        "webhook failed on an object; refused", path=request.path, exc_info=err, **error_fields(err)
                    )
            verdict = AdmissionVerdict(
                allowed=False, message=f"the object cannot be checked: {describe(err)}", code=400
            )
        self.metrics.webhook_seconds.labels(
            webhook=request.path.strip("/"), allowed=str(verdict.allowed).lower()
        ).observe(time.perf_counter() - started)
        answer = web.json_response(response(inner, verdict))
        if self.draining:
            answer.force_close()  # `Connection: close`: the API server opens its next call elsewhere
        return answer

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/{path:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl)
        await site.start()
        self.started = True
        log.info("webhook server listening", host=self.host, port=self.port)

    async def stop(self) -> None:
        """Drain, then close: for `drain_seconds` every answer closes its connection (the client sees `Connection:
        close` and will not reuse it) while the listener stays open for calls still routed here; then the listener
        and the connections left idle close. Closing a kept-alive connection at once races the API server's next
        call on it, which fails and refuses the object (tests/realnode/test_chart_lifecycle.py: a `helm upgrade`
        under applies refuses none)."""
        if self._runner is None:
            return
        if self.started and self.drain_seconds > 0:
            self.draining = True
            log.info("webhook server draining", seconds=self.drain_seconds)
            await asyncio.sleep(self.drain_seconds)
        await self._runner.cleanup()


# --- certificate Secret and webhook configurations -------------------------------------------------------


def _hosts(cfg: Webhook, namespace: str, extra: Sequence[str] = ()) -> list[str]:
    if cfg.service_name:
        svc = cfg.service_name
        return [f"{svc}.{namespace}.svc", svc, f"{svc}.{namespace}", f"{svc}.{namespace}.svc.cluster.local"]
    hosts = [cfg.url_host or cfg.host]
    return hosts + [h for h in extra if h not in hosts]


def _bundle_of(secret: dict[str, Any]) -> certs.Bundle | None:
    data = secret.get("data") or {}
    try:
        return certs.Bundle(*(base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")))
    except (KeyError, ValueError):
        return None


async def ensure_certificate(
    client: KubeClient, cfg: Webhook, namespace: str, now: dt.datetime, extra_hosts: Sequence[str] = ()
) -> certs.Bundle:
    """The serving certificate from its Secret; generated or rotated when missing, expiring or for other hosts.
    Replicas race safely: the loser of a create/replace conflict re-reads the winner's Secret."""
    hosts = _hosts(cfg, namespace, extra_hosts)
    for _ in range(5):
        secret = await client.get("v1", "Secret", cfg.cert_secret_name, namespace)
        bundle = _bundle_of(secret) if secret else None
        if bundle is not None and not certs.needs_rotation(bundle, hosts, now, cfg.rotate_before_days):
            return bundle
        keep_ca = bundle is not None and certs.ca_outlives(bundle, now, cfg.cert_validity_days)
        fresh = certs.generate(hosts, now, cfg.cert_validity_days, ca_of=bundle if keep_ca else None)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": cfg.cert_secret_name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "trainjob-operator"},
            },
            "data": {
                k: base64.b64encode(v).decode()
                for k, v in (
                    ("ca.crt", fresh.ca_cert),
                    ("ca.key", fresh.ca_key),
                    ("tls.crt", fresh.cert),
                    ("tls.key", fresh.key),
                )
            },
        }
        try:
            if secret is None:
                await client.create(body)
            else:
                body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                await client.replace(body)
            log.info(
                "webhook certificate issued", secret=cfg.cert_secret_name, hosts=hosts, ca="kept" if keep_ca else "new"
            )
            return fresh
        except ApiError as err:
            if err.status not in (404, 409):
                raise
    raise RuntimeError(f"cannot settle the webhook certificate Secret {namespace}/{cfg.cert_secret_name}")


def _client_config(cfg: Webhook, namespace: str, path: str, ca: bytes) -> dict[str, Any]:
    bundle = base64.b64encode(ca).decode()
    if cfg.service_name:
        return {
            "service": {"name": cfg.service_name, "namespace": namespace, "path": path, "port": cfg.service_port},
            "caBundle": bundle,
        }
    return {"url": f"https://{cfg.url_host or cfg.host}:{cfg.url_port or cfg.port}{path}", "caBundle": bundle}


def _webhook(
    name: str, path: str, plural: str, cfg: Webhook, namespace: str, ca: bytes, runtime: bool = False
) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name,
        "clientConfig": _client_config(cfg, namespace, path, ca),
        "rules": [
            {
                "apiGroups": [c.GROUP],
                "apiVersions": [c.VERSION],
                "operations": ["CREATE", "UPDATE"],
                "resources": [plural],
            }
        ],
        "failurePolicy": cfg.failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "matchPolicy": "Equivalent",
        "timeoutSeconds": 10,
    }
    if runtime:
        hook["objectSelector"] = {
            "matchExpressions": [{"key": c.WEBHOOK_VALIDATION_LABEL, "operator": "NotIn", "values": ["disabled"]}]
        }
    return hook


def webhook_configurations(cfg: Webhook, namespace: str, ca: bytes) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/managed-by": "trainjob-operator"}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": cfg.mutating_name, "labels": labels},
            "webhooks": [
                _webhook("defaulter.trainjob.trainer.kubeflow.org", MUTATE_TRAINJOB, "trainjobs", cfg, namespace, ca)
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": cfg.validating_name, "labels": labels},
            "webhooks": [
                _webhook("validator.trainjob.trainer.kubeflow.org", VALIDATE_TRAINJOB, "trainjobs", cfg, namespace, ca),
                _webhook(
                    "validator.trainingruntime.trainer.kubeflow.org",
                    VALIDATE_RUNTIME,
                    "trainingruntimes",
                    cfg,
                    namespace,
                    ca,
                    runtime=True,
                ),
                _webhook(
                    "validator.clustertrainingruntime.trainer.kubeflow.org",
                    VALIDATE_CLUSTER_RUNTIME,
                    "clustertrainingruntimes",
                    cfg,
                    namespace,
                    ca,
                    runtime=True,
                ),
            ],
        },
    ]


class TLSServer(Protocol):
    started: bool

    def load(self, bundle: certs.Bundle) -> None: ...

    async def start(self) -> None: ...


def webhook_url(cfg: Webhook, namespace: str) -> str:
    if cfg.service_name:
        return f"https://{cfg.service_name}.{namespace}.svc:{cfg.service_port}"
    return f"https://{cfg.url_host or cfg.host}:{cfg.port}"


async def probe_webhooks(client: KubeClient, namespace: str, attempts: int = 20, interval: float = 0.5) -> str | None:
    """Does the API server reach our webhooks? A dry-run TrainJob naming a runtime that never exists: our webhook
    refuses it, or the API server says it failed calling it. The failure's words, or None (reachable, or this user
    may not create TrainJobs to find out)."""
    body = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {"runtimeRef": {"name": startup.PROBE_RUNTIME, "kind": c.CLUSTER_TRAINING_RUNTIME_KIND}},
    }
    for _ in range(attempts):
        try:
            await client.request(
                "POST", f"/apis/{c.API_VERSION}/namespaces/{namespace}/trainjobs", body=body, params={"dryRun": "All"}
            )
            verdict, message = startup.webhook_probe(201, ""), ""
        except ApiError as err:
            verdict, message = startup.webhook_probe(err.status, err.message), err.message
        if verdict == "unreachable":
            return message
        if verdict in ("reachable", "unknown"):
            log.info("webhook probe", result=verdict)
            return None
        await asyncio.sleep(interval)  # the API server loads new configurations within a second or so
    return None


async def keep_webhooks_current(
    client: KubeClient,
    server: TLSServer | None,
    cfg: Webhook,
    namespace: str,
    clock: Callable[[], dt.datetime],
    ready: asyncio.Event,
    interval: float = 300,
    also: Sequence[TLSServer] = (),
    extra_hosts: Sequence[str] = (),
    on_bundle: Callable[[certs.Bundle], None] | None = None,
    fatal: Callable[[str], None] | None = None,
) -> None:
    """Load the certificate, publish the configurations, check once that the API server reaches them (`fatal` is
    told when not), then re-check periodically (rotation, other replicas).

    `server` is the webhook server (None: webhooks off, nothing published); `also` are other servers sharing the
    certificate (the status server), `extra_hosts` their host names, `on_bundle` learns each new bundle."""
    current: bytes | None = None
    probed = fatal is None or server is None
    while True:
        try:
            bundle = await ensure_certificate(client, cfg, namespace, clock(), extra_hosts)
            if bundle.cert != current:
                for each in ([server] if server is not None else []) + list(also):
                    each.load(bundle)
                    if not each.started:
                        await each.start()
                if server is not None:
                    for obj in webhook_configurations(cfg, namespace, bundle.ca_cert):
                        await client.apply(obj, "trainjob-operator", force=True)
                if on_bundle is not None:
                    on_bundle(bundle)
                current = bundle.cert
            if not probed:
                failure = await probe_webhooks(client, namespace)
                probed = True
                if failure is not None and fatal is not None:
                    fatal(startup.webhooks_unreachable(webhook_url(cfg, namespace), failure))
                    return
            ready.set()
        except Exception as err:  # any failure (aiohttp's disconnects included) is retried, never ends the loop
            log.warning("cannot settle webhook certificate or configurations", **error_fields(err))
            await asyncio.sleep(5)
            continue
        await asyncio.sleep(interval)
