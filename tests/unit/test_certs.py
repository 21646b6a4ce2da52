"""Certificates (`certs.py`, and `controller/admission.ensure_certificate`): rotation when expiring or for new hosts,
under the same CA so the previous certificate stays trusted."""

import asyncio
import base64
import datetime as dt

import pytest

from fake_client import FakeClient
from trainjob_operator import certs
from trainjob_operator import config as config_module


def test_certificates_rotate_when_expiring_or_for_new_hosts() -> None:
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    bundle = certs.generate(["127.0.0.1"], now, days=365)
    assert bundle.sans() == {"127.0.0.1"}
    assert not certs.needs_rotation(bundle, ["127.0.0.1"], now, before_days=30)
    assert certs.needs_rotation(bundle, ["127.0.0.1"], now + dt.timedelta(days=340), before_days=30)
    assert certs.needs_rotation(bundle, ["svc.ns.svc"], now, before_days=30)


def _signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    cert, ca = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(ca_pem)
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey) and cert.signature_hash_algorithm is not None
    try:
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except InvalidSignature:
        return False
    return cert.issuer == ca.subject


def test_a_rotation_keeps_the_ca_so_the_previous_certificate_stays_trusted() -> None:
    """Found by the certificate rotation under load (issue 17: ca_changed=2): every rotation made a new CA, so
    trainer pods of running TrainJobs (whose CA ConfigMap is never re-applied) lost the status server's CA, and the
    caBundle the rotating replica published no longer covered the certificate another replica still served."""
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    first = certs.generate(["127.0.0.1"], now, days=365)
    later = now + dt.timedelta(days=340)
    assert certs.ca_outlives(first, later, 365)
    rotated = certs.generate(["127.0.0.1"], later, days=365, ca_of=first)
    assert (rotated.ca_cert, rotated.ca_key) == (first.ca_cert, first.ca_key)
    assert rotated.cert != first.cert and rotated.key != first.key
    assert _signed_by(rotated.cert, first.ca_cert) and _signed_by(first.cert, rotated.ca_cert)
    assert not certs.needs_rotation(rotated, ["127.0.0.1"], later, before_days=30)


@pytest.mark.parametrize(
    ("case", "want"),
    [
        pytest.param("valid for long", True, id="a CA valid past the new certificate (and a day) is kept"),
        pytest.param("expiring", False, id="a CA expiring before the new certificate would: a new CA"),
        pytest.param("other key", False, id="a CA whose key does not match: a new CA"),
        pytest.param("garbage", False, id="an unreadable CA: a new CA"),
    ],
)
def test_when_a_rotation_keeps_the_ca(case: str, want: bool) -> None:
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    bundle = certs.generate(["127.0.0.1"], now, days=365)  # the CA lasts 730 days
    when = now + dt.timedelta(days=400 if case == "expiring" else 10)
    if case == "other key":
        bundle = certs.Bundle(bundle.ca_cert, certs.generate(["x"], now).ca_key, bundle.cert, bundle.key)
    if case == "garbage":
        bundle = certs.Bundle(b"not a certificate", b"not a key", bundle.cert, bundle.key)
    assert certs.ca_outlives(bundle, when, 365) is want


def test_ensure_certificate_rotates_an_expiring_certificate_under_the_same_ca() -> None:
    from trainjob_operator.controller.admissionserver import ensure_certificate

    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    old = certs.generate(["127.0.0.1"], now - dt.timedelta(days=350), days=365)
    secret = {
        "metadata": {"name": "cert", "namespace": "ops", "resourceVersion": "5"},
        "data": {
            k: base64.b64encode(v).decode()
            for k, v in (("ca.crt", old.ca_cert), ("ca.key", old.ca_key), ("tls.crt", old.cert), ("tls.key", old.key))
        },
    }
    client = FakeClient().put({"apiVersion": "v1", "kind": "Secret", **secret})

    cfg = config_module.Webhook(cert_secret_name="cert")
    bundle = asyncio.run(ensure_certificate(client, cfg, "ops", now))
    assert [call for call in client.calls if call[0] == "replace"] == [("replace", "Secret", "cert", "5")], (
        "the version read"
    )
    body = client.stored("v1", "Secret", "cert", "ops")
    assert body is not None
    assert body["data"]["ca.crt"] == secret["data"]["ca.crt"] and body["data"]["ca.key"] == secret["data"]["ca.key"]
    assert bundle.cert != old.cert and _signed_by(bundle.cert, old.ca_cert)
