"""The fast JSON path (orjson) writes exactly what the standard library writes; the CLI's output does not change."""

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trainjob_operator.codec import jsontext, yamldump
from trainjob_operator.offline.check import check
from trainjob_operator.offline.inputs import read_inputs
from trainjob_operator.offline.outcome import dump, render
from trainjob_operator.runtime.pipeline import Framework

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text()
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@pytest.mark.skipif(not jsontext.FAST, reason="orjson is not installed: only the standard library's path exists")
@given(json_values)
@settings(max_examples=400, deadline=None)
def test_indented_is_byte_for_byte_the_standard_librarys(value: Any) -> None:
    assert jsontext.indented(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"a": [1, 2.5, {"b": None}], "c": {}, "d": []}, id="nested containers, empty ones too"),
        pytest.param({"é": "ü", "emoji": "🚀"}, id="non-ASCII text is escaped as json escapes it"),
        pytest.param({"big": 1e16, "small": 1e-7}, id="floats in exponent form keep Python's spelling"),
        pytest.param({"n": 2**64}, id="an integer beyond 64 bits"),
        pytest.param({"nan": float("nan"), "inf": float("inf")}, id="NaN and infinities"),
        pytest.param({"ctl": 'a\x00b\x1f\x7f"\\/\n\t'}, id="control characters and escapes"),
        pytest.param({1: "x"}, id="a key that is not a string"),
    ],
)
def test_indented_matches_for_every_kind_of_value(value: Any) -> None:
    assert jsontext.indented(value) == json.dumps(value, indent=2)
    assert jsontext.indented(value, fast=False) == json.dumps(value, indent=2)


@pytest.mark.parametrize("value", [{"a": [1, "é", None, True, 2.5]}, [], {"k": {"n": -3}}])
def test_compact_round_trips(value: Any) -> None:
    assert jsontext.loads(jsontext.compact(value)) == value


def rendered(output: str, fast: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The torch example TrainJob (the MPI one gets a new SSH key each time) under several names and namespaces."""
    if not fast:
        monkeypatch.setattr(jsontext, "_orjson", None)
    text = (EXAMPLES / "trainjobs.yaml").read_text().split("\n---\n")[0]
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "\n---\n".join(
            text.replace("name: multi-node-example", f"name: job-{i}\n  namespace: ns-{i % 3}") for i in range(6)
        )
    )
    framework = Framework.from_registry()
    checked = check(read_inputs([str(jobs)], [str(EXAMPLES / "runtimes.yaml")]), framework)
    objects = render(checked, framework, io.StringIO())
    out = io.StringIO()
    dump(objects, output, out)
    return out.getvalue()


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_render_output_is_the_same_on_the_fast_and_the_pure_path(
    output: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fast = rendered(output, True, monkeypatch, tmp_path)
    pure = rendered(output, False, monkeypatch, tmp_path)
    assert fast == pure
    assert fast.count("kind: JobSet" if output == "yaml" else '"kind": "JobSet"') == 6


yaml_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text()
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@given(st.lists(yaml_values, max_size=4))
@settings(max_examples=300, deadline=None)
def test_yaml_fast_dump_is_byte_for_byte_pyyamls(objects: list[Any]) -> None:
    assert yamldump.dump_all(objects) == yamldump.dump_all(objects, fast=False)


def test_yaml_fast_dump_keeps_anchors_and_aliases_of_shared_objects() -> None:
    shared = {"name": "node", "multi": "line one\nline two\n"}
    objects = [{"a": shared, "b": shared, "c": [shared, (1, 2)]}, {"d": [shared], "e": 1.5}]
    text = yamldump.dump_all(objects)
    assert text == yamldump.dump_all(objects, fast=False)
    assert "&id001" in text and "*id001" in text and "|" in text


def test_compact_keeps_no_more_memory_than_its_text() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [jsontext.compact({"metadata": {"name": f"job-{i}"}}) for i in range(2000)]
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert used < 2000 * 200, f"{used / 2000:.0f} bytes per ~35-byte text"
    assert jsontext.loads(kept[0]) == {"metadata": {"name": "job-0"}}


def _floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_floats(v) for v in value.values())
    if isinstance(value, list):
        return any(_floats(v) for v in value)
    return False


@pytest.mark.skipif(not jsontext.FAST, reason="orjson is not installed")
@given(json_values.filter(lambda v: not isinstance(v, int) or -(2**63) <= v < 2**64))
@settings(max_examples=400, deadline=None)
def test_every_float_token_is_found_in_orjsons_text(value: Any) -> None:
    """The shortcut that skips the exact check must never miss a float (their spellings may differ)."""
    try:
        data = jsontext._orjson.dumps(value, option=jsontext._orjson.OPT_INDENT_2)
    except TypeError:  # an integer beyond 64 bits somewhere inside: the exact path, whatever the scan says
        return
    if _floats(value):
        assert jsontext._has_float(data) or b"null" in data


@pytest.mark.skipif(not jsontext.FAST, reason="orjson is not installed")
@pytest.mark.parametrize(
    "value, has_float",
    [
        pytest.param({"image": "pytorch:2.13.0-cuda13.0", "n": 3}, False, id="versions inside strings are no floats"),
        pytest.param({"a": [1, 2, 3]}, False, id="integers are no floats"),
        pytest.param({"a": [1, [2.5]]}, True, id="a float as a nested array element"),
        pytest.param({"a": -1e-7}, True, id="a negative float in exponent form"),
        pytest.param(1.5, True, id="a float alone"),
        pytest.param([1e16, 2], True, id="an exponent without a fraction, then a comma"),
        pytest.param({"flag": True, "off": False, "n": 10}, False, id="true and false end in e after a letter"),
        pytest.param({"v": "1.5", "k1.": {"a": 1}}, False, id="digits and dots in values and keys that are strings"),
    ],
)
def test_float_tokens_are_told_from_digits_in_strings(value: Any, has_float: bool) -> None:
    assert jsontext._has_float(jsontext._orjson.dumps(value, option=jsontext._orjson.OPT_INDENT_2)) is has_float


# Strings that exercise libyaml's choices: indicators, `: ` and ` #`, quotes, leading and trailing spaces, words that
# resolve to other types (3, true, null, 1.5, 2001-12-14), line breaks (literal blocks, chomping), non-ASCII, and
# lengths past the 80-column width (folding at spaces).
tricky_text = st.one_of(
    st.text(alphabet=st.sampled_from(list("ab -:#'\"\n?,[]{}&*!|>%@`.0123 \tyé")), max_size=12),
    st.sampled_from(["3", "true", "null", "~", "1.5", "2001-12-14", "0x1F", "---", "...", "-", "? x", "", " a", "a "]),
    st.builds(
        lambda word, n: " ".join([word] * n), st.sampled_from(["lorem", "x", "it's", "a: b"]), st.integers(1, 40)
    ),
    st.text(alphabet="xy", min_size=70, max_size=140),
)
# Keys with a line break or over 128 characters are complex keys (`? `), which the direct writer leaves to PyYAML:
# most keys here are neither.
_simple_keys = tricky_text.map(lambda s: s.replace("\n", "n")[:100])
tricky_keys = st.one_of(_simple_keys, _simple_keys, _simple_keys, _simple_keys, _simple_keys, tricky_text)
json_like_docs = st.dictionaries(
    tricky_keys,
    st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | tricky_text,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_keys, inner, max_size=4),
        max_leaves=25,
    ),
    min_size=1,
    max_size=5,
)


@given(st.lists(json_like_docs, min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_yaml_direct_writer_is_byte_for_byte_pyyamls(objects: list[Any]) -> None:
    """The direct writer (no PyYAML representer, serializer or resolver on the way) writes what PyYAML writes."""
    reference = yamldump.dump_all(objects, fast=False)
    out: list[str] = []
    writer = yamldump._Writer()
    try:
        for obj in objects:
            writer.document(obj, out)
    except yamldump._Unsupported:
        pass
    else:
        assert "".join(out) == reference
    assert yamldump.dump_all(objects) == reference


def test_yaml_direct_writer_writes_the_rendered_objects_itself() -> None:
    """The CLI's objects (literal blocks, quoted numbers, nested sequences) need no fallback to PyYAML."""
    objects = [
        {"data": {"runtime": "a: 1\nb:\n- x\n"}, "env": [{"name": "EPOCHS", "value": "3"}], "empty": {}, "l": []},
        {"spec": {"command": ["/bin/bash", "-c", "echo 'torchrun would start here'"], "n": [[1, 2], {"k": None}]}},
    ]
    out: list[str] = []
    writer = yamldump._Writer()
    for obj in objects:
        writer.document(obj, out)
    assert "".join(out) == yamldump.dump_all(objects, fast=False)


RUNTIMES = Path(__file__).resolve().parents[3] / "runtimes"


@pytest.mark.parametrize("runtime", sorted(p.name for p in RUNTIMES.glob("*.yaml")))
def test_render_from_the_admission_runtime_info_is_render_from_a_fresh_one(runtime: str, tmp_path: Path) -> None:
    """The CLI builds each TrainJob from the runtime info its admission checks read (made once): the objects are
    exactly those built from a runtime info made anew, for every shipped runtime."""
    name = yaml.safe_load((RUNTIMES / runtime).read_text())["metadata"]["name"]
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "".join(
            f"---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: job-{i}\n"
            f"  namespace: ns\nspec:\n  runtimeRef:\n    name: {name}\n  trainer:\n    numNodes: 1\n"
            f"    resourcesPerNode:\n      limits:\n        nvidia.com/gpu: {i + 1}\n"
            for i in range(2)
        )
    )
    framework = Framework.from_registry()
    inputs = read_inputs([str(jobs)], [str(RUNTIMES / runtime)])
    once = check(inputs, framework)
    assert once.jobs and len(once.infos) == len(once.jobs) and all(info is not None for info in once.infos)
    fresh = check(inputs, framework)
    fresh.infos = []
    reused, anew = render(once, framework, io.StringIO()), render(fresh, framework, io.StringIO())
    secrets = [i for i, obj in enumerate(anew) if obj.get("kind") == "Secret"]  # SSH keys are new on every build
    for i in secrets:
        reused[i]["data"] = anew[i]["data"] = None
    assert reused == anew


@pytest.mark.skipif(not jsontext.FAST, reason="orjson is not installed")
@pytest.mark.parametrize("code", range(0x80))
def test_orjson_escapes_every_ascii_character_but_del_as_the_standard_library_does(code: int) -> None:
    """What lets `_spelled_alike` skip the exact check for ASCII text without DEL: a new orjson that escaped a
    character otherwise would fail here."""
    value = [chr(code), {f"k{chr(code)}": 1}]
    same = jsontext._orjson.dumps(value, option=jsontext._orjson.OPT_INDENT_2) == json.dumps(value, indent=2).encode()
    assert same is (code != 0x7F)
