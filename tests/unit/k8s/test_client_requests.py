"""The client's requests (`k8s/client.py`): the rate limiter and the resource named in request metrics."""

import asyncio

import pytest

from trainjob_operator.k8s.client import RateLimiter, resource_name


def test_rate_limiter_enforces_qps_after_the_burst() -> None:
    async def scenario() -> float:
        limiter = RateLimiter(qps=20, burst=2)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(6):
            await limiter.acquire()
        return loop.time() - start

    assert asyncio.run(scenario()) >= 4 / 20 * 0.9  # two from the burst, four at 20/s


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/x", "jobsets"),
        ("/api/v1/namespaces/ns/configmaps", "configmaps"),
        ("/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b/status", "trainjobs"),
        ("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/x", "clustertrainingruntimes"),
    ],
)
def test_request_metrics_name_the_resource(path: str, resource: str) -> None:
    assert resource_name(path) == resource
