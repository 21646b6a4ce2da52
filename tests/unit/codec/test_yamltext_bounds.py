"""The cheap bound check never lets through a text that the event walk would refuse (small bounds, many shapes)."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trainjob_operator.codec import yamltext

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab -:?[{,\n", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="ab", max_size=3), inner, max_size=3),
    max_leaves=40,
)


@given(st.lists(values, min_size=1, max_size=3), st.sampled_from([None, True, False]), st.integers(0, 4))
@settings(max_examples=500, deadline=None)
def test_a_text_judged_bounded_passes_the_event_walk(docs: list[object], flow: bool | None, indent: int) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, indent=indent + 2 if indent else None)
    for max_depth, max_nodes in ((4, 30), (8, 80), (12, 200)):
        if yamltext.plainly_bounded(text, max_depth, max_nodes):
            yamltext.check_events(text, max_depth, max_nodes)  # raises YamlError if the judgement was wrong


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: &x [1, 2]\nb: *x\n", id="an anchor"),
        pytest.param("[" * 120 + "]" * 120, id="deep flow nesting"),
        pytest.param("- " * 60 + "x\n", id="compact block sequences"),
        pytest.param("a:\n" + "".join(" " * (i + 1) + "b:\n" for i in range(60)), id="deep block mappings"),
        pytest.param("- [a, b]\n" * 50_000, id="too many values"),
    ],
)
def test_texts_near_the_bounds_are_left_to_the_event_walk(text: str) -> None:
    assert not yamltext.plainly_bounded(text)


plain_docs = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | st.integers(0, 3), inner, max_size=3)
    ),
    max_leaves=30,
)


@given(st.lists(plain_docs, min_size=1, max_size=3), st.sampled_from([None, True, False]))
@settings(max_examples=300, deadline=None)
def test_direct_construction_gives_what_pyyamls_constructor_gives(docs: list[object], flow: bool | None) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow)
    assert yamltext._load_direct(text) == [yamltext._plain(d) for d in yaml.load_all(text, Loader=yamltext._Loader)]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "a: 2024-01-02T03:04:05Z\nb: !!binary aGk=\nc: 0x1f\nd: 1_000\ne: yes\nf: .inf\n", id="typed scalars"
        ),
        pytest.param("base: {x: 1}\nm:\n  <<: {x: 2, y: 3}\n  z: 4\n", id="a merge key"),
        pytest.param("? [a, b]\n: c\n", id="a sequence as key"),
        pytest.param("1: a\n'1': b\ntrue: c\n~: d\n", id="keys that are not strings"),
        pytest.param("- !!set {a, b}\n- !!omap [a: 1]\n", id="sets and ordered maps"),
        pytest.param("--- a\n---\n--- [1, 2]\n", id="several documents, one empty"),
    ],
)
def test_direct_construction_matches_on_unusual_input(text: str) -> None:
    try:
        expected: object = [yamltext._plain(d) for d in yaml.load_all(text, Loader=yamltext._Loader)]
    except Exception as err:
        expected = type(err)
    try:
        got: object = yamltext._load_direct(text)
    except Exception as err:
        got = type(err)
    assert got == expected
