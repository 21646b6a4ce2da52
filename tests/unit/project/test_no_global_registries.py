"""No module-level mutable registries: what one operator learns (the REST mapping of its plugins' kinds, its caches,
its event handlers) lives in instances its composition root builds, so two operators in one process (or two tests)
never see each other's state and no test resets a global by hand.

Two checks: every module-level mutable container of the package is a read-only table named below (a new one fails
here: make it a tuple, frozenset or MappingProxyType, or an instance attribute); and building and driving two
operators with different plugins changes no module-level container at all."""

import asyncio
import importlib
import pkgutil
import ssl
from types import ModuleType
from typing import Any, ClassVar

import trainjob_operator
from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.components import of, rest_mapper
from trainjob_operator.controller.manager import Manager
from trainjob_operator.controller.store import Store
from trainjob_operator.k8s.client import BUILTIN, Client, Resource
from trainjob_operator.k8s.connection import Connection
from trainjob_operator.runtime.framework import ChildKind, ComponentBuilder, Manifest, Mode, OwnsKinds
from trainjob_operator.runtime.info import RuntimeInfo
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.registry import PLUGINS

READ_ONLY_TABLES = {
    "trainjob_operator.api.constants.PLURALS": "kind → plural of the trainer's kinds",
    "trainjob_operator.api.constants.ANCESTOR_CONTAINERS": "the SDK's ancestor container names",
    "trainjob_operator.api.jobset_types._ATOMIC": "list types of the JobSet schema",
    "trainjob_operator.api.jobset_types._MAP_BY_NAME": "list-map keys of the JobSet schema",
    "trainjob_operator.api.legacy.INITIALIZER_JOBS": "the v2.3 initializer job names",
    "trainjob_operator.api.trainjob._MAP_BY_NAME": "list-map keys of the TrainJob schema",
    "trainjob_operator.api.trainjob._IMMUTABLE_MAP_BY_NAME": "immutable list-maps of the TrainJob schema",
    "trainjob_operator.offline.inputs._stdin_text": "stdin read once per CLI command (reset by `offline.commands.run`; one command a process)",
    "trainjob_operator.runtime.errors._SHORT_ESCAPES": "control-character escapes",
    "trainjob_operator.runtime.pipeline.PLUGINS": "the built-in plugins (re-exported from runtime.registry)",
    "trainjob_operator.runtime.registry.PLUGINS": "the built-in plugins; a Framework copies what it uses",
    "trainjob_operator.runtime.plugins.common.COMPLETION_INDEX_ENV_SOURCE": "an env var source, copied when used",
    "trainjob_operator.runtime.plugins.flux.plugin.DEFAULT_SETTINGS": "Flux's default settings",
    "trainjob_operator.runtime.quantity._SUFFIXES": "quantity suffixes",
    "trainjob_operator.runtime.smp.MERGE_KEYS": "strategic merge patch keys",
    "trainjob_operator.runtime.validation.cel.TWINS": "CEL rules and their Python twins",
    "trainjob_operator.runtime.validation.cel.UNMIRRORED": "CEL rules without a twin, and why",
    "trainjob_operator.runtime.validation.schema._QUANTITY_MAPS": "schema paths holding quantities",
    "trainjob_operator.codec.yamltext._BOOLS": "YAML 1.1 booleans",
    "trainjob_operator.runtime.review.REVIEWED_OPERATIONS": "the operations each validating webhook reviews",
}
"""Module-level containers that are constant tables (never mutated after import), each with what it holds."""

MUTABLE = (dict, list, set, bytearray)


def modules() -> list[ModuleType]:
    found = [trainjob_operator]
    for info in pkgutil.walk_packages(trainjob_operator.__path__, "trainjob_operator."):
        if not info.name.endswith("__main__"):  # running it is what importing it does
            found.append(importlib.import_module(info.name))
    return found


def module_containers() -> dict[str, Any]:
    """Every module-level mutable container defined in the package, by dotted name (one name per object)."""
    seen: dict[int, str] = {}
    for module in modules():
        for name, value in vars(module).items():
            if isinstance(value, MUTABLE) and not name.startswith("__") and id(value) not in seen:
                seen[id(value)] = f"{module.__name__}.{name}"
    by_name: dict[str, Any] = {}
    for module in modules():
        for name, value in vars(module).items():
            if seen.get(id(value)) == f"{module.__name__}.{name}":
                by_name[f"{module.__name__}.{name}"] = value
    return by_name


def fingerprint() -> dict[str, str]:
    return {name: repr(value) for name, value in module_containers().items()}


def test_every_module_level_mutable_container_is_a_named_read_only_table() -> None:
    unexpected = sorted(set(module_containers()) - set(READ_ONLY_TABLES))
    assert unexpected == [], (
        f"module-level mutable containers {unexpected}: make each a tuple, frozenset or MappingProxyType, or move it "
        "into an instance the composition root builds (controller/main.py)"
    )


class Gadget(ComponentBuilder, OwnsKinds):
    """A plugin with a kind only one of the two operators has."""

    name: ClassVar[str] = "Gadget"

    def kinds(self) -> list[ChildKind]:
        return [ChildKind("toys.example.com/v1", "Gadget", "gadgets", Mode.CREATE_ONCE, watch=True, purpose="toys")]

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        return []


def operator(framework: Framework, namespace: str) -> tuple[Manager, Client]:
    """One operator as `main.serve` composes it (no I/O: nothing is started)."""
    connection = Connection(server="https://127.0.0.1:1", ssl_context=ssl.create_default_context())
    client = Client(connection, qps=0, burst=0, mapper=rest_mapper(framework))
    cfg = OperatorConfig(namespaces=[namespace])
    manager = Manager(cfg, client, framework=framework, store=Store.for_kinds(framework.kinds()))
    of(manager, connection, asyncio.Event())
    return manager, client


def test_two_operators_in_one_process_share_nothing_module_level() -> None:
    before = fingerprint()
    toys = Framework.from_registry({"Gadget": Gadget, **PLUGINS})

    async def scenario() -> tuple[Manager, Client, Manager, Client]:
        plain, plain_client = operator(Framework.from_registry(), "team-a")
        toy, toy_client = operator(toys, "team-b")
        for manager, namespace in ((plain, "team-a"), (toy, "team-b")):
            job = TrainJobBuilder.make(namespace=namespace, uid=f"uid-{namespace}").raw()
            manager.on_trainjob({"type": "ADDED", "object": job})
            manager.store.known.shared_source(f"uid-{namespace}", "runtime text", RuntimeBuilder.make().source())
        await plain_client.close()
        await toy_client.close()
        return plain, plain_client, toy, toy_client

    plain, plain_client, toy, toy_client = asyncio.run(scenario())
    assert fingerprint() == before
    assert toy_client.mapper.resource_of("toys.example.com/v1", "Gadget") == Resource("toys.example.com/v1", "gadgets")
    assert ("toys.example.com/v1", "Gadget") not in plain_client.mapper.resources
    assert ("toys.example.com/v1", "Gadget") not in BUILTIN.resources
    assert (plain.state_counts, toy.state_counts) == ({"Pending": 1}, {"Pending": 1})
    assert {u for u, j in plain.store.known.jobs.items() if j.snapshot} == {"uid-team-a"}
    assert {u for u, j in toy.store.known.jobs.items() if j.snapshot} == {"uid-team-b"}
