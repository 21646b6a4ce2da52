"""YAML text of JSON-like objects (`render`, `convert`): libyaml's emitter, PyYAML's representer without its overhead.

`dump_all` writes what `yaml.dump_all(objects, Dumper=CSafeDumper, sort_keys=False, explicit_start=True)` writes
with multi-line strings as literal blocks, byte for byte (tests/unit/test_jsontext.py compares both). Two things
make it several times faster: the plain types (dict, list, str, int, bool, None) are represented without PyYAML's
type dispatch, and the tag resolution libyaml asks for twice per scalar is remembered per value. Shared sub-objects
still become anchors and aliases, as PyYAML makes them; every other type goes through PyYAML's own code.
"""

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

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


class FastDumper(PlainDumper):
    """The same output as PlainDumper, with the plain JSON types represented directly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resolved: dict[tuple[str, tuple[bool, bool]], str] = {}
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

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is not ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = self._resolved[key] = super().resolve(kind, value, implicit)
        return tag


def dump_all(objects: list[Any], fast: bool = True) -> str:
    """Every object as one document of a YAML stream, each starting with `---`."""
    dumper = FastDumper if fast and not FastDumper.yaml_path_resolvers else PlainDumper
    return yaml.dump_all(objects, Dumper=dumper, sort_keys=False, explicit_start=True)
