"""Hostile YAML (`codec/yamltext.py`) is refused clearly, the same whichever parser reads, in the project's words,
and values are made JSON-like (crash signatures of the fault run)."""

from __future__ import annotations

import pytest
import yaml

from builders import billion_laughs
from trainjob_operator.codec import yamltext


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[" * 200_000 + "]" * 200_000, "nested deeper than 100 levels", id="very deep flow nesting"),
        pytest.param(
            "".join(f"{'  ' * i}a:\n" for i in range(150)),
            "nested deeper than 100 levels",
            id="very deep block nesting",
        ),
        pytest.param(billion_laughs(), "values once aliases are expanded", id="billion laughs"),
        pytest.param("a: " + "9" * 5000, "integer string conversion", id="an integer of 5,000 digits"),
        pytest.param("a: " + "9" * 30, "does not fit in 64 bits", id="an integer beyond int64"),
        pytest.param("a: 1.0e+400", "is not finite", id="an infinite number"),
        pytest.param("a: [1\n", "invalid YAML at line 2", id="broken YAML"),
    ],
)
def test_hostile_yaml_is_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(yamltext.YamlError, match=message):
        yamltext.load_all(text)


# PyYAML's own scanner and parser: no libyaml, so no nesting limit but the project's. Built as `yamltext._Loader` is
# (the memo mixed into a loader); made with type() because mypy cannot see that the mix-in's builtin-valued
# descend/ascend_resolver attributes fit PyYAML's methods (`yamltext._Loader` carries that note for the class form).
PurePythonLoader = type("PurePythonLoader", (yamltext.MemoResolver, yaml.SafeLoader), {})


@pytest.mark.parametrize("loader", ["installed", "pure Python"])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("[" * 200_000 + "]" * 200_000, "invalid YAML at line 1", id="2e5 flow levels on one line"),
        pytest.param(
            "a:\n  b:\n    c: " + "{k: " * 1500 + "}" * 1500, "invalid YAML at line 3", id="1,500 flow maps on line 3"
        ),
        pytest.param("".join(f"{'  ' * i}a:\n" for i in range(150)), "invalid YAML at line 101", id="150 block levels"),
        pytest.param(
            "".join(f"{'  ' * i}a:\n" for i in range(60)) + "  " * 60 + "[" * 1200 + "]" * 1200,
            "invalid YAML at line 61",
            id="block, then flow past libyaml's limit",
        ),
    ],
)
def test_the_depth_bound_says_the_same_whichever_yaml_parser_reads(
    monkeypatch: pytest.MonkeyPatch, loader: str, text: str, expected: str
) -> None:
    """PyYAML 6.0.4's libyaml stops at its own limit (1000 levels) while its scanner reads ahead of the events;
    older libyaml and PyYAML's pure-Python parser have none. The message is the project's either way."""
    if loader == "pure Python":
        monkeypatch.setattr(yamltext, "_Loader", PurePythonLoader)
    with pytest.raises(yamltext.YamlError) as refused:
        yamltext.load_all(text)
    assert str(refused.value) == f"{expected}: nested deeper than 100 levels"


@pytest.mark.parametrize(
    ("sentence", "problem", "expected"),
    [
        (
            "libyaml's own nesting limit is said as the project's bound, on its line",
            yamltext.LIBYAML_NESTING_LIMIT,
            "invalid YAML at line 4: nested deeper than 100 levels",
        ),
        (
            "any other problem keeps libyaml's words and its column",
            "found unexpected end",
            "invalid YAML at line 4, column 1001: found unexpected end",
        ),
    ],
)
def test_libyamls_errors_in_the_projects_words(sentence: str, problem: str, expected: str) -> None:
    """Whatever libyaml the machine has: its error is built here, as PyYAML 6.0.4's libyaml raises it."""
    mark = yaml.Mark("<unicode string>", 4000, 3, 1000, None, 0)  # libyaml gives no buffer (the pointer is unused)
    error = yaml.scanner.ScannerError("while increasing flow level", mark, problem, mark)
    assert yamltext._where(error) == expected, sentence


def test_yaml_values_are_made_json_like() -> None:
    text = "t: 2026-01-01T00:00:00Z\nd: 2026-01-02\nb: !!binary aGk=\n1: one\nn: null\nf: 1.5\n"
    assert yamltext.load_all(text) == [
        {"t": "2026-01-01T00:00:00Z", "d": "2026-01-02", "b": "aGk=", "1": "one", "n": None, "f": 1.5}
    ]
