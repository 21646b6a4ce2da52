"""Apply the chart's enabled ClusterTrainingRuntimes and prune the ones this release installed before.

Run by the post-install/post-upgrade Job with the operator image (its own Kubernetes client, in-cluster config):
    python /runtimes/install-runtimes.py /runtimes/runtimes.yaml <release>
Runtimes are server-side applied (field manager trainjob-operator-runtimes-installer) and labelled
trainer.kubeflow.org/managed-by=runtimes-installer plus app.kubernetes.io/instance=<release>; labelled runtimes
that are no longer enabled are deleted.
"""

import asyncio
import sys

import yaml

from trainjob_operator.k8s import connection
from trainjob_operator.k8s.client import Client

API_VERSION, KIND = "trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"
MANAGER = "trainjob-operator-runtimes-installer"
MANAGED_BY = "trainer.kubeflow.org/managed-by"


async def install(path: str, release: str) -> None:
    with open(path) as handle:
        wanted = [doc for doc in yaml.safe_load_all(handle) if doc]
    selector = {MANAGED_BY: "runtimes-installer", "app.kubernetes.io/instance": release}
    async with Client(connection.load()) as client:
        for obj in wanted:
            obj["metadata"].setdefault("labels", {}).update(selector)
            await client.apply(obj, MANAGER, force=True)
            print(f"applied {KIND} {obj['metadata']['name']}", flush=True)
        names = {obj["metadata"]["name"] for obj in wanted}
        label_selector = ",".join(f"{k}={v}" for k, v in selector.items())
        for obj in await client.list(API_VERSION, KIND, label_selector=label_selector):
            if obj["metadata"]["name"] not in names:
                await client.delete(API_VERSION, KIND, obj["metadata"]["name"])
                print(f"pruned {KIND} {obj['metadata']['name']}", flush=True)


if __name__ == "__main__":
    asyncio.run(install(sys.argv[1], sys.argv[2]))
