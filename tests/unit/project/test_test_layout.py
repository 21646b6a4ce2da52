"""The test tree itself: pytest imports test files by basename (no packages), so two files of one name in different
folders make a plain `pytest` stop at collection (found with tests/realnode/test_progress.py)."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_has_a_basename_of_its_own() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
