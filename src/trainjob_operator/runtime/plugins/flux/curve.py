"""The CURVE certificate of a Flux cluster: an X25519 key pair whose secret comes from the key source
(`Observed.keys`, random; upstream derives it from the TrainJob uid, which anyone who reads the TrainJob knows), written
once as the ZeroMQ certificate file `flux keygen` writes."""

from typing import Final

Z85_ALPHABET: Final = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's Z85 (RFC 32/Z85): four bytes, big-endian, to five characters."""
    if len(data) % 4:
        raise ValueError("Z85 needs a multiple of 4 bytes")
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out.extend(Z85_ALPHABET[value // 85**k % 85] for k in (4, 3, 2, 1, 0))
    return "".join(out)


def curve_keys(secret: bytes) -> tuple[str, str]:
    """(public, secret) Z85 keys of the X25519 pair whose secret key is `secret` (32 bytes)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # only a Flux build needs it

    public = X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()
    return z85(public), z85(secret)


def curve_certificate(name: str, secret_key: bytes) -> str:
    """A ZeroMQ CURVE secret certificate (the ZPL file `flux keygen` writes) for the brokers of one TrainJob."""
    public, secret = curve_keys(secret_key)
    return (
        "#   ZeroMQ CURVE secret certificate of a Flux cluster, written by trainjob-operator\n"
        "\n"
        "metadata\n"
        f'    name = "{name}"\n'
        "curve\n"
        f'    public-key = "{public}"\n'
        f'    secret-key = "{secret}"\n'
    )
