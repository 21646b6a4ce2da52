"""Real nodes beside the kwok ones (issue 23): containerd + runc + kubelet per node, a CNI bridge per node,
kube-proxy and CoreDNS, all as local processes of this machine.

Layout (``N`` = node index, ``P`` = a short prefix derived from the cluster name, bridges are ``P-nN``)::

    host network namespace
      bridge P-n0  10.244.1.1/24   node real-node-0's pods (CNI bridge + host-local), its InternalIP and kubelet
      bridge P-n1  10.244.2.1/24   node real-node-1's ...
      CoreDNS      10.244.1.1:53   cluster.local only (no forward: nothing else resolves)
      kube-proxy   one for both nodes (they share the network namespace), iptables mode
      iptables     chain P-FWD in filter FORWARD: pod traffic only between the bridges (never out of the machine)

Each node has its own containerd root, state, socket and CNI configuration, and its own kubelet root-dir, ports,
pod-log directory and certificate directory under ``<state dir>/real/nN``. Nodes are labelled
``trainjob.dev/real-node=true`` and tainted ``trainjob.dev/real-node=true:NoSchedule``: only pods that tolerate the
taint land on them, so scale tests (kwok) never do. kwok manages only its annotated fake nodes.

Configuration for this machine (cgroup v1, no CAP_SYS_RESOURCE, see docs/harness.md "Real nodes"):
containerd's ``restrict_oom_score_adj = true``; kubelet ``cgroupDriver: cgroupfs``, ``failCgroupV1: false``,
``cgroupsPerQOS: false``, ``enforceNodeAllocatable: []``, ``failSwapOn: false``,
``localStorageCapacityIsolation: false``.

Images come from ``images.py`` (built here with buildah, cached by the digest of their inputs) and are imported into
each node's containerd; pods use ``imagePullPolicy: IfNotPresent`` or ``Never`` (there is no registry).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import images, plumbing

REAL_NODE_LABEL = "trainjob.dev/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
#: What a pod needs to land on a real node.
REAL_NODE_SELECTOR = {REAL_NODE_LABEL: "true"}
REAL_NODE_TOLERATION = {"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
#: kwok manages only nodes with this annotation (its own `kwokctl scale node` nodes carry it).
KWOK_NODE_ANNOTATION_SELECTOR = "kwok.x-k8s.io/node=fake"

POD_CIDR = "10.244.0.0/16"
#: Where pods reach the API server: its advertised address (the `kubernetes` Service's endpoint), on the first
#: bridge, forwarded by tcpforward.py to 127.0.0.1 where kwokctl binds it; and the Service's ClusterIP (the API
#: server's default service range 10.0.0.0/24). Both are in its serving certificate.
API_SERVER_ADVERTISE = "10.244.1.1"
API_SERVER_SANS = (API_SERVER_ADVERTISE, "10.0.0.1")
#: Where a process of this machine serves pods (the operator's status server in tests/realnode): the same bridge
#: address, which pods on every real node reach and nothing outside this machine does.
HOST_FOR_PODS = API_SERVER_ADVERTISE
#: sun_path is 108 bytes; containerd appends ".ttrpc" to its socket for the second endpoint.
SOCKET_PATH_MAX = 100
CLUSTER_DOMAIN = "cluster.local"
NODE_READY_TIMEOUT_S = 120.0
#: kwokctl options: the node lifecycle controller marks a silent kubelet's node NotReady (Unknown) after 16 s,
#: looking every 2 s (Kubernetes' defaults are 40 s and 5 s; every real-node test that stops a kubelet waits for
#: it). The grace holds eight lease renewals, so a loaded machine does not lose a live node: our kubelets' lease
#: lasts 8 s, renewed every 2 s (`NODE_LEASE_SECONDS`, the kubelet renews at a quarter of it), and kwok's own
#: nodes' lease 8 s too (kwok-controller renews at a quarter, 4% jitter: kwok v0.8.0's `controllers/controller.go`).
NODE_MONITOR_OPTIONS = {
    "heartbeatFactor": 1,
    "kubeControllerManagerNodeMonitorGracePeriodMilliseconds": 16000,
    "kubeControllerManagerNodeMonitorPeriodMilliseconds": 2000,
    "nodeLeaseDurationSeconds": 8,
}
NODE_LEASE_SECONDS = 8
CONTAINERD_TIMEOUT_S = 60.0
#: The kubelet's device manager listens here whatever its --root-dir (k8s.io/kubelet's deviceplugin/v1beta1
#: `KubeletSocket`): one path for every kubelet on the machine.
KUBELET_DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
#: How long a starting kubelet may take to bind that socket (seconds; about 1 s on a quiet machine).
KUBELET_SOCKET_TIMEOUT_S = 60.0

NODE_PARTS = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "coredns")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")


# --------------------------------------------------------------------------
# the plan (pure)


@dataclasses.dataclass(frozen=True)
class RealNode:
    index: int
    name: str
    bridge: str
    subnet: str
    ip: str
    base: Path

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"


def prefix(cluster_name: str) -> str:
    """A short name prefix unique per cluster name (interface names have at most 15 characters)."""
    return "tj" + hashlib.sha256(cluster_name.encode()).hexdigest()[:5]


def plan(cluster_name: str, count: int, base: Path) -> list[RealNode]:
    p = prefix(cluster_name)
    return [
        RealNode(
            index=i,
            name=f"real-node-{i}",
            bridge=f"{p}-n{i}",
            subnet=f"10.244.{i + 1}.0/24",
            ip=f"10.244.{i + 1}.1",
            base=base / f"n{i}",
        )
        for i in range(count)
    ]


def dns_ip(nodes: list[RealNode]) -> str:
    """CoreDNS listens on the first node's bridge address; every pod reaches it through the host."""
    return nodes[0].ip


def containerd_config(node: RealNode, bins: Path, cni_bin: Path, pause_image: str) -> str:
    """containerd 2.x (config version 3) for one node: own root/state/socket, CRI with this machine's settings."""
    b = node.base
    return f"""version = 3
root = "{b}/containerd/root"
state = "{b}/containerd/state"
# NRI would open /var/run/nri/nri.sock, shared by every containerd on the machine.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{node.socket}"

[ttrpc]
  address = "{node.socket}.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "{b}/containerd/opt"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause_image}"

[plugins.'io.containerd.cri.v1.runtime']
  # The sandbox lacks CAP_SYS_RESOURCE: lowering oom_score_adj (the pause container asks for -998) is denied and
  # every sandbox would fail with runc's "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  enable_selinux = false
  # Pod network namespaces under this node's state directory, so `down` finds and unmounts every one.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{b}/cni-conf"
    max_conf_num = 1
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{bins / "runc"}"
        SystemdCgroup = false
"""


def cni_conflist(node: RealNode) -> dict[str, Any]:
    """The node's pod network: its own bridge and address range; no masquerade (pods reach only each other)."""
    return {
        "cniVersion": "1.0.0",
        "name": "trainjob-dev-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.subnet, "gateway": node.ip}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node.base / "cni-ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(node: RealNode, *, port: int, healthz_port: int, dns: str) -> dict[str, Any]:
    b = node.base
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # Only the local API server reaches this port (on a bridge address of this machine).
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        # cgroup v1 and no systemd on this machine.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "localStorageCapacityIsolation": False,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "clusterDNS": [dns],
        "clusterDomain": CLUSTER_DOMAIN,
        # Not the host's resolv.conf: pods get the cluster's DNS and its search path only.
        "resolvConf": str(b / "resolv.conf"),
        "podLogsDir": str(b / "pod-logs"),
        "volumePluginDir": str(b / "volume-plugins"),
        "registerWithTaints": [REAL_NODE_TAINT],
        "maxPods": 30,
        "serializeImagePulls": False,
        # Imported images cannot be pulled again: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi"},
        "nodeStatusUpdateFrequency": "5s",
        "nodeLeaseDurationSeconds": NODE_LEASE_SECONDS,
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(
    nodes: list[RealNode], *, kubeconfig: Path, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": nodes[0].name,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "clusterCIDR": POD_CIDR,
        # 0: leave the machine's conntrack sysctls alone (the sandbox may not allow writing them).
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        # NodePorts only on the nodes' bridge addresses; no route_localnet change.
        "iptables": {"localhostNodePorts": False},
        "nodePortAddresses": [f"{n.ip}/32" for n in nodes],
    }


def corefile(dns: str, kubeconfig: Path, context: str, ready_port: int) -> str:
    """cluster.local from the API server and nothing else: no `forward`, so no lookup leaves this machine."""
    return f"""{CLUSTER_DOMAIN}:53 {{
    bind {dns}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} {{
        kubeconfig {kubeconfig} {context}
        ttl 0
    }}
}}
"""


def forward_rules(chain: str, bridge_glob: str) -> list[list[str]]:
    """filter/FORWARD rules (in our own chain): pod traffic stays between our bridges."""
    return [
        ["-A", chain, "-s", POD_CIDR, "!", "-o", bridge_glob, "-j", "DROP"],
        ["-A", chain, "-d", POD_CIDR, "!", "-i", bridge_glob, "-j", "DROP"],
    ]


# --------------------------------------------------------------------------
# executing the plan


def nodes_dir() -> Path:
    """The node parts' directory in the tool cache (hack/harness/tools/build-nodes.sh, `make tools-nodes`)."""
    script = plumbing.repo_root() / "hack" / "harness" / "tools" / "build-nodes.sh"
    return Path(plumbing.run(["bash", str(script), "--print-dir"]).stdout.strip())


def build_nodes() -> Path:
    script = plumbing.repo_root() / "hack" / "harness" / "tools" / "build-nodes.sh"
    if subprocess.run(["nice", "-n", "10", "bash", str(script)]).returncode != 0:
        raise plumbing.ClusterError(f"{script} failed; run `make tools-nodes-debs tools-nodes`")
    return nodes_dir()


def check_machine() -> None:
    """What real nodes need from this machine, each missing piece as one line."""
    problems = []
    if os.geteuid() != 0:
        problems.append("real nodes need root (mounts, network namespaces, bridges, iptables)")
    for tool in ("iptables", "ip", "buildah", "mount"):
        if not any((Path(d) / tool).exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
            problems.append(f"`{tool}` is not installed: run `make tools-nodes-debs`")
    if "overlay" not in Path("/proc/filesystems").read_text():
        problems.append("the kernel has no overlay filesystem (containerd's overlayfs snapshotter)")
    if problems:
        raise plumbing.ClusterError("real nodes cannot run here: " + "; ".join(problems))


def _sysctl(path: str, value: str) -> str | None:
    """Set /proc/sys/<path>; return the old value (None when the file does not exist)."""
    p = Path("/proc/sys") / path
    if not p.exists():
        return None
    old = p.read_text().strip()
    if old != value:
        p.write_text(value + "\n")
    return old


def _start(name: str, args: list[str], log: Path, real: dict[str, Any], env: dict[str, str] | None = None) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    record = {"name": name, "pid": proc.pid, "binary": args[0], "log": str(log), "args": args, "env": env or {}}
    processes = real.setdefault("processes", [])
    # A restarted part (`restart_kubelet`) replaces its record: `down` stops the process that runs now.
    processes[:] = [p for p in processes if p["name"] != name]
    processes.append(record)
    return proc.pid


def _alive(real: dict[str, Any], name: str) -> bool:
    for p in real.get("processes", []):
        if p["name"] == name:
            return plumbing.pid_alive(int(p["pid"])) and plumbing.pid_is(int(p["pid"]), p["binary"])
    return False


#: How long a process just started may still not show its binary in /proc/PID/cmdline (read while the kernel is in
#: its execve, the file is empty): `_alive` checks the binary so that a recycled pid is never taken for ours, and
#: without this grace a loaded machine made `up` report a CoreDNS that was starting as "exited" with an empty log
#: (seen in the cold `make test` of 2026-11-25).
EXEC_GRACE_S = 5.0

#: Free space each real node asks of the filesystem of the cluster's state directory: its containerd holds the
#: images the tests import, packed and unpacked (measured in docs/development.md).
FREE_GIB_PER_NODE = 7.0


def _wait_alive(real: dict[str, Any], name: str, what: str, fn: Any, timeout: float) -> None:
    started = time.monotonic()

    def ok() -> bool:
        if not _alive(real, name):
            pid = next(int(p["pid"]) for p in real["processes"] if p["name"] == name)
            if plumbing.pid_alive(pid) and time.monotonic() - started < EXEC_GRACE_S:
                return False
            log = next(Path(p["log"]) for p in real["processes"] if p["name"] == name)
            raise plumbing.ClusterError(f"{name} exited; log {log}:\n{plumbing.tail(log)}")
        return bool(fn())

    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            log = next(Path(p["log"]) for p in real["processes"] if p["name"] == name)
            raise plumbing.ClusterError(
                f"timed out after {timeout:.0f}s waiting for {what}; log {log}:\n{plumbing.tail(log)}"
            )
        time.sleep(0.25)


def _bound_since(socket: Path, since: float) -> bool:
    """Whether a process bound `socket` at or after `since` (wall-clock seconds): binding creates the file anew."""
    try:
        return socket.stat().st_mtime >= since - 1.0
    except FileNotFoundError:
        return False


def foreign_holder(ip_addr_lines: str, nodes: list[RealNode]) -> str | None:
    """The interface of `ip -o -4 addr show` output that holds one of `nodes`' addresses without being one of their
    bridges: the real nodes of another cluster on this machine (say `make demo`'s, left up), whose pod network ours
    would collide with (one real-node cluster per machine). None when the addresses are free."""
    ours = {n.bridge for n in nodes}
    wanted = {n.ip for n in nodes}
    for line in ip_addr_lines.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "inet":
            continue
        interface, address = fields[1], fields[3].split("/")[0]
        if address in wanted and interface not in ours:
            return f"{interface} ({address})"
    return None


def up(info: plumbing.ClusterInfo, count: int, *, build: bool = True) -> None:
    """Bring `count` real nodes into the running cluster `info` (kwok already restricted to its fake nodes).
    Everything started is recorded in ``info.real`` (saved to the state file) before it starts, so `down` undoes a
    partial start too."""
    check_machine()
    plumbing.check_free_space(
        plumbing.state_dir(), FREE_GIB_PER_NODE * count, f"{count} real node(s) (containerd's images, unpacked)"
    )
    t0 = time.monotonic()
    parts = build_nodes() if build else nodes_dir()
    missing = [b for b in NODE_PARTS if not (parts / "bin" / b).exists()]
    missing += [f"cni/{p}" for p in CNI_PLUGINS if not (parts / "cni" / p).exists()]
    if missing:
        raise plumbing.ClusterError(f"node parts missing in {parts}: {missing}; run `make tools-nodes`")
    bins, cni_bin = parts / "bin", parts / "cni"
    image_refs = images.ensure(["pause", "busybox"])
    base = plumbing.state_dir() / "real"
    nodes = plan(info.name, count, base)
    p = prefix(info.name)
    real: dict[str, Any] = {
        "count": count,
        "base": str(base),
        "bins": str(bins),
        "bridges": [n.bridge for n in nodes],
        "sockets": [str(n.socket) for n in nodes],
        "chain": f"{p.upper()}-FWD",
        "sysctl": {},
        "processes": [],
    }
    too_long = [str(n.socket) for n in nodes if len(str(n.socket)) > SOCKET_PATH_MAX]
    if too_long:
        raise plumbing.ClusterError(
            f"containerd's socket path {too_long[0]!r} is longer than a unix socket allows ({SOCKET_PATH_MAX}): "
            "set TRAINJOB_CLUSTER_DIR to a shorter directory"
        )
    # What a run killed hard may have left (same cluster name, so the same bridges, chain and directories).
    down({**real, "processes": []})
    holder = foreign_holder(plumbing.run(["ip", "-o", "-4", "addr", "show"]).stdout, nodes)
    if holder is not None:
        raise plumbing.ClusterError(
            f"the real nodes' addresses are taken: {holder} belongs to the real nodes of another cluster on this "
            "machine (one real-node cluster per machine): stop it first (`make demo-down`, `make cluster-down`, "
            "or `hack/harness/cluster.py down` with its TRAINJOB_CLUSTER_DIR)"
        )
    info.real = real
    plumbing.save_state(info)

    # Network: bridges with the nodes' addresses, forwarding only between them.
    real["sysctl"]["net/ipv4/ip_forward"] = _sysctl("net/ipv4/ip_forward", "1")
    # Bridged pod traffic through iptables (kube-proxy's Service rules for pods on the same bridge).
    real["sysctl"]["net/bridge/bridge-nf-call-iptables"] = _sysctl("net/bridge/bridge-nf-call-iptables", "1")
    plumbing.save_state(info)
    for n in nodes:
        plumbing.run(["ip", "link", "add", n.bridge, "type", "bridge"])
        plumbing.run(["ip", "addr", "add", f"{n.ip}/24", "dev", n.bridge])
        plumbing.run(["ip", "link", "set", n.bridge, "up"])
    chain = real["chain"]
    plumbing.run(["iptables", "-w", "-N", chain])
    for rule in forward_rules(chain, f"{p}-n+"):
        plumbing.run(["iptables", "-w", *rule])
    plumbing.run(["iptables", "-w", "-I", "FORWARD", "1", "-j", chain])

    admin_kc = info.kubeconfig
    context = info.kubectl("config", "current-context").stdout.strip()
    logs = plumbing.state_dir() / "logs"

    # The API server for pods: the advertised address (nodes[0].ip) forwarded to where kwokctl binds it.
    server = info.kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    api_port = int(server.strip().rsplit(":", 1)[1])
    _start(
        "apiserver-forward",
        [
            sys.executable,
            str(Path(__file__).with_name("tcpforward.py")),
            f"{API_SERVER_ADVERTISE}:{api_port}",
            f"127.0.0.1:{api_port}",
        ],
        logs / "real-apiserver-forward.log",
        real,
    )
    plumbing.save_state(info)

    # CoreDNS on the first bridge address.
    dns = dns_ip(nodes)
    base.mkdir(parents=True, exist_ok=True)
    ready = plumbing.free_port()
    (base / "Corefile").write_text(corefile(dns, admin_kc, context, ready))
    _start("coredns", [str(bins / "coredns"), "-conf", str(base / "Corefile")], logs / "real-coredns.log", real)
    plumbing.save_state(info)
    _wait_alive(real, "coredns", "CoreDNS ready", lambda: _http_ok(f"http://127.0.0.1:{ready}/ready"), 60)

    # containerd per node, images imported.
    for n in nodes:
        for d in ("containerd", "cni-conf", "cni-ipam", "kubelet", "pod-logs", "volume-plugins"):
            (n.base / d).mkdir(parents=True, exist_ok=True)
        (n.base / "resolv.conf").write_text("")
        (n.base / "cni-conf" / "10-pods.conflist").write_text(json.dumps(cni_conflist(n), indent=2) + "\n")
        (n.base / "containerd.toml").write_text(containerd_config(n, bins, cni_bin, image_refs["pause"]))
        _start(
            f"containerd-{n.index}",
            [str(bins / "containerd"), "--config", str(n.base / "containerd.toml")],
            logs / f"real-containerd-{n.index}.log",
            real,
            env={"PATH": f"{bins}:{os.environ.get('PATH', '')}"},
        )
        plumbing.save_state(info)
    for n in nodes:
        _wait_alive(
            real,
            f"containerd-{n.index}",
            f"containerd of {n.name}",
            lambda n=n: _ctr(bins, n, "version", check=False).returncode == 0,
            CONTAINERD_TIMEOUT_S,
        )
        for name in image_refs:
            _ctr(bins, n, "images", "import", str(images.archive(name)), timeout=600)

    # kubelet per node, one after another: the device manager's socket is at a fixed path, not under --root-dir
    # (KUBELET_DEVICE_PLUGIN_SOCKET). Started together, one kubelet empties that directory while the other binds
    # there; the bind fails with "address already in use" and that kubelet exits ("Failed to start
    # ContainerManager"). Each kubelet therefore starts once the one before has bound it.
    previous_started = 0.0
    for n in nodes:
        if n.index > 0:
            _wait_alive(
                real,
                f"kubelet-{n.index - 1}",
                f"kubelet-{n.index - 1}'s device-plugin socket {KUBELET_DEVICE_PLUGIN_SOCKET}",
                functools.partial(_bound_since, KUBELET_DEVICE_PLUGIN_SOCKET, previous_started),
                KUBELET_SOCKET_TIMEOUT_S,
            )
        previous_started = time.time()
        port, healthz = plumbing.free_ports(2)
        cfg = n.base / "kubelet.json"
        cfg.write_text(json.dumps(kubelet_config(n, port=port, healthz_port=healthz, dns=dns), indent=2) + "\n")
        _start(
            f"kubelet-{n.index}",
            [
                str(bins / "kubelet"),
                f"--config={cfg}",
                f"--kubeconfig={admin_kc}",
                f"--root-dir={n.base / 'kubelet'}",
                f"--cert-dir={n.base / 'kubelet-pki'}",
                f"--hostname-override={n.name}",
                f"--node-ip={n.ip}",
                f"--node-labels={REAL_NODE_LABEL}=true",
                "--v=1",
            ],
            logs / f"real-kubelet-{n.index}.log",
            real,
            env={"PATH": f"{bins}:{os.environ.get('PATH', '')}"},
        )
        plumbing.save_state(info)

    # One kube-proxy: both nodes share this network namespace, so one set of iptables rules serves both.
    kp_cfg = base / "kube-proxy.json"
    kp_healthz, kp_metrics = plumbing.free_ports(2)
    kp_cfg.write_text(
        json.dumps(
            kube_proxy_config(nodes, kubeconfig=admin_kc, healthz_port=kp_healthz, metrics_port=kp_metrics),
            indent=2,
        )
        + "\n"
    )
    _start("kube-proxy", [str(bins / "kube-proxy"), f"--config={kp_cfg}"], logs / "real-kube-proxy.log", real)
    plumbing.save_state(info)

    def all_ready() -> bool:
        for n in nodes:
            pid = next(int(p["pid"]) for p in real["processes"] if p["name"] == f"kubelet-{n.index}")
            if not plumbing.pid_alive(pid):
                raise plumbing.ClusterError(
                    f"kubelet of {n.name} exited:\n{plumbing.tail(logs / f'real-kubelet-{n.index}.log')}"
                )
        ready = 0
        for node in info.kubectl_json("get", "nodes", "-l", f"{REAL_NODE_LABEL}=true").get("items", []):
            for c in node.get("status", {}).get("conditions", []):
                ready += c.get("type") == "Ready" and c.get("status") == "True"
        return ready >= count

    _wait_alive(real, "kubelet-0", f"{count} real nodes Ready", all_ready, NODE_READY_TIMEOUT_S)
    plumbing.log(f"{count} real nodes Ready in {time.monotonic() - t0:.1f}s")


def _record(real: dict[str, Any], name: str) -> dict[str, Any]:
    for p in real.get("processes", []):
        if p["name"] == name:
            return dict(p)
    raise plumbing.ClusterError(f"no process {name!r} was started for these real nodes")


def kill_kubelet(info: plumbing.ClusterInfo, index: int) -> None:
    """SIGKILL the kubelet of real node `index`, as a crashed node would lose it: its containerd and the containers
    it runs stay, nothing is told. Returns once the process is gone."""
    p = _record(info.real, f"kubelet-{index}")
    pid, binary = int(p["pid"]), str(p["binary"])
    if plumbing.pid_alive(pid) and plumbing.pid_is(pid, binary):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while plumbing.pid_alive(pid) and plumbing.pid_is(pid, binary):
        if time.monotonic() > deadline:
            raise plumbing.ClusterError(f"kubelet-{index} (pid {pid}) still alive 10s after SIGKILL")
        time.sleep(0.05)


def restart_kubelet(info: plumbing.ClusterInfo, index: int) -> None:
    """Start the kubelet of real node `index` again with the arguments `up` gave it (after `kill_kubelet`) and wait
    for its node to be Ready."""
    p = _record(info.real, f"kubelet-{index}")
    if _alive(info.real, p["name"]):
        raise plumbing.ClusterError(f"{p['name']} is still running (pid {p['pid']})")
    _start(p["name"], list(p["args"]), Path(p["log"]), info.real, env=dict(p.get("env") or {}))
    plumbing.save_state(info)
    node = f"real-node-{index}"

    def ready() -> bool:
        got = info.kubectl_json("get", "node", node)
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in got.get("status", {}).get("conditions", [])
        )

    _wait_alive(info.real, p["name"], f"{node} Ready again", ready, NODE_READY_TIMEOUT_S)


def load_image(info: plumbing.ClusterInfo, name: str) -> str:
    """Build image `name` if needed and import it into every real node's containerd (no-op where it is); return
    its reference. Big images (torch) are loaded by the tests that use them, not at start-up."""
    return load_image_archive(info, str(images.build(name)["ref"]), images.archive(name))


#: One import of an image at a time in this process (a test and `prefetch_images` asking for the same image: the
#: second waits for the first and finds it there); other images are not held up.
_IMPORTS: dict[str, threading.Lock] = {}
_IMPORTS_GUARD = threading.Lock()


def load_image_archive(info: plumbing.ClusterInfo, image_ref: str, archive: Path) -> str:
    """Import the OCI archive of `image_ref` into every real node's containerd where it is not yet, the nodes side by
    side (each has its own containerd; an import is mostly unpacking layers)."""
    bins = Path(info.real["bins"])

    def import_into(socket: str) -> None:
        ctr = [str(bins / "ctr"), "--address", socket, "--namespace", "k8s.io", "images"]
        if image_ref not in plumbing.run([*ctr, "ls", "-q"]).stdout.split():
            plumbing.run([*ctr, "import", str(archive)], timeout=1200)

    with _IMPORTS_GUARD:
        lock = _IMPORTS.setdefault(image_ref, threading.Lock())
    with lock, concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(info.real["sockets"]))) as pool:
        list(pool.map(import_into, info.real["sockets"]))
    return image_ref


def prefetch_images(info: plumbing.ClusterInfo, names: list[str]) -> threading.Thread:
    """Import the images `names` (those already built: never a build here) into the real nodes in the background,
    in that order, so a test finds its image there instead of waiting for the import (about 20 s a node for
    torch). A failure is left for the test that needs the image to meet and report."""

    def run() -> None:
        for name in names:
            try:
                if images.archive(name).exists():
                    load_image(info, name)
            except Exception as exc:  # reported by the test that needs the image, which imports it again
                print(f"real nodes: prefetching image {name} failed: {exc}", file=sys.stderr)

    thread = threading.Thread(target=run, name="prefetch-images", daemon=True)
    thread.start()
    return thread


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _ctr(
    bins: Path, node: RealNode, *args: str, check: bool = True, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    return plumbing.run(
        [str(bins / "ctr"), "--address", str(node.socket), "--namespace", "k8s.io", *args], check=check, timeout=timeout
    )


# --------------------------------------------------------------------------
# down


def _stop(p: dict[str, Any], grace: float = 10.0) -> None:
    pid, binary = int(p["pid"]), str(p["binary"])
    if not plumbing.pid_alive(pid) or not plumbing.pid_is(pid, binary):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while plumbing.pid_alive(pid) and plumbing.pid_is(pid, binary):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _kill_containers(bins: Path, socket: str) -> None:
    """Every task of this containerd killed and deleted (their shims exit with them)."""
    ctr = [str(bins / "ctr"), "--address", socket, "--namespace", "k8s.io"]
    if not Path(socket).exists():
        return
    listing = plumbing.run([*ctr, "tasks", "ls", "-q"], check=False, timeout=15).stdout.split()
    for task in listing:
        plumbing.run([*ctr, "tasks", "kill", "--signal", "SIGKILL", task], check=False, timeout=15)
    for task in listing:
        plumbing.run([*ctr, "tasks", "delete", "--force", task], check=False, timeout=30)


def _mounts_under(base: Path) -> list[str]:
    prefix_ = str(base).rstrip("/") + "/"
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mnt = line.split()[4].replace("\\040", " ")
        if mnt.startswith(prefix_) or mnt == str(base):
            out.append(mnt)
    return sorted(set(out), key=len, reverse=True)


#: iptables chains the node parts create: kube-proxy's and the kubelets' (KUBE-), the CNI portmap plugin's (CNI-).
#: Only real nodes run these on this machine (kwok's fake kubelets touch no iptables).
NODE_CHAIN_PREFIXES = ("KUBE-", "CNI-")


def chain_cleanup(table: str, rules: str, prefixes: tuple[str, ...]) -> list[list[str]]:
    """iptables commands removing every chain of `prefixes` from `table` (given as `iptables -S` output): the jumps
    from the other chains first, then flush and delete."""
    chains = [line.split()[1] for line in rules.splitlines() if line.startswith("-N ")]
    ours = [c for c in chains if c.startswith(prefixes)]
    commands = []
    for line in rules.splitlines():
        words = shlex.split(line)  # comments are quoted
        if words[:1] == ["-A"] and words[1] not in ours and "-j" in words:
            target = words[words.index("-j") + 1]
            if target in ours:
                commands.append(["-t", table, "-D", *words[1:]])
    commands += [["-t", table, "-F", c] for c in ours]
    commands += [["-t", table, "-X", c] for c in ours]
    return commands


def _remove_node_chains() -> None:
    for table in ("filter", "nat", "mangle"):
        listing = plumbing.run(["iptables", "-w", "-t", table, "-S"], check=False).stdout
        for command in chain_cleanup(table, listing, NODE_CHAIN_PREFIXES):
            plumbing.run(["iptables", "-w", *command], check=False)


def down(real: dict[str, Any]) -> None:
    """Undo everything `up` recorded, in reverse; idempotent, never raises for parts already gone."""
    if not real:
        return
    bins = Path(real.get("bins", ""))
    procs = {p["name"]: p for p in real.get("processes", [])}
    for name, p in procs.items():
        if name.startswith("kubelet-"):
            _stop(p)
    for socket in real.get("sockets", []):
        if bins.exists():
            _kill_containers(bins, socket)
    if "kube-proxy" in procs:
        _stop(procs["kube-proxy"])
        if (bins / "kube-proxy").exists():
            plumbing.run([str(bins / "kube-proxy"), "--cleanup"], check=False, timeout=60)
    for name, p in procs.items():
        if name.startswith("containerd-") or name in ("coredns", "apiserver-forward"):
            _stop(p)
    # Shims left by a containerd killed hard: they carry our socket in their arguments.
    for socket in real.get("sockets", []):
        for pid_dir in Path("/proc").glob("[0-9]*"):
            try:
                args = (pid_dir / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in b" ".join(args):
                with contextlib.suppress(OSError):
                    os.kill(int(pid_dir.name), signal.SIGKILL)
    base = Path(real.get("base", ""))
    if base.is_absolute() and base.name == "real":
        for m in _mounts_under(base):
            if plumbing.run(["umount", m], check=False).returncode != 0:
                plumbing.run(["umount", "-l", m], check=False)
    chain = real.get("chain")
    if chain:
        while plumbing.run(["iptables", "-w", "-D", "FORWARD", "-j", chain], check=False).returncode == 0:
            pass
        plumbing.run(["iptables", "-w", "-F", chain], check=False)
        plumbing.run(["iptables", "-w", "-X", chain], check=False)
    _remove_node_chains()
    for bridge in real.get("bridges", []):
        plumbing.run(["ip", "link", "del", bridge], check=False)
    for path, old in (real.get("sysctl") or {}).items():
        if old is not None:
            _sysctl(path, old)
    if base.is_absolute() and base.name == "real" and base.exists() and not _mounts_under(base):
        plumbing.run(["rm", "-rf", "--one-file-system", str(base)], check=False, timeout=120)
