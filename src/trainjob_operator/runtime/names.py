"""Kubernetes name rules and their messages, as apimachinery words them."""

import re
from typing import Final

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FORMAT: Final = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
DNS1123_SUBDOMAIN: Final = re.compile(DNS1123_SUBDOMAIN_FORMAT)
DNS1123_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{DNS1123_SUBDOMAIN_FORMAT}')"
)
HTTP_PATH_FORMAT: Final = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
HTTP_PATH: Final = re.compile(HTTP_PATH_FORMAT)
INVALID_PATH_MESSAGE: Final = f"Invalid path (regex used for validation is '{HTTP_PATH_FORMAT}')"


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and DNS1123_SUBDOMAIN.fullmatch(value) is not None


# corev1.Container's JSON field order, for values printed the way Go serializes them.
CONTAINER_FIELD_ORDER: Final = (
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "restartPolicyRules",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
)


def go_container(container: dict[str, object]) -> dict[str, object]:
    """A container as Go's encoding/json writes corev1.Container: its field order, `resources` always present."""
    filled: dict[str, object] = {"resources": {}, **container}
    ordered: dict[str, object] = {k: filled[k] for k in CONTAINER_FIELD_ORDER if k in filled}
    return {**ordered, **{k: v for k, v in filled.items() if k not in ordered}}
