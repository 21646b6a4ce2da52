"""Every benchmark script imports: `make test` runs only the cluster benchmark's smoke run, so a module moved or a
name removed in `src/` (resource_of, controller.keys) would otherwise break `make bench` unseen until someone runs
it. Importing runs no benchmark: each script's work is behind `if __name__ == "__main__"`."""

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "bench"
SCRIPTS = sorted(path.stem for path in BENCH.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_benchmark_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "hack"))
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop(script, None)
    importlib.import_module(script)


def test_there_are_benchmark_scripts() -> None:
    assert {"cluster_bench", "render", "cli_bench", "loadgen"} <= set(SCRIPTS)
