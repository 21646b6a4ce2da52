"""Credentials: kubeconfigs resolved by the kubernetes client's loader in a helper process, the Connection made of
them, and the client's refresh when a token expires or is rejected. A local HTTP server stands in for the API
server; the exec plugin against a real one is in tests/integration/test_startup_cluster.py."""

import asyncio
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_apiserver import VERSION, FakeApiServer
from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import ApiError, Client
from trainjob_operator.k8s.connection import ConfigError, Connection


def kubeconfig(
    tmp: Path, users: dict[str, dict[str, Any]], clusters: dict[str, dict[str, Any]] | None = None, current: str = "a"
) -> Path:
    clusters = clusters or {"c": {"server": "http://127.0.0.1:1"}}
    cluster = next(iter(clusters))
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "contexts": [
            {"name": name, "context": {"cluster": cluster, "user": name, "namespace": f"ns-{name}"}} for name in users
        ],
        "clusters": [{"name": name, "cluster": spec} for name, spec in clusters.items()],
        "users": [{"name": name, "user": spec} for name, spec in users.items()],
    }
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def resolve(path: Path, *args: str) -> tuple[int, dict[str, Any] | str]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainjob_operator.k8s.kubeconfig", "--kubeconfig", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr.strip()


def plugin(tmp: Path, token: str, expiry: str | None = None, fail: str | None = None) -> str:
    status: dict[str, Any] = {"token": token}
    if expiry:
        status["expirationTimestamp"] = expiry
    script = tmp / f"plugin-{token}.sh"
    body = (
        f"echo {fail!r} >&2; exit 1"
        if fail
        else "echo '"
        + json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status})
        + "'"
    )
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def exec_user(command: str) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command, "interactiveMode": "Never"}}


def test_the_helper_reads_every_kind_of_credential_kubectl_does(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    path = kubeconfig(
        tmp_path,
        {
            "a": {"token": "static"},
            "b": {"tokenFile": str(token_file)},
            "c": exec_user(plugin(tmp_path, "from-exec", "2030-01-01T00:00:00Z")),
        },
        {
            "c": {
                "server": "https://10.0.0.1:6443/",
                "insecure-skip-tls-verify": True,
                "tls-server-name": "kubernetes",
                "proxy-url": "http://proxy:3128",
            }
        },
    )
    code, first = resolve(path)
    assert code == 0 and isinstance(first, dict)
    assert first == {
        "server": "https://10.0.0.1:6443",
        "context": "a",
        "user": "a",
        "namespace": "ns-a",
        "ca_pem": None,
        "insecure": True,
        "tls_server_name": "kubernetes",
        "cert_pem": None,
        "key_pem": None,
        "authorization": "Bearer static",
        "expiry": None,
        "proxy_url": "http://proxy:3128",
        "refreshable": False,
        "source": f"context a of {path}",
    }
    code, by_file = resolve(path, "--context", "b")
    assert code == 0 and isinstance(by_file, dict)
    assert (by_file["authorization"], by_file["refreshable"]) == ("Bearer from-file", True)
    code, by_exec = resolve(path, "--context", "c")
    assert code == 0 and isinstance(by_exec, dict)
    assert (by_exec["authorization"], by_exec["expiry"], by_exec["refreshable"]) == (
        "Bearer from-exec",
        "2030-01-01T00:00:00+00:00",
        True,
    )


@pytest.mark.parametrize(
    ("users", "args", "want"),
    [
        pytest.param(
            {"a": {"token": "t"}},
            ["--context", "nope"],
            "kubeconfig {path}: no context 'nope' (it has: a); pass one of them to --context",
            id="an unknown context names the ones there are",
        ),
        pytest.param(
            {"a": "PLUGIN_FAILS"},
            [],
            "kubeconfig {path}: the exec credential plugin of user 'a' ({plugin}) "
            "failed: exec: process returned 1. token expired: run `sso login`",
            id="a failing exec plugin: its own words",
        ),
    ],
)
def test_the_helper_says_what_is_wrong_in_one_line(
    tmp_path: Path, users: dict[str, Any], args: list[str], want: str
) -> None:
    command = plugin(tmp_path, "x", fail="token expired: run `sso login`")
    users = {name: exec_user(command) if spec == "PLUGIN_FAILS" else spec for name, spec in users.items()}
    path = kubeconfig(tmp_path, users)
    assert resolve(path, *args) == (2, want.format(path=path, plugin=command))


def test_a_missing_kubeconfig_says_how_to_name_one(tmp_path: Path) -> None:
    assert resolve(tmp_path / "none") == (
        2,
        f"kubeconfig {tmp_path / 'none'} does not exist; pass --kubeconfig PATH or set $KUBECONFIG",
    )


@pytest.mark.parametrize(
    ("kubeconfig_flag", "context", "env", "want"),
    [
        pytest.param(None, None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True, id="in a Pod without a kubeconfig"),
        pytest.param("/k", None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, False, id="--kubeconfig wins"),
        pytest.param(None, "dev", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, False, id="--context means a kubeconfig"),
        pytest.param(
            None, None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": "/k"}, False, id="$KUBECONFIG wins"
        ),
        pytest.param(None, None, {}, False, id="outside a Pod: ~/.kube/config"),
    ],
)
def test_in_cluster_only_without_any_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, kubeconfig_flag: str | None, context: str | None, env: dict[str, str], want: bool
) -> None:
    for name in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert k8s_config.use_in_cluster(kubeconfig_flag, context) is want


def test_socks_proxies_are_refused_by_name() -> None:
    with pytest.raises(ConfigError) as err:
        k8s_config.from_resolved(
            {"server": "https://k", "proxy_url": "socks5://p:1080", "source": "context a of /k"}, "/k", None, 0.0
        )
    assert str(err.value) == (
        "context a of /k: proxy-url socks5://p:1080: only http:// and https:// proxies are supported"
    )


def test_an_expiring_token_and_the_authorization_header() -> None:
    conn = k8s_config.from_resolved(
        {"server": "https://k/", "authorization": "Bearer t", "expiry": "2030-01-01T00:00:00+00:00", "context": "a"},
        None,
        None,
        0.0,
    )
    assert (conn.server, conn.context, conn.scheme_and_token()) == ("https://k", "a", ("Bearer", "t"))
    assert not conn.expiring(dt.datetime(2029, 12, 31, 23, 58, 59, tzinfo=dt.UTC))
    assert conn.expiring(dt.datetime(2029, 12, 31, 23, 59, 1, tzinfo=dt.UTC))


# --- the client refreshes credentials --------------------------------------------------------------------------------


def tokens_sent(fake: FakeApiServer) -> list[str]:
    return [seen.headers.get("Authorization", "") for seen in fake.seen]


async def with_server(fake: FakeApiServer, body: Any) -> Any:
    async with fake:
        return await body(fake.url)


def connection(server: str, token: str, refreshable: bool = True, expiry: dt.datetime | None = None) -> Connection:
    return Connection(
        server=server,
        ssl_context=k8s_config.ssl_context(None, None, None, None, False),
        authorization=f"Bearer {token}",
        refreshable=refreshable,
        expiry=expiry,
    )


@pytest.mark.parametrize(
    ("refreshable", "expiry", "want_seen"),
    [
        pytest.param(True, None, ["Bearer old", "Bearer new"], id="401: resolved again and retried once"),
        pytest.param(
            True, dt.datetime(2000, 1, 1, tzinfo=dt.UTC), ["Bearer new"], id="expiring: resolved before asking"
        ),
    ],
)
def test_the_client_resolves_credentials_again(
    monkeypatch: pytest.MonkeyPatch, refreshable: bool, expiry: dt.datetime | None, want_seen: list[str]
) -> None:
    fake = FakeApiServer(tokens=("new",))

    async def body(server: str) -> Any:
        async def fresh(stale: Connection) -> Connection:
            return connection(server, "new")

        monkeypatch.setattr(k8s_config, "refresh", fresh)
        async with Client(connection(server, "old", refreshable, expiry)) as client:
            return await client.request("GET", "/version")

    assert asyncio.run(with_server(fake, body)) == VERSION
    assert tokens_sent(fake) == want_seen


def test_static_credentials_that_are_rejected_are_not_retried() -> None:
    fake = FakeApiServer(tokens=("new",))

    async def body(server: str) -> Any:
        async with Client(connection(server, "old", refreshable=False)) as client:
            with pytest.raises(ApiError) as err:
                await client.request("GET", "/version")
            return err.value.status

    assert asyncio.run(with_server(fake, body)) == 401
    assert tokens_sent(fake) == ["Bearer old"]


def test_credentials_near_their_expiry_are_renewed_in_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """Still valid for 30 s: the request goes out with them at once while fresh ones are resolved."""
    fake = FakeApiServer(tokens=("old", "new"))

    async def body(server: str) -> Any:
        async def fresh(stale: Connection) -> Connection:
            return connection(server, "new")

        monkeypatch.setattr(k8s_config, "refresh", fresh)
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
        async with Client(connection(server, "old", expiry=soon)) as client:
            await client.request("GET", "/version")
            assert client._ahead is not None
            await client._ahead
            await client.request("GET", "/version")
            return client.connection.authorization

    assert asyncio.run(with_server(fake, body)) == "Bearer new"
    assert tokens_sent(fake) == ["Bearer old", "Bearer new"]
