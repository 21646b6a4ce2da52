"""The config file (`config.py`): errors name the field."""

from pathlib import Path

import pytest

from trainjob_operator import config as config_module


def test_config_file_errors_name_the_field(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("client: {qps: 5, burst: 10}\nwebhook: {port: 9000}\n")
    cfg = config_module.load(good)
    assert (cfg.client.qps, cfg.client.burst, cfg.webhook.port) == (5, 10, 9000)
    bad = tmp_path / "bad.yaml"
    bad.write_text("client: {qps: -1}\nwebhok: {}\n")
    with pytest.raises(config_module.ConfigFileError, match=r"client\.qps.*webhok"):
        config_module.load(bad)
