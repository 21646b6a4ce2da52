"""No user text reaches a person raw (issue 24): `runtime.errors.printable` escapes control characters, and every
path that echoes user input uses it where the message is emitted. One table per path: the CLI's errors, the
operator's log lines (console and JSON), the Warning Event, the status condition messages and the webhook's denial.
The hostile name is the one the fuzz found: a carriage return and the escape sequence that clears a terminal."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import structlog

from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator import cli, logs
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import Condition, TrainJobStatus
from trainjob_operator.controller.admissionserver import AdmissionVerdict, response
from trainjob_operator.runtime import plan
from trainjob_operator.runtime.conditions import set_condition
from trainjob_operator.runtime.errors import describe, printable
from trainjob_operator.runtime.plan import Failure
from trainjob_operator.runtime.status import with_reconcile_error

EVIL = "evil\r\x1b[2Jname"
SHOWN = "evil\\r\\x1b[2Jname"
NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


COLOURS = re.compile(r"\x1b\[[0-9;]*m")
"""The console log format's own colours (SGR sequences); nothing else of the kind may reach a terminal."""


def raw_control_characters(text: str) -> list[str]:
    """The lines of `text` (split at newlines only, without the log format's colours) that still hold a character
    `printable` would escape."""
    return [line for line in COLOURS.sub("", text).split("\n") if printable(line) != line]


@pytest.mark.parametrize(
    ("sentence", "text", "expected"),
    [
        ("plain text is left alone", "TrainJob default/a: 3 error(s)", "TrainJob default/a: 3 error(s)"),
        ("carriage return and an escape sequence", EVIL, SHOWN),
        ("newline and tab as Go's %q writes them", "a\nb\tc", "a\\nb\\tc"),
        ("NUL, BEL and DEL", "\x00\x07\x7f", "\\x00\\x07\\x7f"),
        ("a C1 control (CSI, which some terminals obey)", "a\x9b2Jb", "a\\u009b2Jb"),
        ("line and paragraph separators", "a\u2028b\u2029c", "a\\u2028b\\u2029c"),
        ("bidirectional overrides (text shown reversed)", "a\u202eb\u2066c\u2069", "a\\u202eb\\u2066c\\u2069"),
        ("letters of any script and emoji are text", "naïve 日本語 🚀", "naïve 日本語 🚀"),
        ("an escape already written stays as it is", SHOWN, SHOWN),
    ],
)
def test_printable(sentence: str, text: str, expected: str) -> None:
    assert printable(text) == expected, sentence
    assert printable(printable(text)) == printable(text), "printing twice changes nothing more"


def test_describe_is_one_printable_line() -> None:
    """Whitespace (the carriage return too) is one space, as before; any other control character is escaped."""
    assert describe(ValueError(f"bad {EVIL}\nsecond line")) == "ValueError: bad evil \\x1b[2Jname second line"


# --- the CLI ---------------------------------------------------------------------------------------------------------


def yaml_of(*objects: dict[str, Any]) -> str:
    return "---\n".join(json.dumps(obj) + "\n" for obj in objects)


CTR = c.CLUSTER_TRAINING_RUNTIME_KIND
JOB = TrainJobBuilder.make(name="job", runtime=EVIL, kind=CTR).raw()
RUNTIME = RuntimeBuilder.make(name=EVIL, kind=CTR).raw()
GOOD_RUNTIME = RuntimeBuilder.make(name="other", kind=CTR).raw()


@pytest.mark.parametrize(
    ("sentence", "argv", "files", "expected"),
    [
        (
            "validate: an invalid runtime's summary names it escaped",
            ["validate", "-f", "{jobs}", "-r", "{runtimes}"],
            {"jobs": yaml_of(JOB), "runtimes": yaml_of(RUNTIME)},
            f"invalid: ClusterTrainingRuntime {SHOWN} ({{folder}}/runtimes.yaml#1): 1 error(s)",
        ),
        (
            "render: a TrainJob whose runtime is missing ends with one escaped error line",
            ["render", "-f", "{jobs}", "-r", "{runtimes}"],
            {"jobs": yaml_of(JOB), "runtimes": yaml_of(GOOD_RUNTIME)},
            f"trainjob-operator: error: TrainJob default/job ({{folder}}/jobs.yaml#1): runtime ClusterTrainingRuntime {SHOWN} "
            "not found in the -r files",
        ),
        (
            "convert: an object that is not a Trainer object is named escaped",
            ["convert", "-f", "{jobs}"],
            {"jobs": yaml_of({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": EVIL}})},
            f"unchanged: ConfigMap {SHOWN} ({{folder}}/jobs.yaml#1): not a Trainer object",
        ),
        (
            "a usage error that echoes a file name is escaped",
            ["validate", "-f", f"{{folder}}/{EVIL}.yaml"],
            {},
            f"trainjob-operator: error: cannot read {{folder}}/{SHOWN}.yaml",
        ),
    ],
)
def test_the_cli_prints_user_text_escaped(
    tmp_path: Path, sentence: str, argv: list[str], files: dict[str, str], expected: str
) -> None:
    paths = {"folder": str(tmp_path)}
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        paths[name] = str(tmp_path / f"{name}.yaml")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        cli.main([arg.format(**paths) for arg in argv])
    said = err.getvalue()
    assert raw_control_characters(said) == [], sentence
    assert any(line.startswith(expected.format(**paths)) for line in said.splitlines()), (sentence, said)


def test_the_operators_one_line_exit_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """`trainjob-operator run`'s one line (a config or kubeconfig error may name the user's context)."""
    from trainjob_operator.controller.main import _exit

    assert _exit(f"context {EVIL} not found", 2) == 2
    assert capsys.readouterr().err == f"trainjob-operator: error: context {SHOWN} not found\n"


# --- the operator's logs ---------------------------------------------------------------------------------------------


@pytest.fixture
def log_output() -> Any:
    """The root handler's stream, for each format; the logging setup as it was afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)

    def configure(fmt: str) -> io.StringIO:
        stream = io.StringIO()
        logs.configure(fmt)
        structlog.reset_defaults()
        logs.configure(fmt)
        handler = root.handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(stream)
        return stream

    yield configure
    root.handlers[:], _ = saved
    root.setLevel(saved[1])
    structlog.reset_defaults()


@pytest.mark.parametrize("fmt", ["console", "json"])
@pytest.mark.parametrize(
    ("sentence", "emit"),
    [
        ("a field of our own log line", lambda: logs.get("t").warning("reconcile failed", name=EVIL)),
        ("the message of our own log line", lambda: logs.get("t").warning(f"runtime {EVIL} not found")),
        ("a line of kopf's (stdlib logging)", lambda: logging.getLogger("kopf.t").warning("object %s", EVIL)),
    ],
)
def test_log_lines_escape_user_text(log_output: Any, fmt: str, sentence: str, emit: Any) -> None:
    stream = log_output(fmt)
    emit()
    written = stream.getvalue()
    assert raw_control_characters(written) == [], sentence
    assert written.count("\n") == 1, "one event, one line"
    assert SHOWN in written.replace("\\\\", "\\"), sentence  # JSON writes each backslash twice


def test_a_logged_traceback_keeps_its_lines_each_escaped(log_output: Any) -> None:
    stream = log_output("console")
    try:
        raise ValueError(EVIL)
    except ValueError:
        logs.get("t").exception("failed")
    written = stream.getvalue()
    assert raw_control_characters(written) == []
    assert f"ValueError: {SHOWN}" in written and "Traceback (most recent call last):\n" in written


# --- Events, status conditions and webhook denials ---------------------------------------------------------------------


def test_the_warning_event_escapes_the_failure() -> None:
    event = plan.event(TrainJobBuilder.make().obj(), Failure("ApplyFailed", f"runtime {EVIL}"), None, NOW)
    assert event is not None
    assert event["message"] == f"TrainJob resources reconciliation failed: runtime {SHOWN}"


@pytest.mark.parametrize(
    ("sentence", "existing"),
    [
        ("a new condition", []),
        ("a condition that changes its message", [Condition(type="Failed", status="True", message="before")]),
    ],
)
def test_condition_messages_are_stored_escaped(sentence: str, existing: list[Condition]) -> None:
    conditions = list(existing)
    set_condition(conditions, Condition(type="Failed", status="True", reason="R", message=EVIL), NOW)
    assert [cond.message for cond in conditions] == [SHOWN], sentence


def test_the_reconcile_failed_condition_escapes_its_message() -> None:
    status = with_reconcile_error(TrainJobStatus(), ("ApplyFailed", f"jobsets {EVIL} is forbidden"), NOW)
    assert [cond.message for cond in status.conditions or []] == [f"jobsets {SHOWN} is forbidden"]


def test_the_webhooks_denial_and_warnings_are_escaped() -> None:
    verdict = AdmissionVerdict(allowed=False, message=f"runtime {EVIL} not found", warnings=(f"label {EVIL}",))
    assert response({"uid": "u1"}, verdict)["response"] == {
        "uid": "u1",
        "allowed": False,
        "status": {"code": 403, "message": f"runtime {SHOWN} not found", "reason": "Forbidden"},
        "warnings": [f"label {SHOWN}"],
    }
