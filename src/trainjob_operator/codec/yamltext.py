"""YAML (and JSON) text to plain JSON-like values, bounded: untrusted input is refused before it can hurt.

PyYAML's composer is recursive (in its C extension too: very deep nesting overflows the C stack and kills the
process) and aliases are shared, not copied, so a few lines of anchors ("billion laughs") become a value whose walk
never ends. So the event stream (libyaml's parser keeps its own stacks) is checked first: nesting depth and the
size the document has once every alias is expanded are bounded. The loaded values are then made JSON-like, as
Kubernetes sees YAML: timestamps and binary scalars become strings, keys become strings, integers that do not fit
an int64 are refused.
"""

import base64
import bisect
import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any, Final

import yaml

MAX_DEPTH: Final = 100
"""Deeper than any Kubernetes object needs (a TrainJob with a full pod template is ~25 deep)."""
MAX_NODES: Final = 500_000
"""Scalars, sequences and mappings of the whole stream with every alias expanded."""
MAX_BYTES: Final = 32 * 1024 * 1024

try:
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _Base = yaml.SafeLoader


class MemoResolver:
    """Mixed into a PyYAML loader or dumper: the implicit tag of each scalar remembered per (value, implicit).
    PyYAML's resolver runs Python regular expressions once per scalar, and a stream of similar objects repeats its
    scalars. Per loader or dumper, so a stream's memo goes with it; path resolvers (which depend on where a scalar
    stands, not only on its value) bypass the memo."""

    yaml_path_resolvers: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resolved: dict[tuple[str, Any], str] = {}
        if not self.yaml_path_resolvers:
            # libyaml's composer calls these two around every node; without path resolvers PyYAML's do nothing.
            # Builtins that take the same arguments and keep nothing (a slice object, the empty tuple) cost no
            # Python frame: 6% of loading a stream of TrainJobs.
            self.descend_resolver = slice
            self.ascend_resolver = tuple

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)  # type: ignore[misc,no-any-return]
        if kind is not yaml.ScalarNode:  # without path resolvers, the default tag of its kind (BaseResolver.resolve)
            return self.DEFAULT_SEQUENCE_TAG if kind is yaml.SequenceNode else self.DEFAULT_MAPPING_TAG  # type: ignore[attr-defined,no-any-return]
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = self._resolved[key] = super().resolve(kind, value, implicit)  # type: ignore[misc]
        return tag


class _Loader(MemoResolver, _Base):  # type: ignore[misc]
    """The safe loader (libyaml's when built) with the scalar tags remembered (`MemoResolver`)."""


class YamlError(ValueError):
    """The text is not YAML, or not YAML we accept; the message says where and why."""


LIBYAML_NESTING_LIMIT: Final = "exceeded maximum nesting depth"
"""The problem libyaml reports at its own nesting limit (1000 levels; the libyaml of the PyYAML 6.0.4 wheels)."""


def too_deep(line: int, max_depth: int = MAX_DEPTH) -> str:
    """The one message for a text nested deeper than `max_depth`, whichever found it (`check_events` or libyaml)."""
    return f"invalid YAML at line {line}: nested deeper than {max_depth} levels"


def _where(err: yaml.YAMLError, max_depth: int = MAX_DEPTH) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
    if problem == LIBYAML_NESTING_LIMIT and mark is not None:
        # libyaml's scanner reads up to 1,024 characters of one line ahead of the events (a flow collection may
        # turn out to be a key), so a line of 1,000 `[` reaches libyaml's limit before `check_events` counts level
        # `max_depth + 1`. That level stands between the last event and the character libyaml stopped at, on the
        # same line: said as the project's bound, the message is the one a libyaml without the limit gives.
        return too_deep(mark.line + 1, max_depth)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{at}: {problem}"


def check_events(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> int:
    """Raise YamlError when `text` nests deeper than `max_depth` or expands (aliases included) beyond `max_nodes`;
    the number of values otherwise."""
    depth, nodes = 0, 0
    sizes: dict[str, int] = {}
    open_anchors: list[tuple[str | None, int]] = []  # (anchor, node count when the collection started)
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                nodes += sizes.get(event.anchor or "", 1)
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
                if event.anchor:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                nodes += 1
                if depth > max_depth:
                    raise YamlError(too_deep(event.start_mark.line + 1 if event.start_mark else 0, max_depth))
                open_anchors.append((event.anchor, nodes))
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
                anchor, started = open_anchors.pop()
                if anchor:
                    sizes[anchor] = nodes - started + 1
            if nodes > max_nodes:
                raise YamlError(f"invalid YAML: more than {max_nodes} values once aliases are expanded")
    except yaml.YAMLError as err:
        raise YamlError(_where(err, max_depth)) from err
    return nodes


_DOCUMENT_START = re.compile(r"(?m)^---(?=\s|$)")
_LINE_PREFIX = re.compile(r"(?m)^[ ?-]+")


def plainly_bounded(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> bool:
    """True when `text` cannot exceed the bounds, judged from character counts alone (C speed): `plainly_few` and
    `plainly_shallow`. False says nothing: `check_events` decides then."""
    return plainly_few(text, max_nodes) and plainly_shallow(text, max_depth)


def plainly_few(text: str, max_nodes: int = MAX_NODES) -> bool:
    """No anchor (so no alias expands) and at most 3 nodes per structural character (`:` `,` `-` `?` `[` `{` and line
    breaks each start at most a collection, a key and a value): the whole stream holds at most `max_nodes` values."""
    if "&" in text:
        return False
    structural = sum(text.count(ch) for ch in ":,-?[{\n") + 1
    return 3 * structural <= max_nodes


def plainly_shallow(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """No document nests deeper than `max_depth`: a depth of at most twice the longest run of spaces, `-` and `?`
    that starts a line, plus 2 (a block collection nests in its parent one column further in, or at the same column
    once: an indentless sequence; `- - x` nests one level per indicator), plus the flow collections one document
    opens. The flow collections of the whole stream are tried first (a count; usually the answer), then those of
    each document."""
    every_flow = text.count("[") + text.count("{")
    if not _line_prefix_longer(text, (max_depth - 2 - every_flow) // 2):
        return True
    longest = max(map(len, _LINE_PREFIX.findall(text)), default=0)
    flow = max((part.count("[") + part.count("{") for part in _DOCUMENT_START.split(text)), default=0)
    return 2 * longest + 2 + flow <= max_depth


def _line_prefix_longer(text: str, limit: int) -> bool:
    """Whether a line starts with more than `limit` spaces, `-` and `?`."""
    if limit < 0:
        return True
    run = f"[ ?-]{{{limit + 1}}}"
    return re.match(run, text) is not None or re.search("\n" + run, text) is not None


_START_AFTER_BREAK = re.compile(r"\n---(?=\s|$)")
"""`_DOCUMENT_START` after the first line: a literal to look for, which the regular expression engine finds fast."""
_CONTENT_LINE = re.compile(r"(?m)^[ \t]*[^\s#]")


@dataclass(frozen=True)
class Chunk:
    """A run of whole documents of a stream (`document_chunks`)."""

    text: str
    first: int
    """How many documents of the stream come before it."""
    documents: int
    """The document starts (`---`) it holds: `load_chunk` finds exactly one document after each."""
    budget: int
    """Its share of the whole stream's bound on values (`MAX_NODES` in proportion to its length): every chunk within
    its share keeps the stream within the bound."""


def document_chunks(text: str, parts: int) -> list[Chunk] | None:
    """`text` cut into at most `parts` runs of whole documents of about equal size, each cut just before a line that
    starts a document: `---` at column 0, which libyaml reads as a document start wherever it stands (in a quoted
    scalar it is an error, in the whole text as in a chunk). `load_chunk` of each chunk, in order, gives what
    `load_all(text)` gives, or raises; a caller then loads the whole text, which says what is wrong and where.
    None when the text is not worth cutting (fewer than `parts` documents), holds something before its first `---`
    or a directive (such as `%YAML`, which belongs to the document after it), anchors (the whole text's way), or
    is longer than `MAX_BYTES`. The bounds, `load_chunk` checks per chunk."""
    if parts < 2 or len(text) > MAX_BYTES or text.startswith("%") or "\n%" in text or "&" in text:
        return None
    starts = [0] if _DOCUMENT_START.match(text) else []
    starts += [m.start() + 1 for m in _START_AFTER_BREAK.finditer(text)]
    if len(starts) < parts or _CONTENT_LINE.search(text, 0, starts[0]):
        return None
    cuts = [0]  # indexes into starts
    for part in range(1, parts):
        at = bisect.bisect_left(starts, len(text) * part // parts)  # the first document start past the share
        if cuts[-1] < at < len(starts):
            cuts.append(at)
    cuts.append(len(starts))
    bounds = [0, *(starts[at] for at in cuts[1:-1]), len(text)]
    return [
        Chunk(
            text[bounds[i] : bounds[i + 1]],
            cuts[i],
            cuts[i + 1] - cuts[i],
            MAX_NODES * (bounds[i + 1] - bounds[i]) // len(text),
        )
        for i in range(len(cuts) - 1)
    ]


def load_chunk(chunk: Chunk) -> list[Any]:
    """The documents of a chunk (`document_chunks`). Raises YamlError when the chunk nests too deeply, holds more
    than its `budget` of values (judged as `load_all` judges a whole text: from character counts, else from the
    events) or has a document start that does not hold exactly one document (an empty one, or `...` and another
    after it: the whole text's document numbers would then differ)."""
    plain = plainly_few(chunk.text, chunk.budget) and plainly_shallow(chunk.text)
    if not plain and check_events(chunk.text) > chunk.budget:  # it raises past the depth or the whole stream's bound
        raise YamlError("the chunk holds more than its share of values: the whole text's events decide")
    docs = _load(chunk.text)
    if len(docs) != chunk.documents or any(doc is None for doc in docs):
        raise YamlError(f"the chunk holds {len(docs)} documents for its {chunk.documents} document starts")
    return docs


def _plain(value: Any, depth: int = 0) -> Any:
    """JSON-like: what `kubectl` would send for this YAML value."""
    if isinstance(value, dict):
        return {_key(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            raise YamlError(f"the number {value} is not finite")
        return value
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise YamlError(f"the integer {str(value)[:20]}... does not fit in 64 bits")
        return value
    if isinstance(value, dt.datetime):
        return (
            value.strftime("%Y-%m-%dT%H:%M:%SZ") if value.utcoffset() in (None, dt.timedelta(0)) else value.isoformat()
        )
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    plain = _plain(key)
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if plain is None:
        return "null"
    return str(plain)


def load_all(text: str) -> list[Any]:
    """Every document of a YAML stream as JSON-like values. Raises YamlError (a ValueError) and nothing else."""
    if len(text) > MAX_BYTES:
        raise YamlError(f"the text is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    if not plainly_bounded(text):
        check_events(text)
    return _load(text)


def _load(text: str) -> list[Any]:
    try:
        if "&" in text:  # anchors: PyYAML's constructor, which shares what aliases share
            return [_plain(doc) for doc in yaml.load_all(text, Loader=_Loader)]
        return _load_direct(text)
    except yaml.YAMLError as err:
        raise YamlError(_where(err)) from err
    except (ValueError, TypeError, RecursionError, OverflowError) as err:  # e.g. an integer of 5,000 digits
        raise YamlError(f"invalid YAML: {type(err).__name__}: {err}"[:300]) from err


_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ, _NULL, _INT, _BOOL = (_TAG + t for t in ("str", "map", "seq", "null", "int", "bool"))
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})")
"""Integers PyYAML reads as `int()` does (no `_`, no base prefix, no leading 0 (octal), no `:`), and within int64."""
_BOOLS: Final = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _load_direct(text: str) -> list[Any]:
    """What `[_plain(doc) for doc in yaml.load_all(text, Loader=_Loader)]` gives, several times faster: libyaml
    composes the nodes, the common tags (str, map, seq, null) are built here directly, every other node (numbers,
    booleans, timestamps, merge keys...) by PyYAML's own constructor and made plain as `_plain` makes it."""
    loader = _Loader(text)
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            docs.append(_construct(loader, node) if node is not None else None)
        return docs
    finally:
        loader.dispose()


def _construct(loader: Any, node: Any) -> Any:
    tag = node.tag
    if tag == _STR and type(node) is yaml.ScalarNode:
        return node.value
    if tag == _MAP and type(node) is yaml.MappingNode:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag != _STR or type(key_node) is not yaml.ScalarNode:
                # keys that are not strings (1 and true are one key to Python), merge keys, `=`: PyYAML's way
                return _plain(loader.construct_object(node, deep=True))
            out[key_node.value] = _construct(loader, value_node)
        return out
    if tag == _SEQ and type(node) is yaml.SequenceNode:
        return [_construct(loader, item) for item in node.value]
    if tag == _NULL and type(node) is yaml.ScalarNode:
        return None
    if tag == _INT and type(node) is yaml.ScalarNode and _DECIMAL.fullmatch(node.value):
        return int(node.value)
    if tag == _BOOL and type(node) is yaml.ScalarNode and node.value.lower() in _BOOLS:
        return _BOOLS[node.value.lower()]
    return _plain(loader.construct_object(node, deep=True))


def load_shipped(text: str) -> Any:
    """The one document of a YAML text this package ships (its generated CRDs), which is not untrusted input: no
    bounds to check, and no PyYAML constructor for a `&` that a CEL rule's `&&` holds (`load` takes that for an
    anchor). Half the time of `load`; a CRD's schema is read at each start of `validate` and `render`."""
    docs = _load_direct(text)
    if len(docs) > 1:
        raise YamlError("expected one YAML document, found several")
    return docs[0] if docs else None


def load(text: str) -> Any:
    """The one document of `text` (None when empty). Raises YamlError."""
    docs = load_all(text)
    if len(docs) > 1:
        raise YamlError("expected one YAML document, found several")
    return docs[0] if docs else None
