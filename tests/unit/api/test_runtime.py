"""The runtime models (`api/runtime.py`): embedded Kubernetes types round-trip without loss."""

from typing import Any

UPSTREAM_LIKE_RUNTIME: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "deepspeed-distributed", "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
    "spec": {
        "mlPolicy": {
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": 1,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/home/mpiuser/.ssh",
                "runLauncherAsNode": True,
            },
        },
        "template": {
            "spec": {
                "network": {"publishNotReadyAddresses": True, "enableDNSHostnames": True},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "failurePolicy": {
                    "maxRestarts": 3,
                    "restartStrategy": "Recreate",
                    "rules": [{"name": "r", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
                },
                "volumeClaimPolicies": [
                    {
                        "templates": [
                            {
                                "metadata": {"name": "initializer"},
                                "spec": {
                                    "accessModes": ["ReadWriteOnce"],
                                    "resources": {"requests": {"storage": "20Gi"}},
                                },
                            }
                        ]
                    }
                ],
                "replicatedJobs": [
                    {
                        "name": "node",
                        "groupName": "default",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "backoffLimit": 0,
                                "podFailurePolicy": {
                                    "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]
                                },
                                "template": {
                                    "spec": {
                                        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
                                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime",
                                                "command": ["/usr/sbin/sshd", "-De"],
                                                "readinessProbe": {
                                                    "tcpSocket": {"port": 2222},
                                                    "initialDelaySeconds": 5,
                                                },
                                                "securityContext": {"allowPrivilegeEscalation": False},
                                                "imagePullPolicy": "IfNotPresent",
                                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                                                "volumeMounts": [
                                                    {
                                                        "name": "initializer",
                                                        "mountPath": "/workspace",
                                                        "readOnly": True,
                                                        "subPath": "x",
                                                    }
                                                ],
                                            }
                                        ],
                                    }
                                },
                            }
                        },
                    },
                ],
            }
        },
    },
}


def test_embedded_kubernetes_types_round_trip_without_loss() -> None:
    from trainjob_operator.api.runtime import ClusterTrainingRuntime

    assert ClusterTrainingRuntime.model_validate(UPSTREAM_LIKE_RUNTIME).to_wire() == UPSTREAM_LIKE_RUNTIME
