"""The operator as it runs in production — `trainjob-operator run` in its own process — against the local
control plane, plus small kubectl helpers for tests that watch it work."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_fixtures import wait_for
from harness.plumbing import free_port as free_port

REPO = Path(__file__).resolve().parents[1]
OPERATOR_NAMESPACE = "trainjob-operator-system"


@dataclass
class OperatorProcess:
    """One `trainjob-operator run` replica, its ports and its log."""

    kubeconfig: str
    name: str = "operator"
    extra_config: dict[str, Any] = field(default_factory=dict)
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    status_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def start(self, tmp: Path) -> OperatorProcess:
        config = {
            "operator_namespace": OPERATOR_NAMESPACE,
            "log_format": "json",
            "health": {"port": self.health_port},
            "webhook": {"port": self.webhook_port},
            "status_server": {"port": self.status_port},
            **self.extra_config,
        }
        config_path = tmp / f"{self.name}.yaml"
        config_path.write_text(yaml.safe_dump(config))
        self.log_path = tmp / f"{self.name}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainjob_operator.cli",
                "run",
                "--kubeconfig",
                self.kubeconfig,
                "--config",
                str(config_path),
            ],
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        return self

    def http(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError as err:
            return 0, str(err)

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"operator {self.name} exited with {self.proc.returncode}:\n{self.log()}")
        return self.http("/readyz")[0] == 200

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample of /metrics (0 when absent)."""
        _, text = self.http("/metrics")
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        total = 0.0
        for line in text.splitlines():
            if line.startswith("#") or not line.startswith(name):
                continue
            metric, _, value = line.rpartition(" ")
            if metric == name or metric.startswith(name + "{"):
                got = metric[len(name) :].strip("{}")
                if all(part in got.split(",") for part in want.split(",") if part):
                    total += float(value)
        return total

    def log(self) -> str:
        return self.log_path.read_text()[-6000:] if self.log_path and self.log_path.exists() else ""

    def stop(self, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Kube:
    """kubectl with JSON in and out."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.cluster.kubectl_path), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)},
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def apply(
        self, *objects: dict[str, Any], namespace: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
        return self.run(*args, stdin=yaml.safe_dump_all(objects), check=check)

    def create(
        self, obj: dict[str, Any], namespace: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        args = ["create", "-f", "-"] + (["-n", namespace] if namespace else [])
        return self.run(*args, stdin=yaml.safe_dump(obj), check=check)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
        result = self.run(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr or "not found" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        loaded: dict[str, Any] = json.loads(result.stdout)
        return loaded

    def existing(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """`get` of an object the test knows is there (a clear failure when it is not)."""
        obj = self.get(kind, name, namespace)
        assert obj is not None, f"{kind}/{name} not found in {namespace}"
        return obj

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.run("get", kind, "-n", namespace, "-o", "json").stdout)["items"]
        return items

    def patch(
        self, kind: str, name: str, namespace: str, patch: dict[str, Any], kind_of: str = "merge", check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run("patch", kind, name, "-n", namespace, "--type", kind_of, "-p", json.dumps(patch), check=check)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        args = ["delete", kind, name, "--ignore-not-found", "--wait=false"] + (["-n", namespace] if namespace else [])
        self.run(*args)


def condition_status(obj: dict[str, Any] | None, type_: str) -> str | None:
    """The status ("True", "False", "Unknown") of the condition of that type, None when there is none."""
    return (condition(obj, type_) or {}).get("status")


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def eventually(fn: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    return wait_for(fn, timeout=timeout, what=what)


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    return Kube(cluster)


@pytest.fixture(scope="session")
def installed(kube: Kube) -> None:
    """Our CRDs and the operator namespace, once per session."""
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    from harness import cluster as cluster_lib

    eventually(
        lambda: cluster_lib.crds_established(kube.cluster, "trainer.kubeflow.org", 3),
        "our CRDs Established",
        timeout=60,
    )
    kube.run("create", "namespace", OPERATOR_NAMESPACE, check=False)


# One operator per pytest session, however many conftests (integration/, e2e/) declare the fixture: a second
# replica would never become leader of the test Lease.
_SESSION: dict[str, Any] = {"process": None, "users": 0}


@pytest.fixture(scope="session")
def operator(
    kubeconfig: str, kube: Kube, installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator for the whole session, with short leader-election timings."""
    if _SESSION["process"] is None:
        tmp = tmp_path_factory.mktemp("operator")
        settings: dict[str, Any] = {
            "leader_election": {
                "lease_name": "trainjob-operator-test",
                "lease_duration_seconds": 4,
                "renew_deadline_seconds": 3,
                "retry_period_seconds": 1,
            }
        }
        status_port = free_port()
        if kube.cluster.real:
            # Pods on real nodes report progress: the status server listens on the bridge address they reach (its
            # certificate names that address), not on loopback.
            from harness import realnodes

            settings["status_server"] = {"host": realnodes.HOST_FOR_PODS, "port": status_port}
        process = OperatorProcess(kubeconfig, "operator-a", settings, status_port=status_port).start(tmp)
        _SESSION["process"] = process
        try:
            eventually(process.ready, "operator readiness", timeout=60)
            eventually(lambda: process.metric("trainjob_operator_leader") == 1, "operator leadership", timeout=30)
        except BaseException:
            process.stop()
            _SESSION["process"] = None
            raise
    _SESSION["users"] += 1
    try:
        yield _SESSION["process"]
    finally:
        _SESSION["users"] -= 1
        if _SESSION["users"] == 0:
            _SESSION["process"].stop()
            _SESSION["process"] = None
            for kind, name in (
                ("validatingwebhookconfiguration", "validator.trainer.kubeflow.org"),
                ("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org"),
            ):
                kube.delete(kind, name)


def started(seconds: float) -> float:
    return time.monotonic() + seconds


def answers_200(url: str) -> bool:
    """Whether a GET of `url` answers 200 (False while the server is not up yet)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass(frozen=True)
class UIServer:
    """A running `trainjob-operator ui`: its base URL and the per-run token it printed."""

    url: str
    token: str

    @property
    def login(self) -> str:
        """The URL it printed: opening it exchanges the token for the session cookie."""
        return f"{self.url}?token={self.token}"

    def open(self, path: str, headers: dict[str, str] | None = None, **kw: Any) -> Any:
        """urlopen of `path` (relative to the base URL) with the token, as a script would send it."""
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {self.token}", **(headers or {})}, **kw
        )
        return urllib.request.urlopen(request, timeout=30)


def _printed_token(log: Path) -> str | None:
    found = re.search(r"\?token=([A-Za-z0-9_-]+)", log.read_text(errors="replace"))
    return found.group(1) if found else None


@pytest.fixture
def ui(kubeconfig: str, tmp_path: Path) -> Iterator[UIServer]:
    """The read-only web UI (`trainjob-operator ui`) on a free loopback port, watching the session cluster."""
    port = free_port()
    log = (tmp_path / "ui.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainjob_operator.cli", "ui", "--kubeconfig", kubeconfig, "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        token = eventually(
            lambda: proc.poll() is None and _printed_token(tmp_path / "ui.log"), "the UI's URL", timeout=60
        )
        assert isinstance(token, str)
        server = UIServer(url, token)

        def listing() -> bool:
            try:
                with server.open("api/trainjobs") as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        eventually(lambda: proc.poll() is None and listing(), "the UI server", timeout=60)
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=20)
