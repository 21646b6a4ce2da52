"""The real nodes' plan and teardown decisions (hack/harness/realnodes.py), without a machine to run them."""

from __future__ import annotations

import os
import shutil
import signal
import time
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from harness import cluster, realnodes


def test_plan_gives_each_node_its_own_bridge_subnet_and_directories() -> None:
    nodes = realnodes.plan("trainjob-operator", 2, Path("/s/real"))
    p = realnodes.prefix("trainjob-operator")
    assert nodes == [
        realnodes.RealNode(0, "real-node-0", f"{p}-n0", "10.244.1.0/24", "10.244.1.1", Path("/s/real/n0")),
        realnodes.RealNode(1, "real-node-1", f"{p}-n1", "10.244.2.0/24", "10.244.2.1", Path("/s/real/n1")),
    ]
    assert all(len(n.bridge) <= 15 for n in nodes)  # Linux interface names
    assert realnodes.prefix("other") != p
    assert realnodes.dns_ip(nodes) == "10.244.1.1"


def test_containerd_config_has_this_machines_settings() -> None:
    node = realnodes.plan("c", 1, Path("/s/real"))[0]
    config = tomllib.loads(realnodes.containerd_config(node, Path("/b"), Path("/cni"), "localhost/x/pause:1"))
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert config["grpc"]["address"] == "/s/real/n0/containerd.sock"
    assert (config["root"], config["state"]) == ("/s/real/n0/containerd/root", "/s/real/n0/containerd/state")
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["cni"] == {"bin_dirs": ["/cni"], "conf_dir": "/s/real/n0/cni-conf", "max_conf_num": 1}
    assert runtime["containerd"]["runtimes"]["runc"]["options"] == {"BinaryName": "/b/runc", "SystemdCgroup": False}
    assert config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"] == {"sandbox": "localhost/x/pause:1"}
    assert "io.containerd.nri.v1.nri" in config["disabled_plugins"]


def test_kubelet_config_for_cgroup_v1_taint_and_cluster_dns() -> None:
    node = realnodes.plan("c", 1, Path("/s/real"))[0]
    config = realnodes.kubelet_config(node, port=1, healthz_port=2, dns="10.244.1.1")
    assert {k: config[k] for k in ("cgroupDriver", "failCgroupV1", "cgroupsPerQOS", "failSwapOn")} == {
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "cgroupsPerQOS": False,
        "failSwapOn": False,
    }
    assert (config["address"], config["healthzBindAddress"], config["readOnlyPort"]) == ("10.244.1.1", "127.0.0.1", 0)
    assert config["registerWithTaints"] == [realnodes.REAL_NODE_TAINT]
    assert (config["clusterDNS"], config["resolvConf"]) == (["10.244.1.1"], "/s/real/n0/resolv.conf")


def test_a_silent_node_turns_unknown_in_16_s_and_a_live_one_renews_eight_times_within_that() -> None:
    """The node lifecycle controller's grace is short (the kubelet-killed and elastic tests wait for it), and every
    lease it watches (our kubelets', kwok's nodes') is renewed at a quarter of its duration: eight renewals fit in
    the grace, so a loaded machine delaying one or two does not turn a live node NotReady."""
    options = realnodes.NODE_MONITOR_OPTIONS
    grace_s = options["kubeControllerManagerNodeMonitorGracePeriodMilliseconds"] / 1000
    node = realnodes.plan("c", 1, Path("/s/real"))[0]
    kubelet_lease_s = realnodes.kubelet_config(node, port=1, healthz_port=2, dns="10.244.1.1")[
        "nodeLeaseDurationSeconds"
    ]
    assert grace_s == 16 and options["kubeControllerManagerNodeMonitorPeriodMilliseconds"] == 2000
    for lease_s in (kubelet_lease_s, options["nodeLeaseDurationSeconds"]):
        assert grace_s / (lease_s / 4) >= 8


def test_corefile_serves_cluster_local_and_forwards_nothing() -> None:
    text = realnodes.corefile("10.244.1.1", Path("/k"), "ctx", 9)
    assert text.startswith("cluster.local:53 {")
    assert "forward" not in text and "kubeconfig /k ctx" in text and "bind 10.244.1.1" in text


KUBE_PROXY_RULES = """-P PREROUTING ACCEPT
-N KUBE-SERVICES
-N KUBE-SVC-X
-N OTHER
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j OTHER
-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-X
"""


@pytest.mark.parametrize(
    ("sentence", "rules", "expected"),
    [
        ("an empty table needs nothing", "-P INPUT ACCEPT\n", []),
        (
            "jumps from built-in chains go first (quoted comments kept whole), then our chains are flushed and deleted;"
            " other chains stay",
            KUBE_PROXY_RULES,
            [
                [
                    "-t",
                    "nat",
                    "-D",
                    "PREROUTING",
                    "-m",
                    "comment",
                    "--comment",
                    "kubernetes service portals",
                    "-j",
                    "KUBE-SERVICES",
                ],
                ["-t", "nat", "-F", "KUBE-SERVICES"],
                ["-t", "nat", "-F", "KUBE-SVC-X"],
                ["-t", "nat", "-X", "KUBE-SERVICES"],
                ["-t", "nat", "-X", "KUBE-SVC-X"],
            ],
        ),
        (
            "CNI portmap chains too",
            "-N CNI-HOSTPORT-DNAT\n-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\n",
            [
                ["-t", "nat", "-D", "OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"],
                ["-t", "nat", "-F", "CNI-HOSTPORT-DNAT"],
                ["-t", "nat", "-X", "CNI-HOSTPORT-DNAT"],
            ],
        ),
    ],
)
def test_chain_cleanup(sentence: str, rules: str, expected: list[list[str]]) -> None:
    assert realnodes.chain_cleanup("nat", rules, realnodes.NODE_CHAIN_PREFIXES) == expected, sentence


def test_forward_rules_keep_pod_traffic_between_our_bridges() -> None:
    assert realnodes.forward_rules("TJ-FWD", "tjabcde-n+") == [
        ["-A", "TJ-FWD", "-s", "10.244.0.0/16", "!", "-o", "tjabcde-n+", "-j", "DROP"],
        ["-A", "TJ-FWD", "-d", "10.244.0.0/16", "!", "-i", "tjabcde-n+", "-j", "DROP"],
    ]


def test_a_killed_kubelet_is_recorded_again_with_its_arguments_when_it_restarts(tmp_path: Path) -> None:
    """`kill_kubelet` SIGKILLs the recorded process; starting it again (as `restart_kubelet` does) replaces its
    record, with the same arguments and environment, so `down` stops the one that runs now."""
    import shutil
    import types

    sleep = shutil.which("sleep")
    assert sleep
    # A stand-in for the ClusterInfo (deliberately another type: kill_kubelet reads only its `.real` record).
    info = types.SimpleNamespace(real={"processes": []})
    log = tmp_path / "kubelet.log"
    first = realnodes._start("kubelet-0", [sleep, "30"], log, info.real, env={"X": "1"})
    realnodes.kill_kubelet(cast(cluster.ClusterInfo, info), 0)
    assert not realnodes._alive(info.real, "kubelet-0")
    record = realnodes._record(info.real, "kubelet-0")
    second = realnodes._start(record["name"], record["args"], log, info.real, env=record["env"])
    try:
        assert second != first
        assert info.real["processes"] == [
            {
                "name": "kubelet-0",
                "pid": second,
                "binary": sleep,
                "log": str(log),
                "args": [sleep, "30"],
                "env": {"X": "1"},
            }
        ]
        # Popen returns before the child has exec'd sleep (its /proc/PID/exe is still this Python): poll, bounded.
        deadline = time.monotonic() + 10
        while not realnodes._alive(info.real, "kubelet-0") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert realnodes._alive(info.real, "kubelet-0")
    finally:
        realnodes.kill_kubelet(cast(cluster.ClusterInfo, info), 0)


IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever preferred_lft forever
{extra}"""

FOREIGN_HOLDER_CASES = {
    "no real nodes up: the addresses are free": ("", None),
    "our own bridge from a run killed hard is no other cluster's": (
        "7: {ours}    inet 10.244.1.1/24 scope global {ours}\\       valid_lft forever",
        None,
    ),
    "another cluster's bridge holds the first node's address": (
        "9: tjother-n0    inet 10.244.1.1/24 scope global tjother-n0\\       valid_lft forever",
        "tjother-n0 (10.244.1.1)",
    ),
    "an address outside the nodes' is no collision": (
        "9: tjother-n0    inet 10.245.1.1/24 scope global tjother-n0\\       valid_lft forever",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(FOREIGN_HOLDER_CASES))
def test_foreign_holder(case: str, tmp_path: Path) -> None:
    nodes = realnodes.plan("demo", 2, tmp_path)
    extra, want = FOREIGN_HOLDER_CASES[case]
    assert realnodes.foreign_holder(IP_ADDR.format(extra=extra.format(ours=nodes[0].bridge)), nodes) == want


def test_a_process_that_has_not_shown_its_binary_yet_is_waited_for_not_reported_exited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within `EXEC_GRACE_S` of the start, a live pid whose /proc cmdline is not yet the binary is still starting."""
    sleep = shutil.which("sleep")
    assert sleep
    real: dict[str, Any] = {"processes": []}
    realnodes._start("coredns", [sleep, "30"], tmp_path / "coredns.log", real)
    shown = iter([False, False, True])
    monkeypatch.setattr(realnodes, "_alive", lambda real, name: next(shown))
    try:
        realnodes._wait_alive(real, "coredns", "CoreDNS ready", lambda: True, 10)
    finally:
        os.kill(real["processes"][0]["pid"], signal.SIGKILL)


def test_a_kubelet_has_bound_the_device_plugin_socket_once_the_file_is_made_after_its_start(tmp_path: Path) -> None:
    """Two kubelets share one device-plugin socket path; the second starts once the first has bound it."""
    socket = tmp_path / "kubelet.sock"
    started = time.time()
    assert not realnodes._bound_since(socket, started), "no file yet"
    socket.touch()
    os.utime(socket, (started - 60, started - 60))
    assert not realnodes._bound_since(socket, started), "a file left by an earlier kubelet"
    os.utime(socket, (started, started))
    assert realnodes._bound_since(socket, started), "bound by the kubelet started at `started`"
