"""Least privilege, derived from the code (runtime/startup.py's permissions()): what each plugin's builder writes
is within the verbs its kinds declare (every Secret is created once, so no Secret is ever patched), and the
shipped manifests/ grant exactly those permissions, both ways, as the API server evaluates RBAC (rbac_check). The
chart's renderings for other values are compared the same way in tests/chart."""

from pathlib import Path

import pytest
import yaml

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder
from rbac_check import denied, grants, unused
from trainjob_operator.runtime import plan, startup
from trainjob_operator.runtime.observed import Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.startup import Plan

REPO = Path(__file__).resolve().parents[3]
FRAMEWORK = Framework.from_registry()
KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")
JOB = TrainJobBuilder.make()
RUNTIMES = {
    "torch": RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}),
    "MPI": RuntimeBuilder.make().ml_policy(
        num_nodes=2, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
    ),
    "Flux": RuntimeBuilder.make().ml_policy(num_nodes=2, flux={}),
    "gang (coscheduling)": RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}).coscheduling(),
}
VERB = {plan.Create: ("create",), plan.Apply: ("create", "patch"), plan.Delete: ("delete",)}


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_every_write_a_build_sends_is_within_its_kinds_declared_verbs(runtime: str) -> None:
    job = JOB.trainer(numNodes=2).obj()
    children = plan.children(FRAMEWORK, job, RUNTIMES[runtime].source(), Observed(keys=FixedKeys(KEY)))
    assert children.writes
    for write in children.writes:
        api_version, kind = (
            (write.api_version, write.kind)
            if isinstance(write, plan.Delete)
            else (write.obj["apiVersion"], write.obj["kind"])
        )
        declared = FRAMEWORK.kind(api_version, kind)
        assert declared is not None, f"{kind} is written but no plugin declares it"
        assert set(VERB[type(write)]) <= set(declared.verbs), f"{type(write).__name__} {kind}: {declared.verbs}"
        if kind == "Secret":
            assert isinstance(write, plan.Create), "every Secret the operator writes is created once"


def test_no_secret_is_ever_patched_and_configmaps_are() -> None:
    verbs = {k.plural: k.verbs for k in FRAMEWORK.kinds() if k.group == ""}
    assert verbs == {
        # the runtime snapshot is created once, but MPI's hostfile and Flux's entrypoint are applied
        "configmaps": ("get", "create", "patch", "delete"),
        # MPI's SSH keys and Flux's CURVE keys: created once by every plugin that writes one
        "secrets": ("get", "create", "delete"),
        # elastic PyTorch's rendezvous Service: created once
        "services": ("get", "create", "delete"),
    }


def test_denied_secrets_warn_instead_of_refusing_to_start() -> None:
    """A cluster that withholds Secrets (the chart's rbac.secrets: false) still runs every other runtime."""
    plan_ = Plan("kubeflow-system")
    withheld = tuple(n for n in startup.permissions(plan_) if n.resource == "secrets" and n.namespace is None)
    assert [n.verb for n in withheld] == ["get", "create", "delete"]
    served = {api.group_version: frozenset({a.plural for a in startup.REQUIRED_APIS}) for api in startup.REQUIRED_APIS}
    decision = startup.decide(plan_, startup.Facts(served=served, denied=withheld, user="system:serviceaccount:x"))
    assert decision.fatal is None
    assert decision.warnings[1] == (
        "RBAC: system:serviceaccount:x may not create secrets cluster-wide; MPI SSH key Secrets (created once); "
        "Flux CURVE certificate Secrets (created once) cannot be written: TrainJobs whose runtime makes them fail"
    )


def test_the_operators_own_certificate_secret_stays_required_when_its_namespace_is_watched() -> None:
    needs = startup.permissions(Plan("kubeflow-system", namespaces=("kubeflow-system",)))
    create = [n for n in needs if (n.verb, n.resource, n.namespace) == ("create", "secrets", "kubeflow-system")]
    assert [n.required for n in create] == [True]


def test_the_fatal_path_may_remove_the_webhook_configurations() -> None:
    deletes = [n for n in startup.permissions(Plan("ops")) if n.verb == "delete" and n.group.startswith("admission")]
    assert [(n.resource, n.name, n.required) for n in deletes] == [
        ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org", False),
        ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org", False),
    ]


def test_the_shipped_manifests_grant_exactly_what_start_up_checks() -> None:
    docs = list(yaml.safe_load_all((REPO / "manifests" / "base" / "operator" / "rbac.yaml").read_text()))
    found = grants(docs, "trainjob-operator", "kubeflow-system")
    needs = startup.permissions(Plan("kubeflow-system"))
    assert [n.describe() for n in denied(found, needs)] == []
    assert unused(found, needs) == []
