"""kopf, imported without the Kubernetes client libraries it would load for nothing.

kopf imports `kubernetes.client` (and `kubernetes_asyncio.client`, `pykube`) when installed, only to recognise their
model objects passed to its adoption helpers; this operator passes plain dicts. The `kubernetes` package is installed
beside us (the SDK needs it), and its client models cost the operator 1-3 s of start-up and ~40 MiB of idle memory
(docs/performance.md). They are hidden while kopf is imported, and importable again afterwards.
"""

import sys

_HIDDEN = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "pykube",
    "pykube.objects",
)


_hidden = tuple(name for name in _HIDDEN if name not in sys.modules)
for _name in _hidden:
    sys.modules[_name] = None  # type: ignore[assignment]  # `import name` raises ImportError
try:
    import kopf
finally:
    for _name in _hidden:
        if sys.modules.get(_name, 0) is None:
            del sys.modules[_name]

__all__ = ["kopf"]
