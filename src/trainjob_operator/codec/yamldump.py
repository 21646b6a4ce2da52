"""The one YAML writer: text of JSON-like objects (`render`, `convert`: `dump_all`; the runtime snapshot:
`dump_document`), libyaml's emitter's text, mostly written directly.

`dump_all` writes what `yaml.dump_all(objects, Dumper=CSafeDumper, sort_keys=False, explicit_start=True)` writes
with multi-line strings as literal blocks, byte for byte (tests/unit/codec/test_jsontext.py compares both). `_Writer` writes
the usual case itself: block mappings and sequences, and the scalars libyaml would write plain; each other scalar
(quoted, folded at 80 columns, literal blocks) is written by libyaml once at the same column and indent and its text
remembered, so a stream of similar objects costs a few libyaml calls. What `_Writer` does not write (floats, shared
objects that become anchors and aliases, complex keys, other types) sends the whole stream through `FastDumper`:
PyYAML's dumper with the plain types represented without its type dispatch and the tag resolution remembered per
value.
"""

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .yamltext import MemoResolver

try:
    _Base: Any = yaml.CSafeDumper
    LIBYAML = True
except AttributeError:  # PyYAML built without libyaml
    _Base = yaml.SafeDumper
    LIBYAML = False

_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _represent_str(dumper: Any, value: str) -> Any:
    """Multi-line strings (hostfiles, snapshots) as readable literal blocks."""
    return dumper.represent_scalar(_STR, value, style="|" if "\n" in value else None)


class PlainDumper(_Base):  # type: ignore[misc]
    """PyYAML's safe dumper (libyaml's when built) with multi-line strings as literal blocks: the reference."""


PlainDumper.add_representer(str, _represent_str)


class FastDumper(MemoResolver, PlainDumper):
    """The same output as PlainDumper, with the plain JSON types represented directly and the scalar tags
    remembered (`MemoResolver`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The shortcut writes what PyYAML writes with dump_all's usual settings; others go PyYAML's way.
        self._direct = self.default_flow_style is False and not self.sort_keys and self.default_style is None

    def represent_data(self, data: Any) -> Node:
        kind = type(data)
        if not self._direct:
            return super().represent_data(data)  # type: ignore[no-any-return]
        if kind is str:
            return ScalarNode(_STR, data, style="|" if "\n" in data else None)
        if kind is dict or kind is list:
            key = id(data)
            node = self.represented_objects.get(key)
            if node is not None:  # the same object again: an alias, as PyYAML writes it
                return node  # type: ignore[no-any-return]
            self.object_keeper.append(data)
            if kind is dict:
                items: list[tuple[Node, Node]] = []
                node = self.represented_objects[key] = MappingNode(_MAP, items, flow_style=self.default_flow_style)
                for k, v in data.items():
                    items.append((self.represent_data(k), self.represent_data(v)))
                return node
            values: list[Node] = []
            node = self.represented_objects[key] = SequenceNode(_SEQ, values, flow_style=self.default_flow_style)
            for item in data:
                values.append(self.represent_data(item))
            return node
        if kind is bool:
            return ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return ScalarNode(_INT, str(data))
        if data is None:
            return ScalarNode(_NULL, "null")
        return super().represent_data(data)  # type: ignore[no-any-return]


class _Unsupported(Exception):
    """Something the direct writer does not write (floats, tuples, shared objects, complex keys...): PyYAML's way."""


_PLAIN_FIRST_NEVER = frozenset("#,[]{}&*!|>'\"%@` ")
_STR_TAG_RESOLVER: Any = yaml.resolver.Resolver()
_WIDTH = 80
"""libyaml's preferred line width: plain and quoted scalars are folded at a space past it."""


class _Writer:
    """YAML text of JSON-like documents as `FastDumper` (libyaml's emitter, block style, indent 2, width 80) writes
    it, written directly. A scalar that can be written as it is (a plain string that resolves to a string, short
    enough not to be folded; an integer, a boolean, null) is written here; any other (quoted, folded, literal
    blocks) is written by libyaml once, at the same column and indent, and its text remembered. Anything else raises
    _Unsupported."""

    def __init__(self) -> None:
        self._plain: dict[str, bool] = {}
        self._probed: dict[tuple[str, int, int], str] = {}
        self._keys: dict[str, str] = {}
        self._seen: set[int] = set()

    def document(self, obj: Any, out: list[str]) -> None:
        if type(obj) is not dict or not obj:
            raise _Unsupported
        self._seen = set()
        out.append("---\n")
        self._mapping(obj, 0, out, True)

    def _can_be_plain(self, value: str) -> bool:
        """Whether libyaml writes `value` plain (unquoted, unfolded up to the width): printable ASCII, no indicator
        where libyaml's analysis sees one, no leading or trailing space, and read back as a string."""
        found = self._plain.get(value)
        if found is None:
            found = bool(
                value
                and value.isascii()
                and value.isprintable()
                and value[0] not in _PLAIN_FIRST_NEVER
                and not (value[0] in "?:-" and (len(value) == 1 or value[1] == " "))
                and not value.startswith(("---", "..."))
                and ": " not in value
                and " #" not in value
                and not value.endswith((":", " "))
                and _STR_TAG_RESOLVER.resolve(ScalarNode, value, (True, False)) == _STR
            )
            self._plain[value] = found
        return found

    def _key(self, key: Any) -> str:
        """A mapping key's text: a simple key (libyaml writes a key of over 128 characters or with a line break as a
        complex `? ` key, which raises)."""
        text = self._keys.get(key) if type(key) is str else None
        if text is None:
            if type(key) is not str:
                raise _Unsupported
            if len(key) <= 128 and self._can_be_plain(key):
                text = key
            else:
                probe = yaml.dump({key: None}, Dumper=PlainDumper, sort_keys=False)
                if probe.startswith("?") or not probe.endswith(": null\n"):
                    raise _Unsupported
                text = probe[: -len(": null\n")]
            self._keys[key] = text
        return text

    def _scalar(self, value: Any, column: int, indent: int) -> str:
        """The text after a `key:` or `-` indicator for a scalar starting at `column` (after the space) whose
        continuation lines are at `indent`, ending with a line break."""
        kind = type(value)
        if kind is str:
            plain = self._plain.get(value)
            if plain is None:
                plain = self._can_be_plain(value)
            if plain and (column + len(value) <= _WIDTH or " " not in value):
                return f" {value}\n"
            return self._probe(value, column, indent)
        if kind is bool:
            return " true\n" if value else " false\n"
        if kind is int:
            return f" {value}\n"
        if value is None:
            return " null\n"
        raise _Unsupported

    def _probe(self, value: str, column: int, indent: int) -> str:
        """libyaml's text for `value` at that column and indent: the same scalar dumped in a document that places
        it there (mappings nested to the indent, a key as long as the gap, or a sequence item)."""
        key = (value, column, indent)
        text = self._probed.get(key)
        if text is None:
            depth = (indent - 2) // 2
            prefix = "".join(" " * (2 * i) + "a:\n" for i in range(depth))
            gap = column - indent
            doc: Any = {"k" * gap: value} if gap > 0 else {"a": [value]}
            prefix += " " * (indent - 2) + (f"{'k' * gap}:" if gap > 0 else "a:\n" + " " * (indent - 2) + "-")
            for _ in range(depth):
                doc = {"a": doc}
            probe = yaml.dump(doc, Dumper=PlainDumper, sort_keys=False)
            if not probe.startswith(prefix) or "\n..." in probe or not probe.endswith("\n"):
                raise _Unsupported
            text = self._probed[key] = probe[len(prefix) :]
        return text

    def _mapping(self, obj: dict[Any, Any], indent: int, out: list[str], first_padded: bool) -> None:
        seen, ident = self._seen, id(obj)
        if ident in seen:  # the same object twice: PyYAML writes an anchor and an alias
            raise _Unsupported
        seen.add(ident)
        append, keys, scalar = out.append, self._keys, self._scalar
        pad = " " * indent
        inner = indent + 2
        first = not first_padded
        for k, v in obj.items():
            key = keys.get(k) if type(k) is str else None
            if key is None:
                key = self._key(k)
            if first:
                append(f"{key}:")
                first = False
            else:
                append(f"{pad}{key}:")
            kind = type(v)
            if kind is dict:
                if v:
                    append("\n")
                    self._mapping(v, inner, out, True)
                else:
                    self._empty(v, " {}\n", out)
            elif kind is list:
                if v:
                    append("\n")
                    self._sequence(v, indent, out, True)
                else:
                    self._empty(v, " []\n", out)
            else:
                append(scalar(v, indent + len(key) + 2, inner))

    def _empty(self, value: Any, text: str, out: list[str]) -> None:
        ident = id(value)
        if ident in self._seen:
            raise _Unsupported
        self._seen.add(ident)
        out.append(text)

    # _mapping and _sequence repeat the same dict/list/scalar dispatch on purpose: it is the writer's loop, run once
    # per value of every document, where a helper call per value would add to `render -o yaml`'s cost.
    def _sequence(self, items: list[Any], indent: int, out: list[str], first_padded: bool) -> None:
        seen, ident = self._seen, id(items)
        if ident in seen:
            raise _Unsupported
        seen.add(ident)
        append, scalar = out.append, self._scalar
        dash = " " * indent + "-"
        inner = indent + 2
        first = not first_padded
        for item in items:
            if first:
                append("-")
                first = False
            else:
                append(dash)
            kind = type(item)
            if kind is dict:
                if item:
                    append(" ")
                    self._mapping(item, inner, out, False)
                else:
                    self._empty(item, " {}\n", out)
            elif kind is list:
                if item:
                    append(" ")
                    self._sequence(item, inner, out, False)
                else:
                    self._empty(item, " []\n", out)
            else:
                append(scalar(item, inner, inner))


def dump_all(objects: list[Any], fast: bool = True) -> str:
    """Every object as one document of a YAML stream, each starting with `---`."""
    if fast and not FastDumper.yaml_path_resolvers and LIBYAML:
        writer, out = _Writer(), list[str]()
        try:
            for obj in objects:
                writer.document(obj, out)
        except (_Unsupported, RecursionError):
            pass
        else:
            return "".join(out)
    dumper = FastDumper if fast and not FastDumper.yaml_path_resolvers else PlainDumper
    return yaml.dump_all(objects, Dumper=dumper, sort_keys=False, explicit_start=True)


def dump_document(obj: Any) -> str:
    """One object as a YAML document without `---`, every string as PyYAML's safe dumper writes it (multi-line ones
    quoted, not as literal blocks): the runtime snapshot ConfigMap's text, unchanged so that stored snapshots and new
    ones read alike."""
    return str(yaml.dump(obj, Dumper=_Base, sort_keys=False))
