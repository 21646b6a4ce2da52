"""Sum the JUnit XML reports of `make test`'s pytest sessions into one closing line: `N passed, N failed`.

Before it, where the time went: one row per session (its report's name), when it started after the first session
started, how long it took and its slowest tests, so every run's log says which lane was the critical path."""

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

SLOWEST = 3
NAME_CHARS = 48


@dataclass(frozen=True)
class Session:
    name: str
    started: datetime | None
    seconds: float
    passed: int
    failed: int
    skipped: int
    slowest: tuple[tuple[str, float], ...]


def session(name: str, root: ET.Element) -> Session:
    """One report: its suites' counts and times summed, the earliest start, the slowest test cases."""
    passed = failed = skipped = 0
    seconds = 0.0
    starts: list[datetime] = []
    cases: list[tuple[str, float]] = []
    for suite in root.iter("testsuite"):
        tests, errors = int(suite.get("tests", 0)), int(suite.get("errors", 0))
        fails, skips = int(suite.get("failures", 0)), int(suite.get("skipped", 0))
        passed += tests - errors - fails - skips
        failed += errors + fails
        skipped += skips
        seconds += float(suite.get("time", 0))
        if stamp := suite.get("timestamp"):
            starts.append(datetime.fromisoformat(stamp))
        for case in suite.iter("testcase"):
            cases.append((case.get("name", "")[:NAME_CHARS], float(case.get("time", 0))))
    slowest = tuple(sorted(cases, key=lambda c: -c[1])[:SLOWEST])
    return Session(name, min(starts) if starts else None, seconds, passed, failed, skipped, slowest)


def table(sessions: list[Session]) -> list[str]:
    """Where the time went, in the order the sessions started: `+start +end seconds name counts slowest tests`."""
    stamps = [s.started for s in sessions if s.started is not None]
    first = min(stamps) if stamps else None
    lines = []
    for s in sorted(sessions, key=lambda s: (s.started is None, s.started or datetime.min, s.name)):
        offset = (s.started - first).total_seconds() if s.started and first else None
        at = (
            f"{f'+{offset:.0f}s':>7s} {f'+{offset + s.seconds:.0f}s':>7s}"
            if offset is not None
            else f"{'?':>7s} {'?':>7s}"
        )
        slow = ", ".join(f"{name} {secs:.0f}s" for name, secs in s.slowest)
        counts = f"{s.passed} passed" + (f", {s.failed} failed" if s.failed else "")
        lines.append(f"  {at} {f'{s.seconds:.0f}s':>6s}  {s.name:22s} {counts:20s} slowest: {slow}")
    return lines


def main() -> int:
    sessions = [session(path.stem, ET.parse(path).getroot()) for path in sorted(Path(sys.argv[1]).glob("*.xml"))]
    print(
        ">> where the time went (each session's start and end after the first start, its seconds, its slowest tests):"
    )
    print("\n".join(table(sessions)))
    passed, failed = sum(s.passed for s in sessions), sum(s.failed for s in sessions)
    print(f"all sessions: {passed} passed, {failed} failed, {sum(s.skipped for s in sessions)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
