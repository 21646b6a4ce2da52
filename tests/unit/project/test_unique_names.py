"""Every class and every module of the package has a name of its own (issue 38): three classes were called
`StatusServer` (a config section, the endpoint the pods are told, the server) and five module names were used twice
(`config`, `startup`, `health`, `admission`, `jobset`), so a name in a log line, a traceback or a review said less
than it seemed. A package's `__init__.py` is not a module name of its own."""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "trainjob_operator"


def duplicates(package: Path) -> dict[str, dict[str, list[str]]]:
    """The module names (file stems) and class names (at any depth) defined more than once under `package`, each
    with the files (relative to `package`) that define it."""
    modules: dict[str, list[str]] = defaultdict(list)
    classes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if path.stem != "__init__":
            modules[path.stem].append(where)
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(where)
    return {
        kind: {name: places for name, places in names.items() if len(places) > 1}
        for kind, names in (("modules", modules), ("classes", classes))
    }


def test_no_two_modules_and_no_two_classes_of_the_package_share_a_name() -> None:
    assert duplicates(PACKAGE) == {"modules": {}, "classes": {}}


@pytest.mark.parametrize(
    ("files", "want"),
    [
        pytest.param({"a.py": "", "b/__init__.py": "", "b/c.py": ""}, {"modules": {}, "classes": {}}, id="all unique"),
        pytest.param(
            {"config.py": "", "k8s/__init__.py": "", "k8s/config.py": ""},
            {"modules": {"config": ["config.py", "k8s/config.py"]}, "classes": {}},
            id="one module name in two packages",
        ),
        pytest.param(
            {"a.py": "class StatusServer: ...", "b.py": "def f():\n    class StatusServer: ...\n"},
            {"modules": {}, "classes": {"StatusServer": ["a.py", "b.py"]}},
            id="one class name in two modules, one of them nested",
        ),
        pytest.param(
            {"a/__init__.py": "", "b/__init__.py": ""}, {"modules": {}, "classes": {}}, id="__init__ is no name"
        ),
    ],
)
def test_duplicates_finds_what_is_named_twice(
    tmp_path: Path, files: dict[str, str], want: dict[str, dict[str, list[str]]]
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert duplicates(tmp_path) == want
