#!/usr/bin/env python3
"""Copy the chart's generated inputs from their single sources into charts/trainjob-operator/:

- files/crds/*.yaml      <- crds/*.yaml (generated from the API models; never hand-edited)
- files/runtimes/*.yaml  <- runtimes/*.yaml (the default ClusterTrainingRuntimes)
- files/runtimes/data-cache/*.yaml <- runtimes/data-cache/*.yaml (the opt-in data-cache runtime)
- values.schema.json     <- its `config` property regenerated from trainjob_operator.config.OperatorConfig
- templates/rbac.yaml    <- the rules for the child kinds, from the plugin registry (Framework.kinds())

Usage: hack/sync-chart-crds.py [--check]
  --check  write nothing; exit 1 and list what differs (the chart tests run this check too).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "trainjob-operator"
COPIES = (
    (REPO / "crds", CHART / "files" / "crds"),
    (REPO / "runtimes", CHART / "files" / "runtimes"),
    (REPO / "runtimes" / "data-cache", CHART / "files" / "runtimes" / "data-cache"),
)
SCHEMA = CHART / "values.schema.json"
RBAC = CHART / "templates" / "rbac.yaml"
RBAC_BEGIN = "  # BEGIN child kinds: generated from the plugin registry by hack/sync-chart-crds.py (make chart-sync)\n"
RBAC_END = "  # END child kinds\n"


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Resolve pydantic's `$ref`s into one self-contained schema, dropping titles and defaults."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "default", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def config_schema() -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "src"))
    from trainjob_operator.config import OperatorConfig

    raw = OperatorConfig.model_json_schema()
    schema: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    schema["description"] = (
        "The operator's config file (trainjob_operator.config.OperatorConfig); the chart sets "
        "operator_namespace, webhook.host/service_name/service_port and health.host itself."
    )
    return schema


def child_rules(kinds: list[Any] | None = None) -> str:
    """One ClusterRole rule per (API group, verbs) of the child kinds the plugins declare (`kinds`, by default the
    registry's), in registry order."""
    sys.path.insert(0, str(REPO / "src"))
    from trainjob_operator.runtime.pipeline import Framework

    rules: dict[tuple[str, tuple[str, ...], bool], list[Any]] = {}
    for kind in kinds if kinds is not None else Framework.from_registry().kinds():
        rules.setdefault((kind.group, kind.verbs, _secret(kind)), []).append(kind)
    lines = []
    for (group, verbs, secret), kinds in rules.items():
        if secret:  # the chart's switch for clusters that run no runtime needing Secrets (docs/security.md)
            lines.append("  {{- if .Values.rbac.secrets }}")
        for kind in kinds:
            lines += textwrap.wrap(
                f"{kind.kind} ({kind.api_version}): {kind.purpose or 'written by a plugin'}.",
                width=118,
                initial_indent="  # ",
                subsequent_indent="  #   ",
            )
        lines += [
            f"  - apiGroups: [{json.dumps(group)}]",
            f"    resources: [{', '.join(json.dumps(k.plural) for k in kinds)}]",
            f"    verbs: [{', '.join(json.dumps(v) for v in verbs)}]",
        ]
        if secret:
            lines.append("  {{- end }}")
    return "".join(line + "\n" for line in lines)


def _secret(kind: Any) -> bool:
    """Secrets (v1): granted only with the chart's `rbac.secrets` (MPI and Flux need them, nothing else)."""
    return bool(kind.group == "" and kind.plural == "secrets")


def rbac() -> bytes:
    text = RBAC.read_text()
    head, _, rest = text.partition(RBAC_BEGIN)
    _, _, tail = rest.partition(RBAC_END)
    return (head + RBAC_BEGIN + child_rules() + RBAC_END + tail).encode()


def expected() -> dict[Path, bytes]:
    """Every generated chart file and the bytes it must hold."""
    out: dict[Path, bytes] = {}
    for source, target in COPIES:
        for path in sorted(source.glob("*.yaml")):
            out[target / path.name] = path.read_bytes()
    schema = json.loads(SCHEMA.read_text())
    updated = copy.deepcopy(schema)
    updated["properties"]["config"] = config_schema()
    out[SCHEMA] = (json.dumps(updated, indent=2) + "\n").encode()
    out[RBAC] = rbac()
    return out


def stale(want: dict[Path, bytes]) -> list[Path]:
    """Generated files that differ, are missing, or are left over from a deleted source."""
    paths = [p for p, data in want.items() if not p.exists() or p.read_bytes() != data]
    for _, target in COPIES:
        paths += [p for p in sorted(target.glob("*.yaml")) if p not in want]
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report drift")
    args = parser.parse_args(argv)
    want = expected()
    drift = stale(want)
    if args.check:
        for path in drift:
            print(f"out of date: {path.relative_to(REPO)} (run hack/sync-chart-crds.py)")
        return 1 if drift else 0
    for path in drift:
        if path in want:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(want[path])
            print(f"wrote {path.relative_to(REPO)}")
        else:
            path.unlink()
            print(f"removed {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
