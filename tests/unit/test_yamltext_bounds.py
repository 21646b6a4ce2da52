"""The cheap bound check never lets through a text that the event walk would refuse (small bounds, many shapes)."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trainjob_operator.runtime import yamltext

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab -:?[{,\n", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="ab", max_size=3), inner, max_size=3),
    max_leaves=40)


@given(st.lists(values, min_size=1, max_size=3), st.sampled_from([None, True, False]), st.integers(0, 4))
@settings(max_examples=500, deadline=None)
def test_a_text_judged_bounded_passes_the_event_walk(docs: list[object], flow: bool | None, indent: int) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, indent=indent + 2 if indent else None)
    for max_depth, max_nodes in ((4, 30), (8, 80), (12, 200)):
        if yamltext.plainly_bounded(text, max_depth, max_nodes):
            yamltext.check_events(text, max_depth, max_nodes)  # raises YamlError if the judgement was wrong


@pytest.mark.parametrize("text", [
    pytest.param("a: &x [1, 2]\nb: *x\n", id="an anchor"),
    pytest.param("[" * 120 + "]" * 120, id="deep flow nesting"),
    pytest.param("- " * 60 + "x\n", id="compact block sequences"),
    pytest.param("a:\n" + "".join(" " * (i + 1) + "b:\n" for i in range(60)), id="deep block mappings"),
    pytest.param("- [a, b]\n" * 50_000, id="too many values"),
])
def test_texts_near_the_bounds_are_left_to_the_event_walk(text: str) -> None:
    assert not yamltext.plainly_bounded(text)
