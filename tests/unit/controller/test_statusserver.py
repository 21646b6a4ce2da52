"""The status server (`controller/statusserver.py`): the URL trainer pods get."""

from typing import Any

import pytest

from trainjob_operator import config as config_module


@pytest.mark.parametrize(
    ("status_server", "webhook_service", "webhook_url_host", "want"),
    [
        pytest.param({}, None, None, "https://127.0.0.1:10443", id="out of a cluster: the listening host and port"),
        pytest.param(
            {"url_port": 7443},
            None,
            "10.0.0.5",
            "https://10.0.0.5:7443",
            id="replicas behind one local load balancer: every one writes the balancer's port",
        ),
        pytest.param(
            {"url_host": "st.local", "port": 9000},
            None,
            "10.0.0.5",
            "https://st.local:9000",
            id="its own url_host wins over the webhook's",
        ),
        pytest.param(
            {"url_port": 7443},
            "svc",
            None,
            "https://svc.ops.svc:10443",
            id="in a cluster: the Service and the served port, url_port ignored",
        ),
    ],
)
def test_the_status_server_url_trainer_pods_get(
    status_server: dict[str, Any], webhook_service: str | None, webhook_url_host: str | None, want: str
) -> None:
    from trainjob_operator.controller.statusserver import base_url

    cfg = config_module.StatusServerConfig.model_validate(status_server)
    assert base_url(cfg, webhook_service, webhook_url_host, "ops") == want
