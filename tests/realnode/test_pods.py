"""Pods on the real nodes: containerd containers, the pod network across nodes, cluster DNS, logs through the API
server (issue 23, milestone 2)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from cluster_fixtures import wait_for
from harness import cluster as cluster_lib
from harness import images, realnodes

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("python",)


def _pod(name: str, node: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "peers"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [realnodes.REAL_NODE_TOLERATION],
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": images.ref("busybox"),
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                }
            ],
            **spec,
        },
    }


def _create(cluster: cluster_lib.ClusterInfo, namespace: str, obj: dict[str, Any]) -> None:
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj))


def _pod_json(cluster: cluster_lib.ClusterInfo, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.kubectl_json("get", "pod", name, "-n", namespace))


def _finished(cluster: cluster_lib.ClusterInfo, namespace: str, name: str) -> tuple[str, str]:
    """The pod's final phase (polled with a deadline) and its log, read through the API server."""

    def phase() -> str:
        current = _pod_json(cluster, namespace, name).get("status", {}).get("phase", "")
        return str(current) if current in ("Succeeded", "Failed") else ""

    final = wait_for(phase, timeout=120, what=f"pod {name} to finish")
    return final, cluster.kubectl("logs", "-n", namespace, name).stdout


def test_real_nodes_are_labelled_tainted_and_not_kwoks(cluster: cluster_lib.ClusterInfo) -> None:
    nodes = cluster.kubectl_json("get", "nodes")["items"]
    real = {n["metadata"]["name"]: n for n in nodes if n["metadata"].get("labels", {}).get(realnodes.REAL_NODE_LABEL)}
    assert sorted(real) == ["real-node-0", "real-node-1"]
    for node in real.values():
        assert realnodes.REAL_NODE_TAINT in [
            {k: t[k] for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])
        ]
        assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {})
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://2.")
    fake = [n for n in nodes if n["metadata"]["name"] not in real]
    assert fake and all(n["metadata"]["annotations"].get("kwok.x-k8s.io/node") == "fake" for n in fake)


def test_pods_on_two_nodes_talk_by_dns_name_and_log_through_the_api_server(
    cluster: cluster_lib.ClusterInfo, namespace: str
) -> None:
    t0 = time.monotonic()
    _create(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "peers"},
            "spec": {"clusterIP": "None", "selector": {"app": "peers"}, "publishNotReadyAddresses": True},
        },
    )
    # busybox's nc, not its wget: Debian's static busybox wget crashes (SIGSEGV) even on the host.
    server = _pod(
        "server",
        "real-node-0",
        'while true; do nc -l -p 8080 -e echo "hello from $(hostname) on $NODE_NAME"; done',
        hostname="server",
        subdomain="peers",
    )
    fqdn = f"server.peers.{namespace}.svc.cluster.local"
    client = _pod(
        "client",
        "real-node-1",
        # Retried with a bound: the server's DNS record and listener appear a moment after it starts.
        f"for i in $(seq 60); do if nc -w 2 {fqdn} 8080 > /tmp/out 2>/dev/null && [ -s /tmp/out ]; then "
        f'echo "client on $NODE_NAME got: $(cat /tmp/out)"; '
        "nslookup example.com >/dev/null 2>&1 && echo 'outside name resolved' || echo 'outside name refused'; "
        "exit 0; fi; sleep 0.5; done; echo 'server never answered'; exit 1",
    )
    _create(cluster, namespace, server)
    _create(cluster, namespace, client)

    phase, logs = _finished(cluster, namespace, "client")
    assert phase == "Succeeded", logs
    assert logs.splitlines() == [
        "client on real-node-1 got: hello from server on real-node-0",
        "outside name refused",
    ]
    for name, node in (("server", "real-node-0"), ("client", "real-node-1")):
        pod = _pod_json(cluster, namespace, name)
        assert pod["spec"]["nodeName"] == node
        assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
        assert pod["status"]["podIP"].startswith("10.244.")
    print(f"two pods, DNS and HTTP across nodes: {time.monotonic() - t0:.1f}s")


IN_CLUSTER_VERSION = """
import json, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
token = open(f"{sa}/token").read()
for host in ("kubernetes.default.svc", "10.0.0.1"):
    req = urllib.request.Request(f"https://{host}/version", headers={"Authorization": f"Bearer {token}"})
    print(host, json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["gitVersion"], flush=True)
"""


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    cluster: cluster_lib.ClusterInfo, namespace: str
) -> None:
    pod = _pod("api", "real-node-1", "", restartPolicy="Never")
    container = pod["spec"]["containers"][0]
    container["image"] = realnodes.load_image(cluster, "python")
    container["command"] = ["python3", "-c", IN_CLUSTER_VERSION]
    _create(cluster, namespace, pod)

    phase, logs = _finished(cluster, namespace, "api")
    assert phase == "Succeeded", logs
    # TLS verified against the cluster's CA for the Service's name and its ClusterIP, a projected token accepted.
    assert logs.splitlines() == ["kubernetes.default.svc v1.36.3", "10.0.0.1 v1.36.3"]
