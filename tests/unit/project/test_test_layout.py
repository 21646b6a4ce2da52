"""The test tree itself (docs/development.md, "Where a test goes").

- A unit test is found from the module it tests: `tests/unit/<package path>/test_<module>[_<subject>].py` tests
  `src/trainjob_operator/<package path>/<module>.py` (or the package `<module>/`); the top-level modules' tests sit
  in `tests/unit/` itself. Three folders hold what tests no single module: `tables/` (the whole pipeline: acceptance
  and upstream-corpus tables, v2.4, properties, fuzz, bounds), `shipped/` (files we ship: runtimes, CRDs, dashboard,
  Dockerfile) and `project/` (developer tooling: hack/, the Makefile, the lock, this file).
- pytest imports test files by basename (no packages), so two files of one name anywhere under tests/ make a plain
  `pytest` stop at collection (found with tests/realnode/test_progress.py): every basename is unique.
"""

from collections import Counter
from pathlib import Path, PurePosixPath

import pytest

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
PACKAGE = REPO / "src" / "trainjob_operator"
UNIT = TESTS / "unit"

FREE_FOLDERS = {
    "tables": "the whole pipeline's tables (acceptance, upstream corpus, v2.4, properties, fuzz, bounds)",
    "shipped": "the files we ship (runtimes/, CRDs, the dashboard, the Dockerfile)",
    "project": "developer tooling (hack/, the Makefile, the lock, the test tree)",
}
RULE = (
    "a unit test is tests/unit/<package path>/test_<module>[_<subject>].py for "
    "src/trainjob_operator/<package path>/<module>.py, or sits in " + ", ".join(f"{f}/" for f in FREE_FOLDERS)
)


def modules_of(package: Path) -> list[str]:
    """The modules and subpackages of one package directory, longest first (so `test_cli_kubectl` finds `cli`)."""
    names = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(names, key=lambda name: (-len(name), name))


def layout_problem(relative: PurePosixPath, package_root: Path = PACKAGE) -> str | None:
    """Why a file under tests/unit (path relative to it) breaks the rule, in one line; None when it follows it."""
    *folders, filename = relative.parts
    if not filename.startswith("test_") or not filename.endswith(".py"):
        return None
    if folders and folders[0] in FREE_FOLDERS:
        return None
    where = f"tests/unit/{relative}"
    package = package_root.joinpath(*folders)
    if not (package / "__init__.py").is_file():
        return f"{where}: src/trainjob_operator/{'/'.join(folders)} is no package; {RULE}"
    subject = filename.removeprefix("test_").removesuffix(".py")
    modules = modules_of(package)
    if any(subject == module or subject.startswith(module + "_") for module in modules):
        return None
    inside = "/".join(["src/trainjob_operator", *folders])
    return f"{where}: `{subject}` names no module of {inside}/ (it has {', '.join(sorted(modules))}); {RULE}"


def test_every_test_file_has_a_basename_of_its_own() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_every_unit_test_file_is_found_from_the_module_it_tests() -> None:
    problems = [layout_problem(PurePosixPath(p.relative_to(UNIT).as_posix())) for p in sorted(UNIT.rglob("test_*.py"))]
    assert [problem for problem in problems if problem] == []


RUNTIME_MODULES = ", ".join(sorted(modules_of(PACKAGE / "runtime")))
LAYOUT_CASES = {
    "a module's test in its package's folder": ("runtime/test_plan.py", None),
    "a subject of a module after its name": ("runtime/test_plan_tables.py", None),
    "a top-level module's test in tests/unit itself": ("test_cli_kubectl.py", None),
    "a package's own test in its parent's folder": ("runtime/test_validation.py", None),
    "a plugin's test under runtime/plugins": ("runtime/plugins/test_flux.py", None),
    "a table of the whole pipeline": ("tables/test_anything.py", None),
    "a helper module that is no test": ("runtime/support.py", None),
    "a name that is no module of the folder's package": (
        "runtime/test_nothing.py",
        f"tests/unit/runtime/test_nothing.py: `nothing` names no module of src/trainjob_operator/runtime/ "
        f"(it has {RUNTIME_MODULES}); {RULE}",
    ),
    "a folder that is no package": (
        "plugins/test_flux.py",
        f"tests/unit/plugins/test_flux.py: src/trainjob_operator/plugins is no package; {RULE}",
    ),
    "a module's test left in tests/unit": (
        "test_plan.py",
        f"tests/unit/test_plan.py: `plan` names no module of src/trainjob_operator/ "
        f"(it has {', '.join(sorted(modules_of(PACKAGE)))}); {RULE}",
    ),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_layout_problem(case: str) -> None:
    relative, want = LAYOUT_CASES[case]
    assert layout_problem(PurePosixPath(relative)) == want
