"""Resolve a kubeconfig into plain credentials with the official `kubernetes` client's loader, as kubectl would:
exec credential plugins, auth providers, client certificates (files or data), tokens and token files,
insecure-skip-tls-verify, tls-server-name, proxy-url, merged $KUBECONFIG lists, the current context or `--context`.

Runs as a short-lived helper process (`python -m trainjob_operator.k8s.kubeconfig`) that prints one JSON object:
the operator itself never imports the `kubernetes` package (~60 MiB resident), and re-runs this when an exec
plugin's token expires or the API server answers 401. Exit code 2 with one line on stderr when it cannot.
"""

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

PLUGIN_TIMEOUT = 20
"""Seconds an exec credential plugin (or auth provider) may take."""


def _read(path: str | None) -> str | None:
    return Path(path).read_text() if path else None


class _Errors(logging.Handler):
    """The loader logs (instead of raising) when an exec plugin fails; keep those lines to report them."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def resolve(kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    from kubernetes.client import Configuration  # here: only this helper process pays for the import
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    errors = _Errors()
    logging.getLogger().addHandler(errors)
    # kubectl's rule: an empty $KUBECONFIG is no $KUBECONFIG (the client library would take it for a path)
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    if not any(Path(p).expanduser().is_file() for p in path.split(os.pathsep) if p):
        raise SystemExit(_fail(f"kubeconfig {path} does not exist; pass --kubeconfig PATH or set $KUBECONFIG"))
    try:
        if context is not None:
            names = [ctx.get("name") for ctx in kube_config.list_kube_config_contexts(path)[0]]
            if context not in names:
                raise SystemExit(
                    _fail(
                        f"kubeconfig {path}: no context {context!r} (it has: {', '.join(names)}); "
                        f"pass one of them to --context"
                    )
                )
        loader = kube_config._get_kube_config_loader(filename=path, active_context=context, persist_config=False)
        cfg = Configuration()

        def too_slow(*_: object) -> None:
            raise SystemExit(
                _fail(
                    f"kubeconfig {path}: no credentials within {PLUGIN_TIMEOUT} s (does its exec "
                    f"credential plugin wait for input?)"
                )
            )

        signal.signal(signal.SIGALRM, too_slow)
        signal.alarm(PLUGIN_TIMEOUT)  # counted from here: a slow import on a busy machine is not the plugin's fault
        loader.load_and_set(cfg)
        signal.alarm(0)
    except ConfigException as err:
        raise SystemExit(_fail(f"kubeconfig {path}: {err}")) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(_fail(f"kubeconfig {path}: {type(err).__name__}: {err}")) from None
    current = loader.current_context
    user = current.get("context", {}).get("user")
    # kubectl trims a token file's content; the Python client keeps its newline, which no header may carry.
    authorization = (cfg.api_key.get("authorization") or "").strip() or None
    raw_user = loader._user.value if loader._user is not None else {}
    if "exec" in raw_user and not authorization and not cfg.cert_file:
        detail = "; ".join(errors.lines) or "no token or client certificate in its output"
        raise SystemExit(
            _fail(
                f"kubeconfig {path}: the exec credential plugin of user {user!r} "
                f"({raw_user['exec'].get('command')}) failed: {detail}"
            )
        )
    expiry = getattr(loader, "expiry", None)
    return {
        "server": cfg.host,
        "context": current.get("name"),
        "user": user,
        "namespace": current.get("context", {}).get("namespace") or "default",
        "ca_pem": _read(cfg.ssl_ca_cert),
        "insecure": not cfg.verify_ssl,
        "tls_server_name": cfg.tls_server_name,
        "cert_pem": _read(cfg.cert_file),
        "key_pem": _read(cfg.key_file),
        "authorization": authorization,
        "expiry": expiry.isoformat() if expiry is not None else None,
        # The Python client does not use proxy-url; its loader parsed it all the same.
        "proxy_url": loader._cluster.safe_get("proxy-url"),
        "refreshable": bool({"exec", "auth-provider", "tokenFile"} & set(raw_user)),
        "source": f"context {current.get('name')} of {path}",
    }


def _fail(message: str) -> int:
    print(message.replace("\n", " "), file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainjob_operator.k8s.kubeconfig")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    args = p.parse_args(argv)
    json.dump(resolve(args.kubeconfig, args.context), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
