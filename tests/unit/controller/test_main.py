"""The operator process (`controller/main.py`): a background task that dies stops the operator, event loop errors
are one line, nothing is logged after the exit line, and kopf never loads the kubernetes client's models."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import aiohttp
import pytest

from fake_client import FakeClient
from log_capture import log_lines

# --- supervision ----------------------------------------------------------------------------------------------


def test_a_background_task_that_dies_fails_healthz_and_stops_the_operator() -> None:
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.main import Manager, supervise

    async def scenario() -> tuple[list[str], bool, tuple[bool, str]]:
        manager = Manager(OperatorConfig(), FakeClient())
        stop = asyncio.Event()

        async def crashes() -> None:
            raise aiohttp.ServerDisconnectedError()

        task = asyncio.create_task(crashes())
        supervise(manager, "leader election", task, stop)
        await asyncio.wait_for(stop.wait(), 5)
        return manager.dead, stop.is_set(), manager.liveness()

    assert asyncio.run(scenario()) == (["leader election"], True, (False, "background task ended: leader election"))


# --- event loop errors and the exit line ---------------------------------------------------------------------


def test_event_loop_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """kopf's watch generator failing to close at shutdown reached the log as a traceback."""
    from trainjob_operator.controller.main import loop_error

    def emit(_: Any) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop_error(
                loop,
                {
                    "message": "an error occurred during closing of asynchronous generator",
                    "exception": RuntimeError("generator didn't stop after athrow()"),
                },
            )
        finally:
            loop.close()

    line = json.loads(log_lines("json", emit, capsys).splitlines()[-1])
    assert (line["event"], line["error_type"], "exception" in line) == ("event loop error", "RuntimeError", False)


def test_nothing_is_logged_after_the_exit_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task kopf cut short on a fatal start-up problem was collected after the exit line and logged "Task exception
    was never retrieved" below it (seen once in six starts of the webhook check, issue 27)."""
    from trainjob_operator.controller import main

    def emit(_: Any) -> None:
        loop = asyncio.new_event_loop()
        loop.close()  # `serve`'s loop is closed when `run` prints the exit line; the task is collected after
        assert main._exit("the API server cannot call the operator's webhooks", 3) == 3
        main.loop_error(loop, {"message": "Task exception was never retrieved", "exception": AssertionError()})

    said = log_lines("json", emit, capsys).strip().splitlines()
    assert said == ["trainjob-operator: error: the API server cannot call the operator's webhooks"]


def test_the_operator_does_not_load_the_kubernetes_client_models() -> None:
    """kopf would import them (1-3 s of start-up, ~40 MiB) only to recognise objects we never pass."""
    code = "import sys, trainjob_operator.controller.main; print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
