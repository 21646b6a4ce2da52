"""Where the API server is and how to authenticate: a kubeconfig file or the in-cluster service account."""

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Connection:
    server: str
    ssl_context: ssl.SSLContext | bool
    token: str | None = None
    token_file: Path | None = None
    default_namespace: str = "default"
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    insecure: bool = False

    def bearer(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        return self.token


def _materialize(data_b64: str | None, path: str | None, base: Path) -> str | None:
    """A path for certificate material given inline (base64) or as a path relative to the kubeconfig."""
    if data_b64:
        handle = tempfile.NamedTemporaryFile(delete=False, prefix="tjo-", suffix=".pem")  # noqa: SIM115
        handle.write(base64.b64decode(data_b64))
        handle.close()
        os.chmod(handle.name, 0o600)
        return handle.name
    if path:
        return str((base / path).resolve())
    return None


def _by_name(items: list[dict[str, Any]], name: str, what: str, source: Path) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return item
    raise ConfigError(f"{source}: {what} {name!r} not found")


def from_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> Connection:
    source = Path(path).expanduser()
    try:
        config = yaml.safe_load(source.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read kubeconfig {source}: {err.strerror}") from err
    ctx_name = context or config.get("current-context")
    if not ctx_name:
        raise ConfigError(f"{source}: no current-context")
    ctx = _by_name(config.get("contexts", []), ctx_name, "context", source)["context"]
    cluster = _by_name(config.get("clusters", []), ctx["cluster"], "cluster", source)["cluster"]
    user = _by_name(config.get("users", []), ctx["user"], "user", source).get("user") or {}
    base = source.parent
    ca_path = _materialize(cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), base)
    insecure = bool(cluster.get("insecure-skip-tls-verify"))
    if insecure:
        context_ssl: ssl.SSLContext | bool = False
    else:
        context_ssl = ssl.create_default_context(cafile=ca_path)
    cert = _materialize(user.get("client-certificate-data"), user.get("client-certificate"), base)
    key = _materialize(user.get("client-key-data"), user.get("client-key"), base)
    if cert and key:
        if context_ssl is False:
            context_ssl = ssl.create_default_context()
            context_ssl.check_hostname = False
            context_ssl.verify_mode = ssl.CERT_NONE
        assert isinstance(context_ssl, ssl.SSLContext)
        context_ssl.load_cert_chain(cert, key)
    token_file = Path(user["tokenFile"]) if user.get("tokenFile") else None
    return Connection(
        server=cluster["server"].rstrip("/"),
        ssl_context=context_ssl,
        token=user.get("token"),
        token_file=token_file,
        default_namespace=ctx.get("namespace") or "default",
        ca_path=ca_path,
        cert_path=cert,
        key_path=key,
        insecure=insecure,
    )


def in_cluster() -> Connection:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    if ":" in host:
        host = f"[{host}]"
    return Connection(
        server=f"https://{host}:{port}",
        ssl_context=ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt")),
        token_file=SERVICE_ACCOUNT_DIR / "token",
        default_namespace=namespace,
        ca_path=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
    )


def load(kubeconfig: str | None = None) -> Connection:
    """`--kubeconfig`, else $KUBECONFIG, else in-cluster, else ~/.kube/config."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        return from_kubeconfig(path.split(os.pathsep)[0])
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    return from_kubeconfig(Path.home() / ".kube" / "config")
