"""What the kubelet does with a container's `env` list: resolve `valueFrom.fieldRef` and expand dependent
variables (`$(NAME)` refers to a variable defined EARLIER in the list; `$$` is a literal `$`; an unknown or later
reference is left as written), after the Kubernetes documentation "Define Dependent Environment Variables".
"""

from __future__ import annotations

from typing import Any


def _expand(value: str, defined: dict[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = value.find(")", i + 2)
                if end != -1:
                    name = value[i + 2 : end]
                    out.append(defined[name] if name in defined else value[i : end + 1])
                    i = end + 1
                    continue
        out.append(value[i])
        i += 1
    return "".join(out)


def container_env(env: list[dict[str, Any]], fields: dict[str, str]) -> dict[str, str]:
    """The environment a container sees; `fields` maps a fieldRef fieldPath to its value in the pod."""
    defined: dict[str, str] = {}
    for var in env:
        if "valueFrom" in var:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            defined[var["name"]] = fields[path]
        else:
            defined[var["name"]] = _expand(var.get("value", ""), defined)
    return defined
