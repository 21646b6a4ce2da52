"""RBAC as the API server evaluates it, for the least-privilege tests: which rendered rules reach a ServiceAccount
(through ClusterRoleBindings everywhere, through RoleBindings in one namespace), whether they grant a
`runtime.startup.Need`, and which of them no Need uses. Shared by tests/unit (manifests/) and tests/chart (helm
renderings of several values)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trainjob_operator.runtime.startup import Need


@dataclass(frozen=True)
class Grant:
    """One verb on one resource (maybe one name) of a rule bound to the subject; `namespace` None: everywhere."""

    group: str
    resource: str
    verb: str
    name: str | None
    namespace: str | None

    def describe(self) -> str:
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {what}" + (f" {self.name!r}" if self.name else "") + f" {where}"


def grants(docs: Iterable[dict[str, Any]], service_account: str, namespace: str) -> list[Grant]:
    """Every grant the rendered objects `docs` give ServiceAccount `namespace/service_account`."""
    docs = [d for d in docs if d]
    roles = {("ClusterRole", None, d["metadata"]["name"]): d for d in docs if d["kind"] == "ClusterRole"}
    roles |= {("Role", d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "Role"}
    found: list[Grant] = []
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount" and s.get("name") == service_account and s.get("namespace") == namespace
            for s in binding.get("subjects") or []
        ):
            continue
        where = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role.get("rules") or []:
            if "nonResourceURLs" in rule:
                continue
            names: Sequence[str | None] = rule.get("resourceNames") or [None]
            found += [
                Grant(group, resource, verb, name, where)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
                for name in names
            ]
    return found


def allows(grant: Grant, need: Need) -> bool:
    """The API server's answer for `need` from this one grant."""
    return (
        (grant.group, grant.resource, grant.verb) == (need.group, need.resource, need.verb)
        and (grant.name is None or grant.name == need.name)
        and (grant.namespace is None or grant.namespace == need.namespace)
    )


def denied(found: Sequence[Grant], needs: Sequence[Need]) -> list[Need]:
    return [need for need in needs if not any(allows(g, need) for g in found)]


def unused(found: Sequence[Grant], needs: Sequence[Need]) -> list[str]:
    """Grants no need asks for exactly: the same verb, resource, name (or none) and namespace (or cluster-wide). A
    grant broader than every need of it (cluster-wide where the operator watches some namespaces, any name where
    it uses one) counts as unused."""
    return [
        g.describe()
        for g in found
        if not any(
            (g.group, g.resource, g.verb, g.name, g.namespace) == (n.group, n.resource, n.verb, n.name, n.namespace)
            for n in needs
        )
    ]
