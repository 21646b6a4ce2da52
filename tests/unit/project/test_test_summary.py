"""hack/test_summary.py: `make test`'s closing lines, where the time went per session and the sum of the counts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from test_summary import Session, session, table

REPORT = """<testsuites><testsuite name="pytest" errors="{errors}" failures="{failures}" skipped="{skipped}"
 tests="{tests}" time="{time}" timestamp="{stamp}">{cases}</testsuite></testsuites>"""


def report(name: str, stamp: str, time: float, cases: dict[str, float], failures: int = 0, skipped: int = 0) -> Session:
    body = "".join(f'<testcase classname="tests.x.test_m" name="{n}" time="{t}"/>' for n, t in cases.items())
    xml = REPORT.format(
        errors=0, failures=failures, skipped=skipped, tests=len(cases), time=time, stamp=stamp, cases=body
    )
    return session(name, ET.fromstring(xml))


@pytest.mark.parametrize(
    ("sentence", "cases", "failures", "skipped", "counts", "slowest"),
    [
        ("the counts are passed = tests - failed - skipped", {"a": 1, "b": 2, "c": 3}, 1, 1, (1, 1, 1), None),
        ("the three slowest tests, slowest first", {"a": 1, "b": 9, "c": 3, "d": 5}, 0, 0, (4, 0, 0), ("b", "d", "c")),
        ("a session with one test names it", {"only": 7}, 0, 0, (1, 0, 0), ("only",)),
    ],
)
def test_a_session_sums_its_report(
    sentence: str,
    cases: dict[str, float],
    failures: int,
    skipped: int,
    counts: tuple[int, int, int],
    slowest: tuple[str, ...] | None,
) -> None:
    got = report("1b-unit", "2026-11-28T13:31:44+00:00", 10.0, cases, failures, skipped)
    assert (got.passed, got.failed, got.skipped) == counts, sentence
    if slowest is not None:
        assert tuple(n for n, _ in got.slowest) == slowest, sentence


def test_the_table_orders_sessions_by_start_and_shows_when_each_ended() -> None:
    later = report("4-realnode", "2026-11-28T13:36:00+00:00", 956.0, {"elastic": 203})
    first = report("1b-unit", "2026-11-28T13:31:44+00:00", 254.0, {"corpus": 88})
    lines = table([later, first])
    assert [line.split()[3] for line in lines] == ["1b-unit", "4-realnode"]
    assert lines[0].split()[:3] == ["+0s", "+254s", "254s"]
    assert lines[1].split()[:3] == ["+256s", "+1212s", "956s"]
    assert "slowest: elastic 203s" in lines[1]
