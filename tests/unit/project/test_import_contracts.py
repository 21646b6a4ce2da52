"""Every module of the package sits in a layer of the import contracts (pyproject.toml), so `make lint`'s
import-linter checks what it may import; a new top-level module must be given its layer."""

import tomllib
from pathlib import Path
from typing import Any

import trainjob_operator

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = Path(trainjob_operator.__file__).parent


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def layered() -> set[str]:
    """The modules the layers contract names (siblings in one layer are split on `|` and `:`)."""
    names: set[str] = set()
    for contract in contracts():
        if contract["type"] != "layers":
            continue
        for layer in contract["layers"]:
            names |= {part.strip() for part in str(layer).replace(":", "|").split("|")}
    return names


def modules() -> list[str]:
    """Every module and package of the source tree, dotted, the root package itself left out."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:
            found.append(".".join(parts))
    return found


def in_a_layer(module: str, layers: set[str]) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:end]) in layers for end in range(2, len(parts) + 1))


def test_every_module_of_the_package_is_in_a_layer() -> None:
    layers = layered()
    assert [module for module in modules() if not in_a_layer(module, layers)] == []


def test_a_module_outside_every_layer_is_found() -> None:
    """The check above can fail: a module that no layer names (nor any package above it) is reported."""
    assert not in_a_layer("trainjob_operator.newmodule", layered())
    assert in_a_layer("trainjob_operator.runtime.plugins.torch", layered())


def test_every_layer_names_a_module_that_exists() -> None:
    """A layer left behind by a move or a rename would guard nothing."""
    existing = set(modules())
    assert sorted(name for name in layered() if name not in existing) == []
