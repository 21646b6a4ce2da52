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
            str(v) for v in ext.get_values_for_type(x509.IPAddress)}


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def generate(hosts: list[str], now: dt.datetime, days: int = 365) -> Bundle:
    """A fresh CA and a serving certificate for `hosts` (DNS names or IPs) signed by it."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    start = now - dt.timedelta(minutes=5)
    ca = (x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(now + dt.timedelta(days=days * 2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return Bundle(ca_cert=ca.public_bytes(serialization.Encoding.PEM), ca_key=_pem_key(ca_key),
                  cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key))


def needs_rotation(bundle: Bundle, hosts: list[str], now: dt.datetime, before_days: int) -> bool:
    return bundle.not_after() - now < dt.timedelta(days=before_days) or not set(hosts) <= bundle.sans()
