"""The webhook CA and serving certificate: generated here, stored by the controller in a Secret.

Both carry what RFC 5280 asks of them and strict verifiers check (Python 3.13's `ssl.create_default_context()` sets
`VERIFY_X509_STRICT`, urllib3 2 on 3.13 too): Subject and Authority Key Identifiers, BasicConstraints (the CA's
critical, path length 0; the leaf's ca=False) and KeyUsage on both, serverAuth and the SAN on the leaf. A stored CA
without them is replaced at the next rotation (`ca_outlives`), the caBundle and trainer pods' CA following."""

import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_NAME = "trainjob-operator-ca"

_T = TypeVar("_T", bound=x509.ExtensionType)


@dataclass(frozen=True)
class Bundle:
    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def not_after(self) -> dt.datetime:
        return x509.load_pem_x509_certificate(self.cert).not_valid_after_utc

    def sans(self) -> set[str]:
        cert = x509.load_pem_x509_certificate(self.cert)
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return {str(v) for v in ext.get_values_for_type(x509.DNSName)} | {
            str(v) for v in ext.get_values_for_type(x509.IPAddress)
        }


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _authority_key_id(ca: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:  # a CA without one is not kept (`ca_lacks`); derived as ours would be
        public = ca.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(public)
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _extension(cert: x509.Certificate, kind: type[_T]) -> x509.Extension[_T] | None:
    try:
        return cert.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None


def ca_lacks(ca: x509.Certificate) -> list[str]:
    """What a strict verifier misses in the CA `ca` (empty: nothing). A CA made before the certificates carried key
    identifiers is not kept at a rotation: a leaf it signs could not name it."""
    missing: list[str] = []
    basic = _extension(ca, x509.BasicConstraints)
    if basic is None or not basic.critical or not basic.value.ca:
        missing.append("BasicConstraints(ca=True, critical)")
    usage = _extension(ca, x509.KeyUsage)
    if usage is None or not usage.value.key_cert_sign:
        missing.append("KeyUsage(keyCertSign)")
    for kind in (x509.SubjectKeyIdentifier, x509.AuthorityKeyIdentifier):
        if _extension(ca, kind) is None:
            missing.append(kind.__name__)
    return missing


def ca_outlives(bundle: Bundle, now: dt.datetime, days: int) -> bool:
    """Whether `bundle`'s CA can sign a new serving certificate valid `days` from `now` (with a day to spare) and
    is readable with its key: then a rotation keeps it, so whoever trusts it (the webhook configurations' caBundle,
    other replicas still serving the previous certificate, trainer pods holding it for the status server) goes on
    trusting the new certificate."""
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
        key = serialization.load_pem_private_key(bundle.ca_key, password=None)
    except ValueError:
        return False
    if not isinstance(key, ec.EllipticCurvePrivateKey) or ca.public_key() != key.public_key():
        return False
    if ca_lacks(ca):
        return False
    return ca.not_valid_after_utc - now > dt.timedelta(days=days + 1)


def generate(hosts: list[str], now: dt.datetime, days: int = 365, ca_of: Bundle | None = None) -> Bundle:
    """A serving certificate for `hosts` (DNS names or IPs), signed by the CA of `ca_of` (a rotation: the CA
    stays, see `ca_outlives`) or by a fresh CA."""
    start = now - dt.timedelta(minutes=5)
    if ca_of is not None:
        ca = x509.load_pem_x509_certificate(ca_of.ca_cert)
        loaded = serialization.load_pem_private_key(ca_of.ca_key, password=None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        return _serving(hosts, start, now, days, ca, loaded, ca_of.ca_cert, ca_of.ca_key)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + dt.timedelta(days=days * 2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _serving(hosts, start, now, days, ca, ca_key, ca.public_bytes(serialization.Encoding.PEM), _pem_key(ca_key))


def _serving(
    hosts: list[str],
    start: dt.datetime,
    now: dt.datetime,
    days: int,
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_pem: bytes,
    ca_key_pem: bytes,
) -> Bundle:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(  # an ECDSA key signs the handshake; key encipherment is for RSA key transport only
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_id(ca), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Bundle(
        ca_cert=ca_pem, ca_key=ca_key_pem, cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key)
    )


def leaf_lacks(cert: x509.Certificate) -> list[str]:
    """What a strict verifier misses in the serving certificate `cert` (empty: nothing)."""
    wanted: tuple[type[x509.ExtensionType], ...] = (
        x509.BasicConstraints,
        x509.KeyUsage,
        x509.ExtendedKeyUsage,
        x509.SubjectAlternativeName,
        x509.SubjectKeyIdentifier,
        x509.AuthorityKeyIdentifier,
    )
    return [kind.__name__ for kind in wanted if _extension(cert, kind) is None]


def needs_rotation(bundle: Bundle, hosts: list[str], now: dt.datetime, before_days: int) -> bool:
    """Whether the stored bundle must be replaced: expiring, not for every host, or made before the certificates
    carried what strict verifiers require (then the CA is replaced too: `ca_outlives`)."""
    if bundle.not_after() - now < dt.timedelta(days=before_days) or not set(hosts) <= bundle.sans():
        return True
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    except ValueError:
        return True
    return bool(ca_lacks(ca) or leaf_lacks(x509.load_pem_x509_certificate(bundle.cert)))
