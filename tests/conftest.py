"""Hypothesis for every session: `make test` is deterministic, `make fuzz` is the wide random campaign.

- `ci` (the default): derandomized (each property's examples follow from the test itself, the same on every machine
  and run) and no example database, so a fresh machine runs exactly what CI ran.
- `fuzz` (`make fuzz`: `--hypothesis-profile=fuzz --hypothesis-seed=N`): random from the printed seed, with the
  database in `.hypothesis/fuzz` so a failure found is replayed first next time. A failure found there becomes an
  explicit `@example` of the property (tests/unit/tables/test_fuzz.py has them), never a database entry CI depends on.
"""

from pathlib import Path

from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile(
    "fuzz",
    derandomize=False,
    database=DirectoryBasedExampleDatabase(Path(__file__).resolve().parents[1] / ".hypothesis" / "fuzz"),
    print_blob=True,
)
settings.load_profile("ci")
