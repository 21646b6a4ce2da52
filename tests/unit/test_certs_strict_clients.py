"""Certificates strict clients accept (`certs.py`, issue 33): Python 3.13's `ssl.create_default_context()` and
urllib3 2 on 3.13 set `VERIFY_X509_STRICT`, so the kubeflow SDK's progress call from a trainer image on 3.13 refused
a certificate without key identifiers ("Missing Authority Key Identifier") and progress silently stopped. The flag
is set explicitly here, so Python 3.11 checks the same; the handshakes run against the real status and webhook
servers. A stored CA that lacks what strict verifiers need is replaced at the next rotation."""

import asyncio
import base64
import datetime as dt
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fake_client import FakeClient
from operator_fixtures import free_port
from trainjob_operator import certs
from trainjob_operator import config as config_module

NOW = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)


def strict_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname and CERT_REQUIRED
    context.verify_flags |= ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN
    context.load_verify_locations(cadata=ca_pem.decode())
    return context


def old_style(hosts: list[str], now: dt.datetime) -> certs.Bundle:
    """What `certs.generate` made before issue 33: no key identifiers, no BasicConstraints or KeyUsage on the leaf."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, certs.CA_NAME)])
    usage = x509.KeyUsage(True, False, False, False, False, True, True, False, False)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=730))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def pem_key(k: ec.EllipticCurvePrivateKey) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    return certs.Bundle(
        ca.public_bytes(serialization.Encoding.PEM),
        pem_key(ca_key),
        leaf.public_bytes(serialization.Encoding.PEM),
        pem_key(key),
    )


async def handshake(port: int, ca_pem: bytes, server_name: str = "localhost") -> str:
    """A strict TLS handshake and one HTTP request; the status line."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=strict_context(ca_pem), server_hostname=server_name
    )
    try:
        writer.write(f"GET /nothing HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        return (await reader.readline()).decode().strip()
    finally:
        writer.close()
        await writer.wait_closed()


Serve = Callable[[certs.Bundle, int], Awaitable[Callable[[], Awaitable[None]]]]


async def serve_status(bundle: certs.Bundle, port: int) -> Callable[[], Awaitable[None]]:
    from trainjob_operator.controller.statusserver import StatusServer
    from trainjob_operator.controller.store import Store
    from trainjob_operator.metrics import Metrics

    cfg = config_module.StatusServerConfig(port=port)
    server = StatusServer(cfg, FakeClient(), Store(), Metrics())
    server.load(bundle)
    await server.start()
    return server.stop


async def serve_webhooks(bundle: certs.Bundle, port: int) -> Callable[[], Awaitable[None]]:
    from trainjob_operator.controller.admissionserver import AdmissionServer
    from trainjob_operator.metrics import Metrics

    server = AdmissionServer("127.0.0.1", port, {}, Metrics())
    server.load(bundle)
    await server.start()
    return server.stop


SERVERS = [pytest.param(serve_status, id="status server"), pytest.param(serve_webhooks, id="webhook server")]


@pytest.mark.parametrize("serve", SERVERS)
def test_a_strict_client_completes_the_handshake_with_the_servers(serve: Serve) -> None:
    bundle = certs.generate(["localhost", "127.0.0.1"], dt.datetime.now(dt.UTC))

    async def run() -> str:
        stop = await serve(bundle, port := free_port())
        try:
            return await handshake(port, bundle.ca_cert)
        finally:
            await stop()

    assert asyncio.run(run()).startswith("HTTP/1.1 ")


@pytest.mark.parametrize("serve", SERVERS)
def test_the_certificates_made_before_issue_33_fail_the_same_strict_handshake(serve: Serve) -> None:
    """The test above would fail with the old certificates: the same client refuses them (and accepts them without
    the strict flag, so it is the flag that refuses)."""
    bundle = old_style(["localhost"], dt.datetime.now(dt.UTC))

    async def run(strict: bool) -> str:
        stop = await serve(bundle, port := free_port())
        try:
            if strict:
                return await handshake(port, bundle.ca_cert)
            context = strict_context(bundle.ca_cert)
            context.verify_flags &= ~ssl.VERIFY_X509_STRICT
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
            writer.close()
            await writer.wait_closed()
            return "lenient handshake done"
        finally:
            await stop()

    with pytest.raises(ssl.SSLCertVerificationError, match=r"[Kk]ey [Ii]dentifier|basic constraints|key usage"):
        asyncio.run(run(strict=True))
    assert asyncio.run(run(strict=False)) == "lenient handshake done"


def test_the_certificates_carry_what_rfc_5280_asks() -> None:
    bundle = certs.generate(["svc.ns.svc", "10.0.0.1"], NOW)
    ca, leaf = x509.load_pem_x509_certificate(bundle.ca_cert), x509.load_pem_x509_certificate(bundle.cert)

    def ext(cert: x509.Certificate, kind: type[Any]) -> x509.Extension[Any]:
        return cert.extensions.get_extension_for_class(kind)

    ca_basic, leaf_basic = ext(ca, x509.BasicConstraints), ext(leaf, x509.BasicConstraints)
    assert (ca_basic.critical, ca_basic.value.ca, ca_basic.value.path_length) == (True, True, 0)
    assert (leaf_basic.critical, leaf_basic.value.ca) == (True, False)
    ca_usage, leaf_usage = ext(ca, x509.KeyUsage).value, ext(leaf, x509.KeyUsage).value
    assert (ca_usage.key_cert_sign, ca_usage.crl_sign, ca_usage.digital_signature) == (True, True, False)
    assert (leaf_usage.digital_signature, leaf_usage.key_cert_sign, leaf_usage.key_encipherment) == (
        True,
        False,
        False,  # an ECDSA key: no RSA key transport
    )
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ca_ski = ext(ca, x509.SubjectKeyIdentifier).value.digest
    assert ext(ca, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert ext(leaf, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert ext(leaf, x509.SubjectKeyIdentifier).value.digest != ca_ski
    assert bundle.sans() == {"svc.ns.svc", "10.0.0.1"}
    assert certs.ca_lacks(ca) == [] and certs.leaf_lacks(leaf) == []


def _stored(bundle: certs.Bundle) -> dict[str, Any]:
    keys = (("ca.crt", bundle.ca_cert), ("ca.key", bundle.ca_key), ("tls.crt", bundle.cert), ("tls.key", bundle.key))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "cert", "namespace": "ops", "resourceVersion": "5"},
        "data": {k: base64.b64encode(v).decode() for k, v in keys},
    }


@pytest.mark.parametrize(
    ("stored", "rotated", "ca_kept"),
    [
        pytest.param("current", False, True, id="a current bundle is kept as it is"),
        pytest.param("old style", True, False, id="a stored CA without key identifiers is replaced with its leaf"),
        pytest.param(
            "old leaf under a current CA",
            True,
            True,
            id="a leaf without BasicConstraints or KeyUsage is reissued under the same (current) CA",
        ),
    ],
)
def test_a_stored_ca_lacking_extensions_is_rotated(stored: str, rotated: bool, ca_kept: bool) -> None:
    from trainjob_operator.controller.admissionserver import ensure_certificate

    hosts = ["127.0.0.1"]
    current = certs.generate(hosts, NOW - dt.timedelta(days=10))
    if stored == "current":
        bundle = current
    elif stored == "old style":
        bundle = old_style(hosts, NOW - dt.timedelta(days=10))
    else:
        old = old_style(hosts, NOW - dt.timedelta(days=10))
        bundle = certs.Bundle(current.ca_cert, current.ca_key, old.cert, old.key)
    client = FakeClient().put(_stored(bundle))
    cfg = config_module.Webhook(cert_secret_name="cert", host="127.0.0.1")
    got = asyncio.run(ensure_certificate(client, cfg, "ops", NOW))
    assert (got.cert != bundle.cert, got.ca_cert == bundle.ca_cert) == (rotated, ca_kept)
    assert certs.ca_lacks(x509.load_pem_x509_certificate(got.ca_cert)) == []
    assert certs.leaf_lacks(x509.load_pem_x509_certificate(got.cert)) == []
    assert not certs.needs_rotation(got, hosts, NOW, before_days=30)
    stored_data = (client.stored("v1", "Secret", "cert", "ops") or {})["data"]
    assert base64.b64decode(stored_data["ca.crt"]) == got.ca_cert, "the caBundle and trainer pods' CA follow it"
