"""The flags of `trainjob-operator run` (argparse); `settings.py` merges them over the config file."""

import argparse
import os

from .. import flags


def parser() -> argparse.ArgumentParser:
    p = flags.OneLineParser(prog="trainjob-operator run", description="run the TrainJob operator")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use (default: its current-context)")
    p.add_argument(
        "--namespace", action="append", default=None, help="namespace to watch; repeatable (default: all namespaces)"
    )
    p.add_argument("--config", metavar="FILE", help="operator config file (YAML); flags override its values")
    p.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="json: one JSON object per line (default); console: for people (colours only on a terminal)",
    )
    p.add_argument(
        "--log-level",
        type=flags.log_level,
        metavar="LEVEL",
        help=f"one of {', '.join(flags.LOG_LEVELS)} (default: info)",
    )
    p.add_argument("--health-port", type=flags.port, metavar="PORT", help="port of /healthz, /readyz and /metrics")
    p.add_argument("--webhook-port", type=flags.port, metavar="PORT", help="port of the admission webhooks (TLS)")
    p.add_argument("--no-webhooks", action="store_true", help="do not serve admission webhooks")
    p.add_argument(
        "--status-port", type=flags.port, metavar="PORT", help="port of the TrainJob status server (progress from pods)"
    )
    p.add_argument(
        "--no-status-server",
        action="store_true",
        help="do not serve progress updates from trainer pods (nothing is injected into them)",
    )
    p.add_argument(
        "--no-leader-election", action="store_true", help="run without a Lease (only one replica may run then)"
    )
    p.add_argument(
        "--qps", type=float, help="API requests per second the client sends at most, per resource type (0: no limit)"
    )
    p.add_argument("--burst", type=int, help="API requests the client may send at once above --qps (0: no limit)")
    p.add_argument(
        "--streaming-lists",
        choices=("auto", "off"),
        help="auto: watches start from the API server's watch cache when it streams initial events; off: paged LISTs",
    )
    p.add_argument("--concurrency", type=flags.positive_int, metavar="N", help="TrainJobs reconciled at once")
    p.add_argument(
        "--operator-namespace",
        default=os.environ.get("POD_NAMESPACE"),
        metavar="NAMESPACE",
        help="where the operator keeps its Lease, webhook Secret and the kubeflow-trainer-public ConfigMap "
        "(default: $POD_NAMESPACE, else kubeflow-system)",
    )
    return p


__all__ = ["parser"]
