"""The kopf adapter (`controller/kopf_adapter.py`): an error of kopf's stop after a fatal start-up problem does not
hide that problem's line (its watch streams and request path: controller/test_kopf_seams.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from log_capture import log_lines


async def _operator_raising(error: BaseException | None) -> None:
    await asyncio.sleep(0)
    if error is not None:
        raise error


@pytest.mark.parametrize(
    ("fatal", "error", "raised", "warned"),
    [
        pytest.param(
            "webhooks unreachable", AssertionError(), None, True, id="stopped for a fatal problem: its line wins"
        ),
        pytest.param(None, AssertionError(), AssertionError, False, id="no fatal problem: kopf's error is the news"),
        pytest.param("x", None, None, False, id="a clean stop after a fatal problem"),
        pytest.param(
            "x", asyncio.CancelledError(), asyncio.CancelledError, False, id="a cancellation is never swallowed"
        ),
    ],
)
def test_an_error_of_kopfs_stop_after_a_fatal_start_up_problem_does_not_hide_it(
    fatal: str | None,
    error: BaseException | None,
    raised: type[BaseException] | None,
    warned: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainjob_operator.controller.kopf_adapter import until_stopped

    def emit(_: Any) -> None:
        if raised is None:
            asyncio.run(until_stopped(_operator_raising(error), lambda: fatal))
        else:
            with pytest.raises(raised):
                asyncio.run(until_stopped(_operator_raising(error), lambda: fatal))

    lines = [json.loads(line) for line in log_lines("json", emit, capsys).splitlines()]
    said = [(line["level"], line["event"], line.get("error")) for line in lines]
    expected = (
        "warning",
        "kopf stopped with an error after a fatal start-up problem",
        "AssertionError: AssertionError()",
    )
    assert said == ([expected] if warned else [])
