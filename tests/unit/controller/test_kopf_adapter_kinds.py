"""Plugins own their kinds: a plugin that writes a new child kind declares it in its own module, and everything
else (the writes and their mode, existence tracking, the watches, the client's REST paths, the start-up permission
checks and the chart's RBAC rules) follows from the registry. A toy plugin proves no other file has to change."""

import importlib.util
from pathlib import Path
from typing import Any, ClassVar

from builders import RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.components import rest_mapper
from trainjob_operator.controller.kopf_adapter import registry_and_routes
from trainjob_operator.controller.main import Manager
from trainjob_operator.controller.store import Store
from trainjob_operator.k8s.client import Resource
from trainjob_operator.runtime import plan, startup
from trainjob_operator.runtime.framework import ChildKind, ComponentBuilder, Manifest, Mode, OwnsKinds
from trainjob_operator.runtime.info import RuntimeInfo
from trainjob_operator.runtime.manifests import owned_metadata
from trainjob_operator.runtime.observed import ObjectRef, Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.registry import PLUGINS

REPO = Path(__file__).resolve().parents[3]
WIDGETS = "toys.example.com/v1"


class Toy(ComponentBuilder, OwnsKinds):
    """A plugin with a kind no other plugin knows: one Widget per TrainJob, created once, watched."""

    name: ClassVar[str] = "Toy"

    def kinds(self) -> list[ChildKind]:
        return [ChildKind(WIDGETS, "Widget", "widgets", Mode.CREATE_ONCE, watch=True, purpose="toy widgets")]

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        if observed.exists(WIDGETS, "Widget", job.name):
            return []
        return [{"apiVersion": WIDGETS, "kind": "Widget", "metadata": owned_metadata(job, job.name)}]


# Registered where a new plugin goes: before the JobSet plugin, whose JobSet is written last.
FRAMEWORK = Framework.from_registry(
    {**{k: v for k, v in PLUGINS.items() if k != "JobSet"}, Toy.name: Toy, "JobSet": PLUGINS["JobSet"]}
)
WIDGET = ChildKind(WIDGETS, "Widget", "widgets", Mode.CREATE_ONCE, watch=True, purpose="toy widgets")


def test_the_registry_lists_the_new_kind_once_with_what_its_plugin_declared() -> None:
    assert [k for k in FRAMEWORK.kinds() if k.group == "toys.example.com"] == [WIDGET]
    assert FRAMEWORK.watched() == [WIDGET, *Framework.from_registry().watched()]


def test_the_builder_says_how_the_new_kind_is_written_and_the_plan_tracks_it() -> None:
    job, runtime = TrainJobBuilder.make().obj(), RuntimeBuilder.make().ml_policy(num_nodes=1, torch={}).source()
    first = plan.children(FRAMEWORK, job, runtime, Observed())
    assert [type(w).__name__ + " " + w.obj["kind"] for w in first.writes if not isinstance(w, plan.Delete)] == [
        "Create Widget",
        "Apply JobSet",
    ]
    known = Observed(existing=frozenset({ObjectRef(WIDGETS, "Widget", "test-job")}))
    again = plan.children(FRAMEWORK, job, runtime, known)
    assert [w.obj["kind"] for w in again.writes if not isinstance(w, plan.Delete)] == ["JobSet"]


def test_the_controller_watches_caches_and_reaches_the_new_kind() -> None:
    manager = Manager(
        OperatorConfig(namespaces=["team-a"]),
        FakeClient(),
        framework=FRAMEWORK,
        store=Store.for_kinds(FRAMEWORK.kinds()),
    )
    registry, routes = registry_and_routes(manager)
    selectors = [h.selector for h in registry._watching.get_all_handlers()]
    assert None not in selectors
    watched = {(s.group, s.version, s.any_name) for s in selectors if s is not None}
    assert ("toys.example.com", "v1", "widgets") in watched
    assert ("jobset.x-k8s.io", "v1alpha2", "jobsets") in watched
    assert ("widgets", "team-a") in manager.collections()
    assert (WIDGETS, "Widget") in manager.store.children
    assert rest_mapper(manager.framework).resource_of(WIDGETS, "Widget") == Resource(WIDGETS, "widgets")
    owned = {
        "apiVersion": WIDGETS,
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "team-a",
            "resourceVersion": "1",
            "ownerReferences": [{"kind": c.TRAINJOB_KIND, "name": "job", "controller": True}],
        },
    }
    routes.by_resource[("toys.example.com", "widgets")].event({"type": "ADDED", "object": owned})  # as the seam does
    assert manager.store.children[(WIDGETS, "Widget")].get(("team-a", "w")) == owned
    assert manager.queue._queued == {("team-a", "job")}


def test_the_start_up_checks_and_the_charts_rbac_grant_the_new_kind() -> None:
    needs = startup.permissions(startup.Plan("ops"), FRAMEWORK.kinds())
    assert [(n.verb, n.resource) for n in needs if n.group == "toys.example.com"] == [
        ("get", "widgets"),
        ("list", "widgets"),
        ("watch", "widgets"),
        ("create", "widgets"),  # created once: never patched
        ("delete", "widgets"),  # a previous TrainJob's widget under a child's name (issue 28)
    ]
    spec = importlib.util.spec_from_file_location("sync_chart", REPO / "hack" / "sync-chart-crds.py")
    assert spec is not None and spec.loader is not None
    sync: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    rules = sync.child_rules(FRAMEWORK.kinds())
    assert (
        '  # Widget (toys.example.com/v1): toy widgets.\n  - apiGroups: ["toys.example.com"]\n'
        '    resources: ["widgets"]\n    verbs: ["get", "list", "watch", "create", "delete"]\n'
    ) in rules


def test_the_shipped_registry_watches_only_jobsets() -> None:
    """Today's behaviour: the JobSet is the one watched child; PodGroups are probed, Secrets created once."""
    kinds = {(k.api_version, k.kind): (k.mode, k.probe, k.watch) for k in Framework.from_registry().kinds()}
    assert kinds == {
        ("v1", "ConfigMap"): (Mode.CREATE_ONCE, False, False),
        ("v1", "Secret"): (Mode.CREATE_ONCE, False, False),
        ("v1", "Service"): (Mode.CREATE_ONCE, False, False),
        (c.COSCHEDULING_API_VERSION, c.POD_GROUP_KIND): (Mode.APPLY, True, False),
        (c.VOLCANO_API_VERSION, c.POD_GROUP_KIND): (Mode.APPLY, True, False),
        ("scheduling.k8s.io/v1beta1", "Workload"): (Mode.CREATE_ONCE, False, False),
        ("scheduling.k8s.io/v1beta1", "PodGroup"): (Mode.CREATE_ONCE, False, False),
        (c.JOBSET_API_VERSION, c.JOBSET_KIND): (Mode.APPLY, False, True),
    }


def test_a_restarted_operator_reconciles_nothing_until_every_listing_reached_the_caches() -> None:
    """Before: TrainJobs were reconciled as their listing arrived, before their JobSets were cached; each looked
    unbuilt and a restart with 5,000 TrainJobs sent ~2,300 builds' writes (bench/results/2026-11-23-issue14-idle.md)."""
    cfg = OperatorConfig()
    cfg.status_server.enabled = False
    manager = Manager(cfg, FakeClient())
    manager.kopf_ready.set()
    steps = []
    for plural, namespace in manager.collections():
        steps.append((plural, manager.may_reconcile()))
        manager.sync.complete(plural if namespace is None else f"{plural} in {namespace}")
    steps.append(("all", manager.may_reconcile()))
    assert steps == [
        ("trainjobs", False),
        ("jobsets", False),
        ("trainingruntimes", False),
        ("clustertrainingruntimes", False),
        ("all", True),
    ]
