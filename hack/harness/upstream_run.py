"""Start upstream's Kubeflow Trainer v2.3.0 controller (built by hack/harness/tools/build-upstream.sh) against the local control
plane (hack/harness/cluster.py). Used by the differential test (tests/e2e/test_differential.py)
and the cluster benchmark (bench/cluster_bench.py). Standard library, PyYAML and harness.plumbing only.

    from harness import upstream_run         # with hack/ on sys.path
    if upstream_run.available():
        proc = upstream_run.start(info, metrics_port=8443, logs=Path("/tmp/logs"))
        wait until upstream_run.ready(info, proc)
        upstream_run.register_webhooks(info, proc)    # optional: its admission webhooks, by URL on 127.0.0.1
        ...
        upstream_run.stop(proc); upstream_run.unregister_webhooks(info)

The process runs with no leader election and no certificate management; its webhook server listens on 127.0.0.1
with the harness's serving certificate (controller-runtime reads it from $TMPDIR/k8s-webhook-server/serving-certs),
metrics are plain HTTP on 127.0.0.1 when `metrics_port` is given, off otherwise. It needs upstream's CRDs
(`crds_dir()`) in the cluster: apply them only to a throw-away cluster.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from harness.plumbing import free_ports

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BINARY = "trainer-controller-manager"
WEBHOOK_CONFIGURATIONS = (
    ("ValidatingWebhookConfiguration", "validator.trainer.kubeflow.org"),
    ("MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org"),
)


def bin_dir() -> Path:
    out = subprocess.run(
        ["bash", str(HERE / "tools" / "build-upstream.sh"), "--print-bin-dir"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def available() -> bool:
    """True when build.sh has built the controller (`make tools-upstream`)."""
    try:
        return (bin_dir() / BINARY).exists()
    except (OSError, subprocess.CalledProcessError):
        return False


def crds_dir() -> Path:
    """Upstream's v2.3.0 Trainer CRDs, copied from the module cache by build.sh."""
    return bin_dir() / "share" / "trainer" / "crds"


def _certs_dir() -> Path:
    hack_dir = str(REPO / "hack")
    import sys

    if hack_dir not in sys.path:
        sys.path.insert(0, hack_dir)
    from harness import cluster as cluster_lib

    return cluster_lib.state_dir() / "certs"


def start(
    info: Any,
    *,
    logs: Path,
    metrics_port: int | None = None,
    qps: float = 50,
    burst: int = 100,
    concurrency: int | None = None,
    feature_gates: dict[str, bool] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the controller against `info.kubeconfig` (a ClusterInfo); returns the process, with the attributes
    `health_port`, `webhook_port`, `workdir` set on it."""
    logs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="upstream-trainer-", dir=logs))
    certs = work / "k8s-webhook-server" / "serving-certs"  # controller-runtime's default under $TMPDIR
    certs.mkdir(parents=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copy(_certs_dir() / name, certs / name)
    health, webhook = free_ports(2)
    config: dict[str, Any] = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": webhook},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}" if metrics_port else "0", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "clientConnection": {"qps": qps, "burst": burst},
    }
    if concurrency:
        config["controller"] = {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": concurrency}}
    if feature_gates:
        config["featureGates"] = feature_gates
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    kubeconfig = str(info.kubeconfig)
    proc = subprocess.Popen(
        [str(bin_dir() / BINARY), "--config", str(work / "config.yaml"), "--kubeconfig", kubeconfig],
        stdout=(logs / "upstream-trainer.log").open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(work), "KUBECONFIG": kubeconfig},
    )
    proc.health_port = health  # type: ignore[attr-defined]
    proc.webhook_port = webhook  # type: ignore[attr-defined]
    proc.workdir = work  # type: ignore[attr-defined]
    return proc


def ready(info: Any, proc: subprocess.Popen[bytes]) -> bool:
    """/readyz answers 200 (the webhook server is up)."""
    if proc.poll() is not None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.health_port}/readyz", timeout=2) as resp:  # type: ignore[attr-defined]
            return bool(resp.status == 200)
    except OSError:
        return False


def webhook_configurations(info: Any, proc: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    """Upstream's webhook configurations (its kustomization) pointed at `proc` on 127.0.0.1."""
    kubectl = str(Path(info.bin_dir) / "kubectl")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(bin_dir() / "share" / "trainer" / "webhook")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ca = base64.b64encode((_certs_dir() / "ca.crt").read_bytes()).decode()
    configs = [c for c in yaml.safe_load_all(rendered) if c]
    for config in configs:
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{proc.webhook_port}{path}",  # type: ignore[attr-defined]
                "caBundle": ca,
            }
    return configs


def register_webhooks(info: Any, proc: subprocess.Popen[bytes]) -> None:
    info.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(webhook_configurations(info, proc)))


def unregister_webhooks(info: Any) -> None:
    for kind, name in WEBHOOK_CONFIGURATIONS:
        info.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
