"""A headless Chromium driven over the W3C WebDriver protocol with the standard library (Debian's `chromium` and
`chromium-driver`; `make tools-browser` installs both), a fixture of the integration and real-node sessions
(their conftest.py). Screenshots go to $TRAINJOB_TEST_ARTIFACTS/<folder> (default .test-artifacts/ui);
docs/images/ui-*.png are copies of them."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operator_fixtures import REPO, answers_200, eventually, free_port

CHROMIUM = os.environ.get("TRAINJOB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS_ROOT = Path(os.environ.get("TRAINJOB_TEST_ARTIFACTS", REPO / ".test-artifacts"))
ARTIFACTS = ARTIFACTS_ROOT / "ui"
KEYS = {"tab": "\ue004", "enter": "\ue007", "shift": "\ue008"}


class Browser:
    """The few WebDriver commands the test needs, over HTTP with urllib."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            "--window-size=1280,900",
                            "--force-prefers-reduced-motion",
                        ],
                    },
                }
            }
        }
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as err:
            raise AssertionError(f"WebDriver {method} {path}: {err.read()[:500]!r}") from err

    def cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def keys(self, *sequence: str) -> None:
        actions = []
        for key in sequence:
            actions += [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]
        self.cmd("POST", "/actions", {"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})

    def screenshot(self, name: str, height: int | None = None, folder: Path = ARTIFACTS) -> Path:
        if height is not None:
            self.cmd("POST", "/window/rect", {"width": 1280, "height": height})
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        path.write_bytes(base64.b64decode(self.cmd("GET", "/screenshot")))
        return path

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self._call("DELETE", f"/session/{self.session}")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(
            f"needs Chromium and its driver ({CHROMIUM}, {CHROMEDRIVER}): "
            "`apt-get install -y chromium chromium-driver` (make test installs them)"
        )
    port = free_port()
    # Chromium's profile (`scoped_dir*`) and, with --disable-dev-shm-usage, its shared memory files
    # (`org.chromium.Chromium.*`) go to TMPDIR, and not all are removed when the session ends: in pytest's
    # tmp_path they go with pytest's own rotation instead of accumulating in /tmp (6 MB a session).
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        eventually(lambda: answers_200(f"http://127.0.0.1:{port}/status"), "chromedriver", timeout=30)
        session = Browser(port)
        try:
            yield session
        finally:
            session.close()
    finally:
        driver.terminate()
        driver.wait(timeout=20)
