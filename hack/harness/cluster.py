"""Local Kubernetes control plane for integration and end-to-end tests.

A real kube-apiserver, etcd, kube-controller-manager and kube-scheduler run as
local processes under ``kwokctl --runtime binary``; kwok fakes the kubelets of
a few GPU nodes; the upstream JobSet controller (and optionally Kueue) runs as
a local process with its admission webhooks served on 127.0.0.1 under a
throw-away CA. All binaries come from ``hack/harness/tools/build.sh`` (``make
tools``), which builds them from pinned Go modules into a cache outside the
repository.

Standard library and the operator's own certificate code (``trainjob_operator.certs``, for the throw-away webhook
CA). Developer tooling: not part of the wheel. Usable three ways::

    .venv/bin/python hack/harness/cluster.py up [--kueue] [--trainer-crds]
    .venv/bin/python hack/harness/cluster.py down
    .venv/bin/python hack/harness/cluster.py status

or ``make cluster-up`` / ``make cluster-down``, or from Python::

    from harness import cluster
    info = cluster.up(kueue=False)
    ...                      # KUBECONFIG=str(info.kubeconfig)
    cluster.down()

The kubeconfig is always written to ``<repo>/.cluster/kubeconfig`` (or
``$TRAINJOB_CLUSTER_DIR/kubeconfig``); ``up`` prints that path as the last
line of its standard output.

Pods on the fake nodes go Pending -> Running at once and, if owned by a Job,
Running -> Succeeded after 2 s. Pod-template annotations change that:
``trainjob-operator.test/run-for: "5s"`` (run time) and
``trainjob-operator.test/exit-code: "3"`` (fail with that exit code). See
``hack/harness/tools/stages/job-pods.yaml``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# `X as X`: re-exported (tests, benchmarks and the demo know the cluster by these names); `_x`: this module's own use.
from harness.plumbing import DEFAULT_GPUS_PER_NODE as DEFAULT_GPUS_PER_NODE
from harness.plumbing import DEFAULT_NODES as DEFAULT_NODES
from harness.plumbing import ClusterError as ClusterError
from harness.plumbing import ClusterInfo as ClusterInfo
from harness.plumbing import check_free_space as _check_free_space
from harness.plumbing import free_ports as _free_ports
from harness.plumbing import load_state as load_state
from harness.plumbing import log as _log
from harness.plumbing import pid_alive as _pid_alive
from harness.plumbing import pid_is as _pid_is
from harness.plumbing import repo_root as repo_root
from harness.plumbing import run as _run
from harness.plumbing import save_state as _save_state
from harness.plumbing import state_dir as state_dir
from harness.plumbing import state_file
from harness.plumbing import tail as _tail
from trainjob_operator import certs

DEFAULT_NAME = "trainjob-operator"
DEFAULT_NODE_CPU = "32"
DEFAULT_NODE_MEMORY = "256Gi"
#: Free space a cluster's start asks of the filesystem of its state directory: etcd and the logs of a `make test`
#: session stay well under it (measured in docs/development.md).
CONTROL_PLANE_FREE_GIB = 2.0

#: The topology of the kwok nodes with `topology=True` (Kueue's topology-aware scheduling), widest level first:
#: node i is in block i // 4 and rack i // 2 (4 nodes: one block, two racks of two hosts); the lowest level is the
#: node itself, as Kueue recommends.
TOPOLOGY_LEVELS = (
    "topology.trainjob-operator.test/block",
    "topology.trainjob-operator.test/rack",
    "kubernetes.io/hostname",
)
NODES_PER_RACK = 2
NODES_PER_BLOCK = 4

RUN_FOR_ANNOTATION = "trainjob-operator.test/run-for"
EXIT_CODE_ANNOTATION = "trainjob-operator.test/exit-code"
# What `kubectl logs` returns for every container of a fake pod.
POD_LOG = ("kwok: fake container started", "kwok: fake container finished")

# Kueue (v0.15-v0.19) hard-codes where it reads its metrics serving certificate when
# internal cert management is off (cmd/kueue/main.go); it exits without it.
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")

#: The Kueue version of the cluster (`0.17.0`): `make cluster-up WITH_KUEUE=1 KUEUE_VERSION=0.17.0`, the test fixtures
#: read the same variable. Unset or empty: the one hack/harness/tools/go.mod pins (built by build.sh); another one is
#: built by hack/harness/tools/build-pinned.sh from its own module hack/harness/tools/kueue-<major.minor>/.
KUEUE_VERSION_ENV = "KUEUE_VERSION"

#: The Kubernetes version of the control plane (`1.37.2`): `make cluster-up K8S_VERSION=1.37.2` and the test
#: fixtures read the same variable. Unset or empty: the version hack/harness/tools/go.mod pins (built by build.sh); another
#: one is built by hack/harness/tools/build-k8s.sh from its own module hack/harness/tools/k8s-<major.minor>/.
K8S_VERSION_ENV = "K8S_VERSION"
#: Feature gates of kube-apiserver, kube-controller-manager and kube-scheduler (`GenericWorkload=true,...`).
K8S_FEATURE_GATES_ENV = "K8S_FEATURE_GATES"
#: The API server's `--runtime-config` (`scheduling.k8s.io/v1beta1=true`: beta APIs are off by default).
K8S_RUNTIME_CONFIG_ENV = "K8S_RUNTIME_CONFIG"

CREATE_TIMEOUT_S = 180.0
CONTROLLER_TIMEOUT_S = 90.0
DELETE_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------
# paths


def kubeconfig_path() -> Path:
    """Where ``up`` writes the kubeconfig (it may not exist yet)."""
    return state_dir() / "kubeconfig"


def cluster_name() -> str:
    return os.environ.get("TRAINJOB_CLUSTER_NAME", DEFAULT_NAME)


# --------------------------------------------------------------------------
# tools


def build_tools(*, kueue: bool = False, quiet: bool = False) -> Path:
    """Run hack/harness/tools/build.sh (a no-op when the cache is warm); return the bin dir."""
    script = repo_root() / "hack" / "harness" / "tools" / "build.sh"
    args = ["bash", str(script)] + (["--with-kueue"] if kueue else [])
    out = None if not quiet else subprocess.DEVNULL
    # Progress goes to the terminal; the build can take a long time when cold.
    proc = subprocess.run(args, stdout=out, stderr=None if not quiet else subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ClusterError(f"{script} failed with exit code {proc.returncode}")
    return tools_bin_dir()


def tools_bin_dir() -> Path:
    script = repo_root() / "hack" / "harness" / "tools" / "build.sh"
    out = _run(["bash", str(script), "--print-bin-dir"]).stdout.strip()
    return Path(out)


def k8s_version_wanted() -> str | None:
    """The Kubernetes version `K8S_VERSION` names (`1.37.2`, a leading v dropped); None: the default one."""
    value = os.environ.get(K8S_VERSION_ENV, "").strip().lstrip("v")
    return value or None


KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def k8s_bin_dir(version: str) -> Path:
    """Where hack/harness/tools/build-k8s.sh puts (or put) the control-plane binaries of `version`; raises ClusterError when
    no module in hack/harness/tools pins that version."""
    script = repo_root() / "hack" / "harness" / "tools" / "build-k8s.sh"
    return Path(_run(["bash", str(script), version, "--print-bin-dir"]).stdout.strip())


def build_k8s(version: str, *, quiet: bool = False) -> Path:
    """Build the control-plane binaries of `version` (a no-op when the cache has them); return their directory."""
    script = repo_root() / "hack" / "harness" / "tools" / "build-k8s.sh"
    out = None if not quiet else subprocess.DEVNULL
    proc = subprocess.run(["bash", str(script), version], stdout=out, stderr=None if not quiet else subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ClusterError(f"{script} {version} failed with exit code {proc.returncode}")
    return k8s_bin_dir(version)


def pinned_bin_dir(component: str, version: str) -> Path:
    """Where hack/harness/tools/build-pinned.sh puts (or put) `component` (kueue, scheduler-plugins) at `version`;
    raises ClusterError, saying why, when no module in hack/harness/tools pins that version."""
    script = repo_root() / "hack" / "harness" / "tools" / "build-pinned.sh"
    proc = _run(["bash", str(script), component, version, "--print-bin-dir"], check=False)
    if proc.returncode != 0:
        raise ClusterError(proc.stderr.strip() or f"{script} {component} {version} failed")
    return Path(proc.stdout.strip())


def kueue_dir(bin_dir: Path) -> Path:
    """The directory of the `kueue` binary and its `share/` manifests: `bin_dir` unless `KUEUE_VERSION` names another."""
    wanted = os.environ.get(KUEUE_VERSION_ENV, "").strip().lstrip("v")
    return pinned_bin_dir("kueue", wanted) if wanted else bin_dir


def k8s_tools_present(version: str) -> bool:
    """Whether the tool cache holds a complete build of Kubernetes `version` (no build is started)."""
    try:
        d = k8s_bin_dir(version)
    except ClusterError:
        return False
    return all((d / b).exists() for b in KUBE_BINARIES)


# --------------------------------------------------------------------------
# state


def _kwok_env(bin_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KWOK_WORKDIR": str(state_dir() / "kwok"),
        "KWOK_KUBECTL_BINARY": str(bin_dir / "kubectl"),
    }


# --------------------------------------------------------------------------
# certificates (the operator's own webhook certificate code)


def _make_certs(cert_dir: Path) -> str:
    """A throw-away CA and a serving certificate for 127.0.0.1/localhost, written as controller-runtime's cert dir
    wants them (ca.crt, tls.crt, tls.key); returns the CA bundle, base64, for webhook configurations."""
    bundle = certs.generate(["127.0.0.1", "localhost"], dt.datetime.now(dt.UTC), days=30)
    cert_dir.mkdir(parents=True, exist_ok=True)
    for name, data in (("ca.crt", bundle.ca_cert), ("tls.crt", bundle.cert), ("tls.key", bundle.key)):
        path = cert_dir / name
        path.write_bytes(data)
        if name.endswith(".key"):
            path.chmod(0o600)
    return base64.b64encode(bundle.ca_cert).decode()


# --------------------------------------------------------------------------
# manifests


def _to_objects(info: ClusterInfo, path: Path) -> list[dict[str, Any]]:
    """Parse a multi-document YAML file into objects with kubectl (no PyYAML)."""
    out = info.kubectl("create", "--dry-run=client", "-o", "json", "-f", str(path)).stdout
    # One JSON document per object, concatenated (or a List).
    dec, i = json.JSONDecoder(), 0
    objs: list[dict[str, Any]] = []
    while True:
        while i < len(out) and out[i].isspace():
            i += 1
        if i >= len(out):
            break
        doc, i = dec.raw_decode(out, i)
        objs.extend(doc.get("items", []) if doc.get("kind") == "List" else [doc])
    return objs


def apply_objects(info: ClusterInfo, objs: Iterable[dict[str, Any]]) -> None:
    items = list(objs)
    if not items:
        return
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    info.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=trainjob-operator-test-harness",
        "-f",
        "-",
        input=doc,
        timeout=120,
    )


def _rewrite_client_config(cc: dict[str, Any], port: int, ca_b64: str) -> dict[str, Any]:
    path = (cc.get("service") or {}).get("path", "")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_b64}


_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_DROP_KINDS = ("Deployment", "APIService", "Secret")


def _split_manifest(
    objs: list[dict[str, Any]], port: int, ca_b64: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(objects to apply before the controller starts, webhook configurations)."""
    before, hooks = [], []
    for o in objs:
        kind = o.get("kind")
        if kind in _DROP_KINDS:
            continue  # we run the binary ourselves; certs are ours
        meta = o.setdefault("metadata", {})
        for k in ("cert-manager.io/inject-ca-from",):
            (meta.get("annotations") or {}).pop(k, None)
        if kind in _WEBHOOK_KINDS:
            for w in o.get("webhooks", []):
                w["clientConfig"] = _rewrite_client_config(w.get("clientConfig", {}), port, ca_b64)
            hooks.append(o)
            continue
        if kind == "CustomResourceDefinition":
            conv = (o.get("spec") or {}).get("conversion") or {}
            if conv.get("strategy") == "Webhook":
                wh = conv.setdefault("webhook", {})
                wh["clientConfig"] = _rewrite_client_config(wh.get("clientConfig", {}), port, ca_b64)
        before.append(o)
    return before, hooks


# --------------------------------------------------------------------------
# controllers


def start_controller(
    info: ClusterInfo,
    name: str,
    binary: Path,
    config: dict[str, Any],
    health_port: int,
    extra_env: dict[str, str] | None = None,
) -> None:
    sd = state_dir()
    cfg_path = sd / f"{name}-config.json"
    cfg_path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is valid YAML
    log_path = sd / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                "--config",
                str(cfg_path),
                "--kubeconfig",
                str(info.kubeconfig),
                "--zap-log-level=info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(extra_env or {})},
        )
    info.controllers[name] = {
        "pid": proc.pid,
        "binary": str(binary),
        "log": str(log_path),
        "health_port": health_port,
    }
    _save_state(info)
    deadline = time.monotonic() + CONTROLLER_TIMEOUT_S
    url = f"http://127.0.0.1:{health_port}/readyz"
    while True:
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited with {proc.returncode}; log {log_path}:\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{name} not ready after {CONTROLLER_TIMEOUT_S:.0f}s; log {log_path}:\n{_tail(log_path)}"
            )
        time.sleep(0.2)
    _log(f"{name} ready (pid {proc.pid}, log {log_path})")


def stop_controller(name: str, c: dict[str, Any]) -> None:
    pid, binary = int(c.get("pid", 0)), str(c.get("binary", ""))
    if pid <= 0 or not _pid_alive(pid) or not _pid_is(pid, binary):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _pid_alive(pid) and _pid_is(pid, binary):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    _log(f"stopped {name} (pid {pid})")


def wait_for(what: str, fn: Callable[[], Any], timeout: float, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            res = fn()
            if res:
                return res
        except Exception as exc:
            last_exc = exc
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}: {last_exc}")
        time.sleep(interval)


# --------------------------------------------------------------------------
# up / down


#: The control plane's components that run once and would otherwise elect a leader.
SINGLE_INSTANCE = ("kube-controller-manager", "kube-scheduler")

#: The ports of a kwokctl cluster's components (binary runtime), each chosen by `_kwokctl_config`.
KWOKCTL_PORT_OPTIONS = (
    "kubeApiserverPort",
    "etcdPort",
    "etcdPeerPort",
    "kubeControllerManagerPort",
    "kubeSchedulerPort",
    "kwokControllerPort",
)


def _kwokctl_config(
    bin_dir: Path, real_nodes: int = 0, k8s_dir: Path | None = None, feature_gates: str = "", runtime_config: str = ""
) -> str:
    """`k8s_dir`: where kube-apiserver, kube-controller-manager and kube-scheduler come from (another Kubernetes
    version than the default; etcd, kwok and kubectl stay `bin_dir`'s)."""
    share = bin_dir / "share"
    hack = repo_root() / "hack" / "harness" / "tools"
    kube_dir = k8s_dir or bin_dir
    cfg = {
        "kind": "KwokctlConfiguration",
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "kubeBinaryPrefix": str(kube_dir),
            "kubectlBinary": str(bin_dir / "kubectl"),
            "etcdBinary": str(bin_dir / "etcd"),
            "kwokControllerBinary": str(bin_dir / "kwok"),
            "kubeVersion": _version_of(kube_dir, "kubernetes"),
            **({"kubeFeatureGates": feature_gates} if feature_gates else {}),
            **({"kubeRuntimeConfig": runtime_config} if runtime_config else {}),
            "etcdVersion": _version_of(bin_dir, "etcd"),
            "disableQPSLimits": True,
            # Ports from the kernel's ephemeral range, not kwokctl's own choice: kwokctl takes the highest free ports
            # below 32768, the same few for every cluster, so a cluster made while another's API server is restarting
            # (the chaos tests stop it) took that server's port and it never came back (`make test`, 2026-11-25).
            **dict(zip(KWOKCTL_PORT_OPTIONS, _free_ports(len(KWOKCTL_PORT_OPTIONS)), strict=True)),
        },
        # One kube-controller-manager and one kube-scheduler, and nothing restarts them: with leader election on (their
        # default), a lease renewal slower than 10 s ends the process ("leaderelection lost"). That happened while the
        # API server deleted 10,000 pods at once (bench, 29 November 2026): the Job controller was gone, and the next
        # column's Jobs never got pods.
        "componentsPatches": [
            {"name": name, "extraArgs": [{"key": "leader-elect", "value": "false"}]} for name in SINGLE_INSTANCE
        ],
    }
    if real_nodes:
        from harness import realnodes

        # Pods reach the API server as https://10.0.0.1 (the kubernetes Service) and its advertised address.
        cfg["options"]["kubeApiserverCertSANs"] = list(realnodes.API_SERVER_SANS)  # type: ignore[index]
        # A node whose kubelet died is marked NotReady (Unknown) after 40 s, checked every 5 s: kwokctl multiplies its
        # heartbeat settings by a `heartbeatFactor` of 5 by default (3m20s), which would leave a real node's pods
        # bound to a dead kubelet for minutes (tests/realnode/test_kubelet_killed.py). (Not by `--extra-args`:
        # kwokctl v0.8.0 indexes its patches wrongly and panics on a fourth component.)
        cfg["options"].update(realnodes.NODE_MONITOR_OPTIONS)  # type: ignore[attr-defined]
    docs = [json.dumps(cfg)]
    stages = sorted((share / "kwok-stages").glob("*.yaml")) + sorted((hack / "stages").glob("*.yaml"))
    for p in stages:
        docs.append(p.read_text())
    # `kubectl logs` (and the kubeflow SDK's get_job_logs) on fake pods: kwok serves this CRI-format file
    # as the log of every container (the API server reaches kwok through the node's Hostname, localhost).
    pod_log = state_dir() / "pod.log"
    pod_log.write_text("".join(f"2000-01-01T00:00:0{i}.000000000Z stdout F {line}\n" for i, line in enumerate(POD_LOG)))
    docs.append(
        json.dumps(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterLogs",
                "metadata": {"name": "all-pods"},
                "spec": {"selector": {}, "logs": [{"logsFile": str(pod_log), "follow": False}]},
            }
        )
    )
    return "\n---\n".join(docs) + "\n"


def _version_of(bin_dir: Path, what: str) -> str:
    """Version of a built binary, as kwokctl wants it ("v1.36.3", "3.6.16")."""
    binary = {"kubernetes": "kube-apiserver", "etcd": "etcd"}[what]
    out = _run([str(bin_dir / binary), "--version"], check=False, timeout=30).stdout
    for word in out.replace(":", " ").split():
        w = word.lstrip("v")
        if w[:1].isdigit() and w.count(".") >= 2:
            return f"v{w}" if what == "kubernetes" else w
    return ""


def up(
    *,
    kueue: bool = False,
    trainer_crds: bool = False,
    nodes: int = DEFAULT_NODES,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    build: bool = True,
    real_nodes: int = 0,
    topology: bool = False,
    k8s_version: str | None = None,
    feature_gates: str | None = None,
    runtime_config: str | None = None,
) -> ClusterInfo:
    """Start a fresh cluster (tearing down a stale one of the same name first).

    `k8s_version` (default: `K8S_VERSION`, else the version hack/harness/tools/go.mod pins) picks the Kubernetes version of
    kube-apiserver, kube-controller-manager and kube-scheduler; `feature_gates` and `runtime_config` (default:
    `K8S_FEATURE_GATES`, `K8S_RUNTIME_CONFIG`) are passed to them as `--feature-gates` and `--runtime-config`.

    `real_nodes` > 0 adds that many real nodes (containerd, kubelet; `realnodes.py`, needs root and
    `make tools-nodes`) beside the kwok ones; kwok then manages only its own annotated nodes. `topology` labels the
    kwok nodes with a block/rack/host topology (TOPOLOGY_LEVELS) for Kueue's topology-aware scheduling.

    On failure the logs are kept in ``.cluster/logs/`` and the partial cluster
    is torn down before the error propagates.
    """
    _check_free_space(state_dir(), CONTROL_PLANE_FREE_GIB, "a cluster (etcd's data, the logs)")
    with _torn_down_on_failure():
        t0 = time.monotonic()
        bin_dir = build_tools(kueue=kueue) if build else tools_bin_dir()
        _check_tools(bin_dir, kueue=kueue)
        version = (k8s_version or "").lstrip("v") or k8s_version_wanted()
        k8s_dir = (build_k8s(version) if build else k8s_bin_dir(version)) if version else bin_dir
        missing = [b for b in KUBE_BINARIES if not (k8s_dir / b).exists()]
        if missing:
            raise ClusterError(
                f"Kubernetes {version} not built in {k8s_dir} ({missing}); run `make tools K8S_VERSION={version}`"
            )
        info = _fresh_state(bin_dir, kueue=kueue, trainer_crds=trainer_crds, nodes=nodes, gpus_per_node=gpus_per_node)
        info.real_nodes = real_nodes
        info.topology = topology
        info.k8s_version = version or ""
        info.k8s_bin_dir = str(k8s_dir) if k8s_dir != bin_dir else ""
        info.feature_gates = (
            os.environ.get(K8S_FEATURE_GATES_ENV, "").strip() if feature_gates is None else feature_gates
        )
        info.runtime_config = (
            os.environ.get(K8S_RUNTIME_CONFIG_ENV, "").strip() if runtime_config is None else runtime_config
        )
        _save_state(info)
        _create_control_plane(info)
        _add_fake_nodes(info)
        cert_dir = state_dir() / "certs"
        ca_b64 = _make_certs(cert_dir)
        _install_crds(info)
        _start_jobset(info, cert_dir, ca_b64)
        if kueue:
            _start_kueue(info, cert_dir, ca_b64)
        _wait_ready(info)
        if real_nodes:
            from harness import realnodes

            realnodes.up(info, real_nodes, build=build)
            _save_state(info)
        _log(f"cluster ready in {time.monotonic() - t0:.1f}s; KUBECONFIG={info.kubeconfig}")
        return info


@contextlib.contextmanager
def _torn_down_on_failure() -> Iterator[None]:
    """Whatever stops the start-up: the components' logs kept in ``.cluster/logs/``, the partial cluster torn down,
    the error raised on."""
    try:
        yield
    except BaseException:
        _save_component_logs()
        down(quiet=True)
        raise


def _save_component_logs() -> None:
    src = state_dir() / "kwok" / "clusters" / cluster_name() / "logs"
    dst = state_dir() / "logs"
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.glob("*.log"):
            shutil.copyfile(f, dst / f"failed-{f.name}")


#: The binaries every cluster needs (Kueue's only with `kueue=True`).
REQUIRED_TOOLS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
    "kwok",
    "kwokctl",
    "jobset",
)


def built_version(versions: str, component: str) -> str | None:
    """The version of `component` in the tool cache's `share/VERSIONS` text (lines `<component> <version> ...`)."""
    for line in versions.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == component:
            return words[1]
    return None


def kueue_version_problem(versions: str, wanted: str | None) -> str | None:
    """Why the tool cache's Kueue (the `share/VERSIONS` text of its directory) is not the one `KUEUE_VERSION` asks
    for (None: it is, or nothing is asked): a run must never test another Kueue than the one it names."""
    if not wanted:
        return None
    wanted = "v" + wanted.lstrip("v")
    built = built_version(versions, "kueue")
    if built == wanted:
        return None
    return (
        f"{KUEUE_VERSION_ENV}={wanted} but the tool cache has Kueue {built or '(none)'} there; run `make tools-kueue "
        f'{KUEUE_VERSION_ENV}={wanted.lstrip("v")}` (docs/compatibility.md, "Kubernetes versions")'
    )


def _check_tools(bin_dir: Path, *, kueue: bool) -> None:
    """Stage 1: every binary is in the tool cache (and Kueue the version asked for, if one is)."""
    need = [*REQUIRED_TOOLS, *(["kueue"] if kueue else [])]
    missing = [b for b in need if not (bin_dir / b).exists()]
    if missing or not (bin_dir / "share" / "VERSIONS").exists():
        raise ClusterError(
            f"tools missing in {bin_dir}: {missing or ['share/']}; run `make tools`"
            + (" WITH_KUEUE=1" if kueue else "")
        )
    if kueue:
        versions = kueue_dir(bin_dir) / "share" / "VERSIONS"
        text = versions.read_text() if versions.exists() else ""
        problem = kueue_version_problem(text, os.environ.get(KUEUE_VERSION_ENV))
        if problem:
            raise ClusterError(problem)


def _fresh_state(bin_dir: Path, *, kueue: bool, trainer_crds: bool, nodes: int, gpus_per_node: int) -> ClusterInfo:
    """Stage 2: a stale cluster of the same name torn down, an empty state directory, the state file written."""
    down(quiet=True, bin_dir=bin_dir)
    sd = state_dir()
    sd.mkdir(parents=True, exist_ok=True)
    (sd / "logs").mkdir(exist_ok=True)
    kc = kubeconfig_path()
    kc.unlink(missing_ok=True)
    info = ClusterInfo(
        name=cluster_name(),
        kubeconfig=kc,
        bin_dir=bin_dir,
        kueue=kueue,
        trainer_crds=trainer_crds,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
    )
    _save_state(info)
    return info


def _create_control_plane(info: ClusterInfo) -> None:
    """Stage 3: etcd, kube-apiserver, controller-manager and scheduler under kwokctl; returns once /readyz answers."""
    sd = state_dir()
    cfg_path = sd / "kwokctl.yaml"
    cfg_path.write_text(
        _kwokctl_config(
            info.bin_dir,
            info.real_nodes,
            Path(info.k8s_bin_dir) if info.k8s_bin_dir else None,
            info.feature_gates,
            info.runtime_config,
        )
    )
    _log(
        f"creating kwok cluster {info.name!r} (binary runtime, 127.0.0.1, Kubernetes {info.k8s_version or 'default'}"
        + (f", gates {info.feature_gates}" if info.feature_gates else "")
        + ")"
    )
    create_log = sd / "logs" / "kwokctl-create.log"
    proc = _run(
        [
            str(info.bin_dir / "kwokctl"),
            "--name",
            info.name,
            "--config",
            str(cfg_path),
            "create",
            "cluster",
            "--kubeconfig",
            str(info.kubeconfig),
            "--wait",
            f"{int(CREATE_TIMEOUT_S)}s",
            "--extra-args",
            "etcd=unsafe-no-fsync=true",
            "--extra-args",
            "kube-apiserver=advertise-address=127.0.0.1",
            *_loopback_args(info),
            *_real_node_args(info),
        ],
        env=_kwok_env(info.bin_dir),
        check=False,
        timeout=CREATE_TIMEOUT_S + 60,
    )
    create_log.write_text((proc.stdout or "") + (proc.stderr or ""))
    if proc.returncode != 0 or not info.kubeconfig.exists():
        raise ClusterError(f"kwokctl create cluster failed; log {create_log}:\n{_tail(create_log)}")
    wait_for("the API server", lambda: info.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 60)
    _log("API server ready")


def _loopback_args(info: ClusterInfo) -> list[str]:
    """Kubernetes 1.37's kube-apiserver refuses to start with a loopback advertise address while it reconciles the
    `kubernetes` Service's endpoints ("cannot use public IP 127.0.0.1 with endpoint reconciler"): nothing here reaches
    the API server through that Service (kwok's pods run nothing), so it reconciles none."""
    if not info.k8s_version or info.real_nodes:
        return []
    major_minor = tuple(int(x) for x in info.k8s_version.split(".")[:2])
    return ["--extra-args", "kube-apiserver=endpoint-reconciler-type=none"] if major_minor >= (1, 37) else []


def _real_node_args(info: ClusterInfo) -> list[str]:
    """With real nodes: kwok manages only its own annotated nodes (not every node, its default under kwokctl), and
    the API server reaches kubelets at their InternalIP (a real node's Hostname does not resolve), so kwok's nodes
    get 127.0.0.1, where kwok serves their pods' logs (its default node IP is this machine's first address); the
    API server advertises an address pods can reach."""
    if not info.real_nodes:
        return []
    from harness import realnodes

    return [
        "--extra-args",
        "kwok-controller=manage-all-nodes=false",
        "--extra-args",
        f"kwok-controller=manage-nodes-with-annotation-selector={realnodes.KWOK_NODE_ANNOTATION_SELECTOR}",
        "--extra-args",
        "kwok-controller=node-ip=127.0.0.1",
        "--extra-args",
        "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname",
        # The `kubernetes` Service's endpoint: the first bridge's address, forwarded to 127.0.0.1 (realnodes.py).
        "--extra-args",
        f"kube-apiserver=advertise-address={realnodes.API_SERVER_ADVERTISE}",
    ]


def _add_fake_nodes(info: ClusterInfo) -> None:
    """Stage 4: `info.nodes` kwok nodes with `info.gpus_per_node` fake GPUs each, labelled as GPU nodes."""
    _run(
        [
            str(info.bin_dir / "kwokctl"),
            "--name",
            info.name,
            "scale",
            "node",
            "--replicas",
            str(info.nodes),
            "--param",
            f'.allocatable.cpu="{DEFAULT_NODE_CPU}"',
            "--param",
            f'.allocatable.memory="{DEFAULT_NODE_MEMORY}"',
            "--param",
            '.allocatable.pods="110"',
            "--param",
            f'.allocatable["nvidia.com/gpu"]="{info.gpus_per_node}"',
        ],
        env=_kwok_env(info.bin_dir),
        timeout=60,
    )
    info.kubectl(
        "label",
        "nodes",
        "--all",
        "--overwrite",
        "nvidia.com/gpu.present=true",
        f"nvidia.com/gpu.count={info.gpus_per_node}",
        "nvidia.com/gpu.product=Fake-GPU",
    )
    if info.topology:
        _label_topology(info)


def topology_labels(index: int) -> dict[str, str]:
    """The block and rack labels of the kwok node at `index` (in name order); its host level is its own
    `kubernetes.io/hostname`."""
    block, rack, _host = TOPOLOGY_LEVELS
    return {block: f"block-{index // NODES_PER_BLOCK}", rack: f"rack-{index // NODES_PER_RACK}"}


def _label_topology(info: ClusterInfo) -> None:
    names = sorted(n["metadata"]["name"] for n in info.kubectl_json("get", "nodes").get("items", []))
    for index, name in enumerate(names):
        info.kubectl("label", "nodes", name, "--overwrite", *(f"{k}={v}" for k, v in topology_labels(index).items()))


def _install_crds(info: ClusterInfo) -> None:
    """Stage 5: the CRDs of the tool cache (JobSet's, and upstream Trainer's with `trainer_crds`)."""
    share = info.bin_dir / "share"
    crds = sorted((share / "crds").glob("*.yaml"))
    if info.trainer_crds:
        crds += sorted((share / "trainer").glob("*.yaml"))
    apply_objects(info, [o for p in crds for o in _to_objects(info, p)])


JOBSET_GATES_ENV = "TRAINJOB_JOBSET_FEATURE_GATES"
"""`Name=true,Other=false`: feature gates of the JobSet controller (e.g. ElasticJobSet, off by default in v0.12)."""


def jobset_feature_gates(text: str | None) -> dict[str, bool]:
    """The JobSet Configuration's `featureGates` from `Name=true,Other=false` (empty: none)."""
    gates: dict[str, bool] = {}
    for item in (text or "").split(","):
        name, _, value = item.strip().partition("=")
        if name:
            gates[name] = value.strip().lower() in ("", "true", "1")
    return gates


def _start_jobset(info: ClusterInfo, cert_dir: Path, ca_b64: str) -> None:
    """Stage 6: JobSet's manifests, its controller as a local process, then its webhooks pointed at it."""
    port, health = _free_ports(2)
    before, hooks = _split_manifest(_to_objects(info, info.bin_dir / "share" / "jobset.yaml"), port, ca_b64)
    apply_objects(info, before)
    start_controller(
        info,
        "jobset",
        info.bin_dir / "jobset",
        {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "clientConnection": {"qps": 500, "burst": 1000},
            **({"featureGates": gates} if (gates := jobset_feature_gates(os.environ.get(JOBSET_GATES_ENV))) else {}),
        },
        health,
    )
    apply_objects(info, hooks)
    info.webhook_configurations += [[o["kind"], o["metadata"]["name"]] for o in hooks]
    _save_state(info)


def _wait_ready(info: ClusterInfo) -> None:
    """Last stage: every node Ready and JobSet's webhook answering a server-side dry run."""
    wait_for("nodes Ready", lambda: _nodes_ready(info) >= info.nodes, 60)
    wait_for("JobSet webhook to answer", lambda: _jobset_dry_run(info), 60)
    _save_state(info)


def _start_kueue(info: ClusterInfo, cert_dir: Path, ca_b64: str) -> None:
    """Optional stage (`kueue=True`): Kueue's CRDs and manifests, its controller, then its webhooks."""
    share = kueue_dir(info.bin_dir) / "share"
    _log(f"starting Kueue {built_version((share / 'VERSIONS').read_text(), 'kueue') or '(version unknown)'}")
    KUEUE_METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for f in ("tls.crt", "tls.key"):
        shutil.copyfile(cert_dir / f, KUEUE_METRICS_CERT_DIR / f)
    port, health = _free_ports(2)
    before, hooks = _split_manifest(_to_objects(info, share / "kueue.yaml"), port, ca_b64)
    # CRDs first (conversion webhooks already point at 127.0.0.1).
    apply_objects(info, [o for o in before if o["kind"] == "CustomResourceDefinition"])
    apply_objects(info, [o for o in before if o["kind"] != "CustomResourceDefinition"])
    start_controller(
        info,
        "kueue",
        share.parent / "kueue",
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "clientConnection": {"qps": 500, "burst": 1000},
            "featureGates": {"VisibilityOnDemand": False},
            "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]},
        },
        health,
    )
    apply_objects(info, hooks)
    info.webhook_configurations += [[o["kind"], o["metadata"]["name"]] for o in hooks]
    _save_state(info)


def _nodes_ready(info: ClusterInfo) -> int:
    n = 0
    for node in info.kubectl_json("get", "nodes").get("items", []):
        for c in node.get("status", {}).get("conditions", []):
            if c.get("type") == "Ready" and c.get("status") == "True":
                n += 1
    return n


def _jobset_dry_run(info: ClusterInfo) -> bool:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "harness-probe", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "c", "image": "busybox"}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }
    return info.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(js), check=False).returncode == 0


def down(*, quiet: bool = False, bin_dir: Path | None = None) -> None:
    """Stop controllers and delete the cluster. Idempotent; never raises for absent parts."""
    info = load_state()
    if info is None and bin_dir is None:
        try:
            bin_dir = tools_bin_dir()
        except ClusterError:
            return
    if info is not None and info.real:
        # Real nodes first: their pods, mounts, bridges and iptables rules outlive the API server otherwise.
        from harness import realnodes

        realnodes.down(info.real)
        info.real = {}
        _save_state(info)
    if info is not None:
        # Webhook configurations first: with failurePolicy Fail a registered
        # webhook whose server is gone would block object creation.
        if info.kubeconfig.exists() and info.webhook_configurations:
            for kind, name in info.webhook_configurations:
                info.kubectl(
                    "delete",
                    kind.lower(),
                    name,
                    "--ignore-not-found",
                    "--wait=false",
                    check=False,
                    timeout=15,
                )
        for cname, c in info.controllers.items():
            stop_controller(cname, c)
        # The recorded tools may be gone (cache key changed and old dir removed).
        if (info.bin_dir / "kwokctl").exists() or bin_dir is None:
            bin_dir = info.bin_dir
    kwokctl = bin_dir / "kwokctl" if bin_dir else None
    name = info.name if info else cluster_name()
    if kwokctl and kwokctl.exists():
        env = _kwok_env(bin_dir)  # type: ignore[arg-type]
        exists = name in _run([str(kwokctl), "get", "clusters"], env=env, check=False).stdout.split()
        if exists:
            if not quiet:
                _log(f"deleting kwok cluster {name!r}")
            _run(
                [str(kwokctl), "--name", name, "delete", "cluster"],
                env=env,
                check=False,
                timeout=DELETE_TIMEOUT_S,
            )
    state_file().unlink(missing_ok=True)
    kubeconfig_path().unlink(missing_ok=True)
    if not quiet:
        _log("cluster down")


def crds_established(info: ClusterInfo, group: str, count: int) -> bool:
    """Whether `count` CRDs of `group` exist and are Established (`kubectl wait` races a CRD whose status is not
    written yet, so callers poll this with a deadline)."""
    crds = [c for c in info.kubectl_json("get", "crd")["items"] if c["spec"]["group"] == group]

    def established(crd: dict[str, Any]) -> bool:
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)

    return len(crds) >= count and all(established(c) for c in crds)


def status() -> ClusterInfo | None:
    """The running cluster's info, or None when it is not up and answering."""
    info = load_state()
    if info is None or not info.kubeconfig.exists():
        return None
    try:
        ok = info.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
    except ClusterError:
        return None
    return info if ok else None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cluster.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start a fresh local cluster")
    p_up.add_argument(
        "--kueue",
        action="store_true",
        default=os.environ.get("WITH_KUEUE", "") not in ("", "0"),
        help="also run Kueue (env WITH_KUEUE=1)",
    )
    p_up.add_argument(
        "--topology", action="store_true", help="label the kwok nodes with a block/rack/host topology (Kueue TAS)"
    )
    p_up.add_argument("--trainer-crds", action="store_true", help="also install the upstream Trainer v2.3.0 CRDs")
    p_up.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    p_up.add_argument("--gpus-per-node", type=int, default=DEFAULT_GPUS_PER_NODE)
    p_up.add_argument("--no-build", action="store_true", help="do not run build.sh first")
    p_up.add_argument(
        "--real-nodes",
        type=int,
        default=0,
        help="also run N real nodes (containerd + kubelet; root, `make tools-nodes`)",
    )
    p_up.add_argument(
        "--k8s-version",
        default=None,
        help=f"Kubernetes version of the control plane, e.g. 1.37.2 (env {K8S_VERSION_ENV}; default: the pinned one)",
    )
    p_up.add_argument(
        "--feature-gates", default=None, help=f"Kubernetes feature gates, a=true,b=false (env {K8S_FEATURE_GATES_ENV})"
    )
    p_up.add_argument(
        "--runtime-config", default=None, help=f"the API server's --runtime-config (env {K8S_RUNTIME_CONFIG_ENV})"
    )
    sub.add_parser("down", help="stop and delete the local cluster")
    sub.add_parser("status", help="exit 0 and print the kubeconfig path if the cluster is up")
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            info = up(
                kueue=args.kueue,
                trainer_crds=args.trainer_crds,
                nodes=args.nodes,
                gpus_per_node=args.gpus_per_node,
                build=not args.no_build,
                real_nodes=args.real_nodes,
                topology=args.topology,
                k8s_version=args.k8s_version,
                feature_gates=args.feature_gates,
                runtime_config=args.runtime_config,
            )
            print(info.kubeconfig)
        elif args.cmd == "down":
            down()
        elif args.cmd == "status":
            running = status()
            if running is None:
                print("cluster: not running", file=sys.stderr)
                return 1
            print(running.kubeconfig)
        elif args.cmd == "kubeconfig":
            print(kubeconfig_path())
    except ClusterError as exc:
        print(f"cluster: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # Run as the package's module, so the modules that import it (multikueue, demo) share its state.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness import cluster as _cluster

    sys.exit(_cluster.main())
