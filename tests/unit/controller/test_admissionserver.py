"""Admission (`controller/admissionserver.py`): the response shapes and the webhook configurations pointing at the local
server with the CA."""

import base64
import json

from trainjob_operator import config as config_module
from trainjob_operator.controller.admissionserver import AdmissionVerdict, response, webhook_configurations


def test_admission_response_shapes() -> None:
    denied = response(
        {"uid": "u1"}, AdmissionVerdict(allowed=False, message="spec.x: Invalid value: 1: bad", warnings=("careful",))
    )
    assert denied == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u1",
            "allowed": False,
            "warnings": ["careful"],
            "status": {"code": 403, "message": "spec.x: Invalid value: 1: bad", "reason": "Forbidden"},
        },
    }
    ops = [{"op": "replace", "path": "/spec/runtimePatches", "value": []}]
    mutated = response({"uid": "u2"}, AdmissionVerdict(patch=ops))["response"]
    assert mutated["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(mutated["patch"])) == ops


def test_webhook_configurations_point_at_the_local_server_with_the_ca() -> None:
    cfg = config_module.Webhook(port=19443)
    mutating, validating = webhook_configurations(cfg, "ops", b"CA")
    assert mutating["metadata"]["name"] == "defaulter.trainer.kubeflow.org"
    assert [w["name"] for w in validating["webhooks"]] == [
        "validator.trainjob.trainer.kubeflow.org",
        "validator.trainingruntime.trainer.kubeflow.org",
        "validator.clustertrainingruntime.trainer.kubeflow.org",
    ]
    hook = validating["webhooks"][1]
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:19443/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    assert hook["objectSelector"] == {
        "matchExpressions": [
            {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}
        ]
    }
    in_cluster = webhook_configurations(config_module.Webhook(service_name="svc"), "ops", b"CA")[0]
    assert in_cluster["webhooks"][0]["clientConfig"]["service"] == {
        "name": "svc",
        "namespace": "ops",
        "path": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "port": 443,
    }
