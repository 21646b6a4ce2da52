"""Logs (`logs.py`): failures readable in one line, bounded per window, Secret material scrubbed from messages,
tracebacks and stdlib records, colour only on a terminal."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest

from builders import ManualClock
from fake_client import FakeClient
from log_capture import log_lines
from trainjob_operator import logs

PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
PRIVATE_KEY_B64 = "LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0KYjNCbGJuTnphQzFyWlhrdGRqRUFBQUFBQkc1dmJtVUFBQUFF"


# --- logs -----------------------------------------------------------------------------------------------------


def test_a_failure_is_logged_with_its_type_and_message_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    def emit(log: Any) -> None:
        try:
            raise aiohttp.ClientOSError(111, "Connection refused")
        except aiohttp.ClientError as err:
            log.warning("reconcile failed", **logs.error_fields(err))

    line = json.loads(log_lines("json", emit, capsys).splitlines()[-1])
    assert (line["event"], line["error_type"], "Connection refused" in line["error"]) == (
        "reconcile failed",
        "ClientOSError",
        True,
    )


def test_console_tracebacks_have_no_locals_and_no_secret(capsys: pytest.CaptureFixture[str]) -> None:
    def emit(log: Any) -> None:
        secret = {"apiVersion": "v1", "kind": "Secret", "data": {"ssh-privatekey": PRIVATE_KEY_B64}}
        key_text = PRIVATE_KEY  # noqa: F841
        try:
            raise ValueError(f"cannot apply {secret}: {PRIVATE_KEY}")
        except ValueError:
            log.exception("reconcile crashed", body=secret, ssh_key=PRIVATE_KEY)

    out = log_lines("console", emit, capsys)
    assert "Traceback" in out and "reconcile crashed" in out
    leaks = (PRIVATE_KEY_B64[:20] in out, "b3BlbnNzaC1rZXktdjEA" in out, "key_text" in out, "KEY-----\n" in out)
    assert leaks == (False, False, False, False)
    assert len(out.splitlines()) < 40


def test_json_exceptions_are_scrubbed_too(capsys: pytest.CaptureFixture[str]) -> None:
    def emit(log: Any) -> None:
        try:
            raise RuntimeError(f"tls.key: {PRIVATE_KEY_B64} and {PRIVATE_KEY}")
        except RuntimeError as err:
            log.error("failed", exc_info=err, **logs.error_fields(err))

    out = log_lines("json", emit, capsys)
    line = json.loads(out.splitlines()[-1])
    assert ("RuntimeError" in line["exception"], PRIVATE_KEY_B64[:20] in out, "b3BlbnNzaC1rZXkt" in out) == (
        True,
        False,
        False,
    )


def test_stdlib_logs_are_redacted_as_well(capsys: pytest.CaptureFixture[str]) -> None:
    def emit(_: Any) -> None:
        logging.getLogger("kopf.objects").error("patch failed: %s", {"data": {"ssh-privatekey": PRIVATE_KEY_B64}})

    out = log_lines("json", emit, capsys)
    assert "patch failed" in out and PRIVATE_KEY_B64[:20] not in out


@pytest.mark.parametrize(
    ("message", "level"),
    [
        pytest.param(
            "Request attempt #1/9 failed; will retry: GET https://x/apis/trainer.kubeflow.org/v1alpha1/trainjobs -> "
            "APITooManyRequestsError(429, 'storage is (re)initializing')",
            "info",
            id="a retried 429 (a new CRD's watch cache filling at start-up): info",
        ),
        pytest.param(
            "Request attempt #2/9 failed; will retry: GET https://x/version -> APIServerError(503, 'unavailable')",
            "warning",
            id="another retried failure: a warning",
        ),
        pytest.param(
            "Request attempt #9/9 failed; escalating: GET https://x/version -> APITooManyRequestsError(429, 'x')",
            "error",
            id="the last attempt stays an error",
        ),
    ],
)
def test_kopfs_retried_requests_are_logged_at_their_weight(
    message: str, level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def emit(_: Any) -> None:
        logging.getLogger("kopf").error(message)  # as kopf words it; its real path: test_kopf_seams.py

    line = json.loads(log_lines("json", emit, capsys).splitlines()[-1])
    assert (line["level"], line["event"]) == (level, message)


@pytest.mark.parametrize(("tty", "no_color", "coloured"), [(True, "", True), (False, "", False), (True, "1", False)])
def test_console_logs_are_coloured_only_on_a_terminal(
    tty: bool, no_color: str, coloured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stream:
        def isatty(self) -> bool:
            return tty

    monkeypatch.setenv("NO_COLOR", no_color)
    assert logs.colours_for(Stream()) is coloured


def test_console_logs_to_a_file_are_plain(capsys: pytest.CaptureFixture[str]) -> None:
    out = log_lines("console", lambda log: log.warning("reconcile failed", name="x"), capsys)
    assert ("reconcile failed" in out, "\x1b[" in out) == (True, False)


def test_failures_are_aggregated_per_window() -> None:
    clock = ManualClock()
    aggregator = logs.Aggregator(window=10, clock=clock)
    answers = []
    for step in range(614):  # an API outage of 4 s at ~150 failures per second, then one more after the window
        clock.now = 1000 + step * 4 / 614
        answers.append(aggregator.admit("ClientConnectorError"))
    clock.now = 1011
    answers.append(aggregator.admit("ClientConnectorError"))
    assert [a for a in answers if a is not None] == [0, 613]


def test_reconcile_failures_on_an_outage_log_a_few_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.main import Manager

    def emit(_: Any) -> None:
        async def scenario() -> None:
            manager = Manager(OperatorConfig(), FakeClient())
            for index in range(614):
                manager.log_failure(("ns", f"job-{index}"), aiohttp.ServerDisconnectedError())

        asyncio.run(scenario())

    lines = [json.loads(line) for line in log_lines("json", emit, capsys).splitlines()]
    assert [(entry["event"], entry["error_type"], entry["suppressed"]) for entry in lines] == [
        ("reconcile failed: API server unreachable or refusing", "ServerDisconnectedError", 0)
    ]
