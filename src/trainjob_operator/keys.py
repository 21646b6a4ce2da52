"""The shell's key source: fresh ECDSA P-521 key pairs for the MPI SSH Secret (upstream's choice, despite the
`id_rsa` file names) and fresh X25519 secrets for the Flux CURVE certificate (upstream derives that one from the
TrainJob uid, which anyone who can read the TrainJob knows; docs/compatibility.md). The pure core never draws
entropy; it gets this through `Observed.keys`."""

from .runtime.observed import SSHKeyPair


def generate_ssh_key() -> SSHKeyPair:
    # imported when a key is drawn: only a build that creates an MPI key Secret needs cryptography (the offline CLI's
    # start-up does not)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return SSHKeyPair(private_pem=private_pem, public_openssh=public + b"\n")


class FreshKeys:
    """A `KeySource` that draws a new key on every call (only builds that create a key Secret call it)."""

    def ssh_key(self) -> SSHKeyPair:
        return generate_ssh_key()

    def curve_secret(self) -> bytes:
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # as above: only Flux builds

        return X25519PrivateKey.generate().private_bytes_raw()


FRESH_KEYS = FreshKeys()
