"""Start upstream's `trainer-controller-manager` v2.3.0 (built by hack/upstream/build.sh) as a local process for
the benchmarks: no leader election, no certificate management (the harness's serving certificate), webhooks on
127.0.0.1 but not registered, plain-HTTP metrics on a given port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


def bin_dir() -> Path:
    out = subprocess.run(["bash", str(HERE / "build.sh"), "--print-bin-dir"], capture_output=True, text=True,
                         check=True)
    return Path(out.stdout.strip())


def available() -> bool:
    try:
        return (bin_dir() / "trainer-controller-manager").exists()
    except (subprocess.CalledProcessError, OSError):
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_HEALTH: dict[int, int] = {}


def start(info: Any, *, metrics_port: int, qps: float | None, burst: int | None, concurrency: int | None,
          logs: Path) -> subprocess.Popen[bytes]:
    from trainjob_operator.testing import cluster

    tmp = logs / f"upstream-{metrics_port}"
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copy(cluster.state_dir() / "certs" / name, certs / name)
    health = _free_port()
    config: dict[str, Any] = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": _free_port()},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
    }
    if qps is not None:
        config["clientConnection"] = {"qps": qps, "burst": burst}
    if concurrency is not None:
        config["controller"] = {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": concurrency}}
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen([str(bin_dir() / "trainer-controller-manager"), "--config", str(path),
                             "--kubeconfig", str(info.kubeconfig)],
                            stdout=(logs / "upstream.log").open("ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "TMPDIR": str(tmp), "KUBECONFIG": str(info.kubeconfig)})
    _HEALTH[proc.pid] = health
    return proc


def ready(info: Any, proc: subprocess.Popen[bytes]) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{_HEALTH[proc.pid]}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
