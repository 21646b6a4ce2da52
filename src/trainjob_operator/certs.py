"""The webhook CA and serving certificate: generated here, stored by the controller in a Secret."""

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_NAME = "trainjob-operator-ca"


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
                digital_signature=True,
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
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Bundle(
        ca_cert=ca_pem, ca_key=ca_key_pem, cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key)
    )


def needs_rotation(bundle: Bundle, hosts: list[str], now: dt.datetime, before_days: int) -> bool:
    return bundle.not_after() - now < dt.timedelta(days=before_days) or not set(hosts) <= bundle.sans()
