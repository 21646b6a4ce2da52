"""Admission (`controller/admissionserver.py`): the response shapes and the webhook configurations pointing at the local
server with the CA."""

import asyncio
import base64
import datetime as dt
import json
import ssl
from pathlib import Path

import aiohttp
import pytest

from operator_fixtures import free_port
from trainjob_operator import certs
from trainjob_operator import config as config_module
from trainjob_operator.controller.admissionserver import (
    AdmissionServer,
    AdmissionVerdict,
    response,
    webhook_configurations,
)
from trainjob_operator.metrics import Metrics


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


def test_a_stopping_webhook_server_answers_during_its_drain_closing_each_connection_then_stops_listening() -> None:
    """Behind a Service, calls still arrive while a replica stops (its endpoint leaves late), some on kept-alive
    connections: during the drain each is answered with `Connection: close`, so the API server never sends on a
    connection the server closed under it; after the drain nothing listens."""

    async def allow(_request: dict[str, object]) -> AdmissionVerdict:
        return AdmissionVerdict()

    bundle = certs.generate(["localhost", "127.0.0.1"], dt.datetime.now(dt.UTC))
    trust = ssl.create_default_context(cadata=bundle.ca_cert.decode())
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}

    async def run() -> tuple[str, str, bool, bool]:
        port = free_port()
        server = AdmissionServer("127.0.0.1", port, {"/v": allow}, Metrics(), drain_seconds=0.5)
        server.load(bundle)
        await server.start()
        url = f"https://localhost:{port}/v"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
            async with session.post(url, json=review) as before:
                kept = before.headers.get("Connection", "keep-alive")
                assert (await before.json())["response"]["allowed"] is True
            stopping = asyncio.create_task(server.stop())
            await asyncio.sleep(0)  # stop() has begun its drain
            async with session.post(url, json=review) as during:
                closed = during.headers.get("Connection", "")
                answered = (await during.json())["response"]["allowed"] is True
            await stopping
            try:
                async with session.post(url, json=review):
                    listening = True
            except aiohttp.ClientConnectionError:
                listening = False
        return kept, closed, answered, listening

    kept, closed, answered, listening = asyncio.run(run())
    assert (kept.lower(), closed.lower(), answered, listening) == ("keep-alive", "close", True, False)


def test_loading_a_certificate_leaves_no_key_on_disk_and_serves_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook, metrics and status servers share `load_certificate`. It used to write each server's key into its
    own directory under /tmp that nothing removed: every start left three private keys behind. Now the key touches
    disk only for the `load_cert_chain` call, and a rotation serves the new certificate."""
    import tempfile

    from trainjob_operator.controller.admissionserver import load_certificate

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    now = dt.datetime.now(dt.UTC)
    first, second = certs.generate(["localhost"], now), certs.generate(["localhost"], now)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_certificate(context, first)
    load_certificate(context, second)  # a rotation

    async def served_by() -> bytes:
        port = free_port()
        server = AdmissionServer("127.0.0.1", port, {}, Metrics())
        server.ssl = context
        await server.start()
        try:
            trust = ssl.create_default_context(cadata=second.ca_cert.decode())
            _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust, server_hostname="localhost")
            peer = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            writer.close()
            return bytes(peer)
        finally:
            await server.stop()

    peer = asyncio.run(served_by())
    assert ssl.DER_cert_to_PEM_cert(peer).strip() == second.cert.decode().strip()
    assert list(tmp_path.iterdir()) == []
