"""Where the API server is and how to authenticate: a kubeconfig, read the way kubectl reads it, or the in-cluster
service account.

Kubeconfigs are resolved by the official `kubernetes` client's loader in a short-lived helper process
(`k8s/kubeconfig.py`), so every kind of credential kubectl accepts works while this process never holds that library
(~60 MiB). Credentials are loaded once; an exec plugin's or auth provider's token is resolved again shortly before it
expires, and any kubeconfig credential again when the API server answers 401.
"""

import asyncio
import contextlib
import datetime as dt
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
RESOLVE_TIMEOUT = 90.0
"""A last resort: the helper itself gives an exec plugin 20 s (k8s/kubeconfig.py); this also covers its start on a
busy machine."""
EXPIRY_MARGIN = dt.timedelta(seconds=60)


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Connection:
    server: str
    ssl_context: ssl.SSLContext
    authorization: str | None = None
    """The Authorization header ("Bearer …", "Basic …")."""
    token_file: Path | None = None
    """In a cluster: the projected service-account token, read again on use (the kubelet rotates it)."""
    default_namespace: str = "default"
    ca_pem: str | None = None
    ca_path: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    expiry: dt.datetime | None = None
    refreshable: bool = False
    """Resolving the kubeconfig again may give other credentials (exec plugin, auth provider, token file)."""
    source: str = "in-cluster service account"
    """For messages: which context of which kubeconfig."""
    kubeconfig: str | None = None
    context: str | None = None
    resolved_at: float = field(default=0.0, compare=False)
    """time.monotonic() when resolved."""

    def header(self) -> str | None:
        if self.token_file is not None:
            return f"Bearer {self.token_file.read_text().strip()}"
        return self.authorization

    def scheme_and_token(self) -> tuple[str | None, str | None]:
        header = self.header()
        if not header:
            return None, None
        scheme, _, token = header.partition(" ")
        return (scheme, token) if token else (None, scheme)

    def expiring(self, now: dt.datetime) -> bool:
        return self.expiry is not None and now >= self.expiry - EXPIRY_MARGIN


def ssl_context(
    ca_pem: str | None, ca_path: str | None, cert_pem: str | None, key_pem: str | None, insecure: bool
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_path, cadata=ca_pem)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_pem and key_pem:
        # ssl loads a client key only from a file: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="tjo-") as tmp:
            cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert.write_text(cert_pem)
            with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
                handle.write(key_pem)
            context.load_cert_chain(str(cert), str(key))
    return context


def from_resolved(data: dict[str, Any], kubeconfig: str | None, context: str | None, now: float) -> Connection:
    """A Connection from the helper's JSON."""
    server = str(data.get("server") or "").rstrip("/")
    source = str(data.get("source") or "the kubeconfig")
    if not server:
        raise ConfigError(f"{source}: the cluster has no server")
    proxy = data.get("proxy_url")
    if proxy and not str(proxy).startswith(("http://", "https://")):
        raise ConfigError(f"{source}: proxy-url {proxy}: only http:// and https:// proxies are supported")
    expiry = dt.datetime.fromisoformat(data["expiry"]) if data.get("expiry") else None
    if expiry is not None and expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=dt.UTC)
    try:
        context_ssl = ssl_context(
            data.get("ca_pem"), None, data.get("cert_pem"), data.get("key_pem"), bool(data.get("insecure"))
        )
    except (ssl.SSLError, ValueError) as err:
        raise ConfigError(f"{source}: unusable certificate-authority or client certificate: {err}") from err
    return Connection(
        server=server,
        ssl_context=context_ssl,
        authorization=data.get("authorization"),
        default_namespace=data.get("namespace") or "default",
        ca_pem=data.get("ca_pem"),
        cert_pem=data.get("cert_pem"),
        key_pem=data.get("key_pem"),
        insecure=bool(data.get("insecure")),
        tls_server_name=data.get("tls_server_name"),
        proxy_url=proxy,
        expiry=expiry,
        refreshable=bool(data.get("refreshable")),
        source=source,
        kubeconfig=kubeconfig,
        context=context or data.get("context"),
        resolved_at=now,
    )


def _resolver_args(kubeconfig: str | None, context: str | None) -> list[str]:
    args = [sys.executable, "-m", "trainjob_operator.k8s.kubeconfig"]
    if kubeconfig:
        args += ["--kubeconfig", kubeconfig]
    if context:
        args += ["--context", context]
    return args


def _timed_out(kubeconfig: str | None) -> ConfigError:
    return ConfigError(
        f"kubeconfig {kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'}: the helper "
        f"that reads it did not finish within {RESOLVE_TIMEOUT:.0f} s"
    )


def _connection(code: int | None, out: bytes, err: bytes, kubeconfig: str | None, context: str | None) -> Connection:
    if code != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        raise ConfigError(lines[-1] if lines else f"kubeconfig resolver exited with {code}")
    return from_resolved(json.loads(out), kubeconfig, context, time.monotonic())


def from_kubeconfig(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """Resolve the kubeconfig (`kubeconfig`, else $KUBECONFIG, else ~/.kube/config) in the helper process."""
    try:
        proc = subprocess.run(
            _resolver_args(kubeconfig, context),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RESOLVE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _timed_out(kubeconfig) from None
    return _connection(proc.returncode, proc.stdout, proc.stderr, kubeconfig, context)


async def from_kubeconfig_async(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """`from_kubeconfig` without blocking the event loop (refreshes while the operator runs)."""
    proc = await asyncio.create_subprocess_exec(
        *_resolver_args(kubeconfig, context),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RESOLVE_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise _timed_out(kubeconfig) from None
    return _connection(proc.returncode, out, err, kubeconfig, context)


def in_cluster() -> Connection:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    if ":" in host:
        host = f"[{host}]"
    ca = str(SERVICE_ACCOUNT_DIR / "ca.crt")
    return Connection(
        server=f"https://{host}:{port}",
        ssl_context=ssl.create_default_context(cafile=ca),
        token_file=SERVICE_ACCOUNT_DIR / "token",
        default_namespace=namespace,
        ca_path=ca,
    )


def use_in_cluster(kubeconfig: str | None, context: str | None) -> bool:
    """kubectl's order: `--kubeconfig`, $KUBECONFIG, then in a Pod its service account, then ~/.kube/config."""
    return (
        not kubeconfig
        and not context
        and not os.environ.get("KUBECONFIG")
        and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    )


def load(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    if use_in_cluster(kubeconfig, context):
        return in_cluster()
    return from_kubeconfig(kubeconfig, context)


async def refresh(connection: Connection) -> Connection:
    """The same kubeconfig context resolved again (new exec-plugin token, rotated token file)."""
    if connection.token_file is not None:
        return connection  # read on every use
    return await from_kubeconfig_async(connection.kubeconfig, connection.context)
