"""The lock files (`make lock`, docs/development.md "Python dependencies") agree with pyproject.toml and with each
other: every dependency is pinned exactly with hashes, pyproject still allows every pin (an edit of pyproject without
`make lock` fails here), and the image's, the build's and uv's files hold the very pins of the full lock."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[3]
LOCKS = REPO / "requirements"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def pins(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, hashes) of a `uv pip compile --generate-hashes` file."""
    entries: dict[str, tuple[str, frozenset[str]]] = {}
    for entry in re.sub(r"\\\n", " ", text).splitlines():
        entry = entry.split("#", 1)[0].strip()
        if not entry:
            continue
        name, _, version = entry.split(" --")[0].partition(";")[0].strip().partition("==")
        assert version, f"not pinned exactly: {entry[:80]}"
        hashes = frozenset(re.findall(r"--hash=(sha256:[0-9a-f]+)", entry))
        entries[canonicalize_name(name)] = (version.strip(), hashes)
    return entries


def read(name: str) -> dict[str, tuple[str, frozenset[str]]]:
    return pins((LOCKS / name).read_text())


FULL = read("lock.txt")


def declared(*groups: str) -> list[Requirement]:
    requirements = []
    for group in groups:
        if group == "runtime":
            requirements += PYPROJECT["project"]["dependencies"]
        elif group == "build":
            requirements += PYPROJECT["build-system"]["requires"]
        else:
            requirements += PYPROJECT["project"]["optional-dependencies"][group]
    return [Requirement(r) for r in requirements]


@pytest.mark.parametrize(
    ("sentence", "text", "expected"),
    [
        (
            "a pin with its hashes over continuation lines",
            "# header\nsix==1.17.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via x\n",
            {"six": ("1.17.0", frozenset({"sha256:aa", "sha256:bb"}))},
        ),
        (
            "a marker does not end up in the version, names are canonical",
            "Colorama==0.4.6 ; sys_platform == 'win32' \\\n    --hash=sha256:cc\n",
            {"colorama": ("0.4.6", frozenset({"sha256:cc"}))},
        ),
    ],
)
def test_the_parser_itself(sentence: str, text: str, expected: dict[str, tuple[str, frozenset[str]]]) -> None:
    assert pins(text) == expected, sentence


def test_every_pin_is_exact_and_hashed() -> None:
    for name in ("lock.txt", "runtime.txt", "build.txt", "uv.txt"):
        unhashed = sorted(package for package, (_, hashes) in read(name).items() if not hashes)
        assert unhashed == [], name


@pytest.mark.parametrize("group", ["runtime", "dev", "build"])
def test_pyproject_allows_every_pin_of_the_lock(group: str) -> None:
    """A requirement pyproject declares is in the lock at a version pyproject allows (else: run `make lock`)."""
    stale = [
        f"{r}: lock has {FULL.get(canonicalize_name(r.name), ('nothing',))[0]}"
        for r in declared(group)
        if canonicalize_name(r.name) not in FULL
        or not r.specifier.contains(FULL[canonicalize_name(r.name)][0], prereleases=True)
    ]
    assert stale == [], "pyproject.toml and requirements/lock.txt disagree; run `make lock`"


def test_kopf_is_pinned_exactly_in_pyproject() -> None:
    """The controller reaches into kopf's private modules: a kopf upgrade is a decision, never a fresh machine's."""
    (kopf,) = [r for r in declared("runtime") if r.name == "kopf"]
    assert str(kopf.specifier).startswith("==") and FULL["kopf"][0] == str(kopf.specifier)[2:]


@pytest.mark.parametrize(
    ("sentence", "name", "must_have", "must_not_have"),
    [
        (
            "the image's file holds the runtime dependencies and none of the dev tools",
            "runtime.txt",
            {"kopf", "pydantic", "pyyaml", "aiohttp", "kubernetes"},
            {"pytest", "hypothesis", "ruff", "mypy", "uv", "kubeflow", "setuptools"},
        ),
        ("the build's file is the wheel's build backend alone", "build.txt", {"setuptools"}, {"kopf", "pytest"}),
        ("uv's file is uv alone", "uv.txt", {"uv"}, {"kopf", "setuptools"}),
        (
            "the full lock has everything but the optional tensorflow extra (docs/development.md says why)",
            "lock.txt",
            {"kopf", "pytest", "uv", "setuptools", "hypothesis"},
            {"tensorflow-cpu", "tensorflow"},
        ),
    ],
)
def test_each_file_holds_the_full_locks_pins(
    sentence: str, name: str, must_have: set[str], must_not_have: set[str]
) -> None:
    part = read(name)
    assert {p: v for p, v in part.items() if FULL.get(p) != v} == {}, f"{sentence}: differs from lock.txt"
    assert must_have <= part.keys(), sentence
    assert must_not_have & part.keys() == set(), sentence


def test_the_venv_is_made_from_the_lock() -> None:
    """`.venv` is recreated when the lock changes, and installed from it with uv, itself pinned with hashes."""
    makefile = (REPO / "Makefile").read_text()
    stamp_rule = re.search(r"^\$\(STAMP\):(.*)$", makefile, re.M)
    assert stamp_rule and "$(LOCK)" in stamp_rule.group(1).split()
    assert re.search(r"pip install .*--require-hashes .*-r \$\(UV_PIN\)", makefile)
    assert re.search(r"\$\(UV\) pip sync .*--require-hashes \$\(LOCK\)", makefile)
    # uv compiles no bytecode unless asked, and under PYTHONDONTWRITEBYTECODE no import writes it: every process
    # would compile its dependencies from source again (issue 37: the CLI's start-up x1.6)
    assert re.search(r"\$\(UV\) pip sync .*--compile-bytecode", makefile)


@pytest.mark.parametrize(
    ("sentence", "locked", "latest", "expected"),
    [
        ("nothing moved", {"six": "1.17.0"}, {"six": "1.17.0"}, []),
        (
            "a newer version, a new dependency and one no longer needed, each named",
            {"kopf": "1.45.2", "six": "1.17.0"},
            {"kopf": "1.46.0", "typing-extensions": "4.16.0"},
            [
                "  kopf: 1.45.2 -> 1.46.0",
                "  typing-extensions: new, 4.16.0",
                "  six: no longer needed (lock has 1.17.0)",
            ],
        ),
    ],
)
def test_deps_latest_reports_what_moved(
    sentence: str, locked: dict[str, str], latest: dict[str, str], expected: list[str]
) -> None:
    from deps_latest import changes

    assert changes(locked, latest) == expected, sentence


def test_deps_latest_reads_the_lock_as_the_parser_here_does() -> None:
    from deps_latest import pins as versions

    assert versions(LOCKS / "lock.txt") == {name: version for name, (version, _) in FULL.items()}
