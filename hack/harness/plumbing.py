"""The harness's shared plumbing: its error, where the checkout and a cluster's state live, running commands, free
ports, log tails, process checks, and the state file of a running cluster (`ClusterInfo`). Standard library only.

`cluster` (the control plane) and `realnodes` (real nodes beside it) both build on this module, so neither imports
the other's private names and `realnodes` does not import `cluster` back."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_NODES = 4
DEFAULT_GPUS_PER_NODE = 8


class ClusterError(RuntimeError):
    """The local cluster could not be brought up or inspected."""


def repo_root() -> Path:
    """The checkout holding hack/harness/tools/build.sh."""
    candidates: list[Path] = []
    env = os.environ.get("TRAINJOB_OPERATOR_REPO")
    if env:
        candidates.append(Path(env))
    here = Path(__file__).resolve()
    candidates.extend(here.parents)
    cwd = Path.cwd().resolve()
    candidates.append(cwd)
    candidates.extend(cwd.parents)
    for c in candidates:
        if (c / "hack" / "harness" / "tools" / "build.sh").is_file():
            return c
    raise ClusterError("cannot find the repository (hack/harness/tools/build.sh); set TRAINJOB_OPERATOR_REPO")


def state_dir() -> Path:
    env = os.environ.get("TRAINJOB_CLUSTER_DIR")
    return Path(env).resolve() if env else repo_root() / ".cluster"


def check_free_space(path: Path, need_gib: float, what: str) -> None:
    """Stop with the numbers when the filesystem holding `path` has less than `need_gib` GiB free. A full disk
    shows as an etcd that times out every request and containerd failing mid-unpack (a CI run of 29 November 2026:
    14 real-node errors, none naming the disk); this names it before anything starts."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free / 2**30
    if free < need_gib:
        raise ClusterError(
            f"{what} needs {need_gib:g} GiB free on the filesystem of {path}, and it has {free:.1f} GiB: "
            "free some space (old clones' .cluster directories, cold caches, `go clean -cache`)"
        )


_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"cluster: [{time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def run(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    timeout: float = 120.0,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            list(args),
            env=env,
            input=input,
            text=True,
            capture_output=capture,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"timed out after {timeout:.0f}s: {' '.join(args)}") from exc
    if check and proc.returncode != 0:
        raise ClusterError(
            f"command failed ({proc.returncode}): {' '.join(args)}\n{proc.stdout or ''}{proc.stderr or ''}"
        )
    return proc


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports on 127.0.0.1: all held bound while choosing (one at a time, the kernel may hand out
    the port it just freed again: a cold `make test` once gave two of kwokctl's components the same port)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_is(pid: int, binary: str) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return cmd == binary


@dataclasses.dataclass
class ClusterInfo:
    """What tests need to know about a running cluster."""

    name: str
    kubeconfig: Path
    bin_dir: Path
    kueue: bool = False
    trainer_crds: bool = False
    nodes: int = DEFAULT_NODES
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    #: kwok nodes labelled with the block/rack/host topology of TOPOLOGY_LEVELS.
    topology: bool = False
    controllers: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    webhook_configurations: list[list[str]] = dataclasses.field(default_factory=list)
    #: Real nodes (containerd + kubelet, `realnodes.py`) beside the kwok ones; what `down` must undo is in `real`.
    real_nodes: int = 0
    real: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The Kubernetes version asked for (`K8S_VERSION`; empty: the default), the directory of its kube-apiserver,
    #: kube-controller-manager and kube-scheduler (empty: `bin_dir`), and the gates and runtime config they run with.
    k8s_version: str = ""
    k8s_bin_dir: str = ""
    feature_gates: str = ""
    runtime_config: str = ""

    @property
    def kubectl_path(self) -> Path:
        return self.bin_dir / "kubectl"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster."""
        return run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            check=check,
            timeout=timeout,
        )

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG pointing at this cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kubeconfig"] = str(self.kubeconfig)
        d["bin_dir"] = str(self.bin_dir)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClusterInfo:
        d = dict(d)
        d["kubeconfig"] = Path(d["kubeconfig"])
        d["bin_dir"] = Path(d["bin_dir"])
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})


def state_file() -> Path:
    return state_dir() / "state.json"


def save_state(info: ClusterInfo) -> None:
    tmp = state_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_json(), indent=2) + "\n")
    tmp.replace(state_file())


def load_state() -> ClusterInfo | None:
    try:
        return ClusterInfo.from_json(json.loads(state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None
