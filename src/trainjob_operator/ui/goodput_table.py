"""`trainjob-operator goodput`: where the TrainJobs' time went (issue 35), read with your kubeconfig: per TrainJob the
seconds queued, starting, training, restarting and stalled up to now, the goodput, the accelerator-hours not
training, the time to the first progress report and the stalls; the last row sums them. What it prints is computed
in `view.goodput_table` (pure)."""

import argparse
import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from .. import flags, logs
from ..api import constants as c
from ..k8s import connection as k8s_config
from ..k8s.client import ApiError, Client
from . import view


def parser() -> argparse.ArgumentParser:
    p = flags.OneLineParser(
        prog="trainjob-operator goodput",
        description="where the TrainJobs' time went: queued, starting, training, restarting, stalled; the goodput",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("-n", "--namespace", help="only this namespace (default: every namespace you may list)")
    return p


async def table(args: argparse.Namespace) -> str:
    connection = k8s_config.load(args.kubeconfig, args.context)
    async with Client(connection, qps=20, burst=40) as client:
        trainjobs = await client.list(c.API_VERSION, c.TRAINJOB_KIND, args.namespace)
    return view.aligned(view.GOODPUT_COLUMNS, view.goodput_table(trainjobs, datetime.now(UTC)))


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    logs.configure("console", "WARNING")
    try:
        print(asyncio.run(table(args)))
    except k8s_config.ConfigError as err:
        print(f"trainjob-operator goodput: error: {err}")
        return 2
    except ApiError as err:
        print(f"trainjob-operator goodput: error: cannot list TrainJobs: {err}")
        return 1
    return 0
