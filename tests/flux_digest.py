"""What a Flux ConfigMap and curve certificate are built from, read back out of them.

Upstream's scripts and ours are different texts that configure Flux the same way; the tests (unit tables and the
differential test) compare what the operator decides, i.e. these digests: the broker TOML (parsed), the host list,
the lead broker's hostname, the `flux run` flags and the `flux R encode` resource spec.
"""

import base64
import re
import tomllib
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _one(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text, re.MULTILINE)
    return found.group(1) if found else None


def broker_toml(init_sh: str) -> dict[str, Any] | None:
    """The heredoc written to broker.toml, parsed."""
    found = re.search(
        r"^[^\n]*broker\.toml[^\n]*<<\s*'?(\w+)'?[^\n]*\n(.*?)\n\1$|"
        r"^[^\n]*<<\s*'?(\w+)'?[^\n]*broker\.toml[^\n]*\n(.*?)\n\3$",
        init_sh,
        re.MULTILINE | re.DOTALL,
    )
    if not found:
        return None
    return tomllib.loads(found.group(2) if found.group(2) is not None else found.group(4))


def flux_configmap_digest(data: dict[str, str]) -> dict[str, Any]:
    init, entry = data.get("init.sh", ""), data.get("entrypoint.sh", "")
    flags = _one(r'^\s*flags="([^"]*)"', entry)
    return {
        "keys": sorted(data),
        "broker.toml": broker_toml(init),
        "hostlist": _one(r'^hosts="([^"]*)"', init),
        "lead host": _one(r'^mainHost="([^"]*)"', entry),
        "flux run flags": flags.split() if flags is not None else None,
        "resources": _one(r"flux R encode --hosts=\S+ ([^>\n]*?)\s*>", entry),
    }


def _z85_decode(text: str) -> bytes:
    out = b""
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + Z85.index(ch)
        out += value.to_bytes(4, "big")
    return out


def curve_cert_digest(b64: str) -> dict[str, Any]:
    """The certificate's name and whether its public key belongs to its secret key (the keys themselves follow
    the TrainJob uid)."""
    text = base64.b64decode(b64).decode()
    name = _one(r'^\s*name = "([^"]*)"', text)
    public, secret = _one(r'^\s*public-key = "([^"]*)"', text), _one(r'^\s*secret-key = "([^"]*)"', text)
    pair = False
    if public and secret and len(public) == len(secret) == 40:
        derived = X25519PrivateKey.from_private_bytes(_z85_decode(secret)).public_key().public_bytes_raw()
        pair = derived == _z85_decode(public)
    return {"name": name, "sections": re.findall(r"^(\w+)$", text, re.MULTILINE), "key pair": pair}
