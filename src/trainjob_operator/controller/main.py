"""`trainjob-operator run`: the composition root. It builds the one RESTMapper, client and Manager of this process,
starts the runnables of `components.of` around kopf's watches, and stops them in reverse order whatever ended the
watches. The parts live in their own modules: `manager.py` (caches, queue, health), `components.py` (what runs),
`runnable.py` (the start/stop protocol), `arguments.py` and `settings.py` (flags over the config file)."""

import asyncio
import gc
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .. import config as config_module
from .. import logs
from ..config import OperatorConfig
from ..k8s import connection as k8s_config
from ..k8s.client import Client
from ..metrics import Metrics
from ..runtime.errors import printable
from ..runtime.pipeline import Framework
from ..runtime.registry import gated
from . import components, kopf_adapter, kopf_seams
from .arguments import parser
from .manager import Manager, supervise
from .preflight import StartupError
from .runnable import Runnables
from .settings import plan_of, settings_from

log = logs.get("trainjob_operator.manager")


async def serve(cfg: OperatorConfig, kubeconfig: str | None, context: str | None = None) -> int:
    """Run until stopped; 0 on a clean stop, 1 when a background task died. Raises StartupError."""
    gc.freeze()  # the modules' objects live as long as the process: the collector stops walking them
    asyncio.get_running_loop().set_exception_handler(loop_error)
    try:
        kopf_seams.install()
    except kopf_seams.SeamsMissing as err:
        raise StartupError(str(err)) from None
    connection = k8s_config.load(kubeconfig, context)  # nothing else runs yet: blocking for the helper is fine
    metrics = Metrics()
    framework = Framework.from_registry(gated(cfg.feature_gates))
    mapper = components.rest_mapper(framework)
    async with Client(
        connection, cfg.client.qps, cfg.client.burst, on_request=metrics.record_request, mapper=mapper
    ) as client:
        manager = Manager(cfg, client, metrics, framework=framework)
        watches_started = asyncio.Event()
        async with Runnables(components.of(manager, connection, watches_started)):
            log.info(
                "operator starting",
                namespaces=cfg.namespaces or "all",
                webhooks=cfg.webhook.enabled,
                status_server=cfg.status_server.enabled,
                leader_election=cfg.leader_election.enabled,
                qps=cfg.client.qps,
                burst=cfg.client.burst,
            )
            assert manager.facts is not None  # the preflight runnable ran
            try:
                await kopf_adapter.run(
                    manager,
                    streaming_lists=manager.facts.streams_initial_events,
                    namespaces=cfg.namespaces,
                    ready=watches_started,
                    stop=manager.stop,
                )
            finally:
                manager.stop.set()  # whatever ended the watches ends the rest: the runnables stop on the way out
    if manager.fatal is not None:
        raise StartupError(manager.fatal)
    return 1 if manager.dead else 0


def loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Errors asyncio itself reports (an async generator of a watch failing to close at shutdown, a callback that
    raised): one line with the error's type and text, not a traceback. Silent once the exit line is printed: a task
    kopf cut short on a fatal start-up problem (its API discovery mid-request, issue 27 saw it once in six starts)
    is only collected then, and the exit line must stay the last thing said."""
    if loop.is_closed():  # `serve` has returned (the exit line, if any, comes after it): a task collected now is moot
        return
    err = context.get("exception")
    fields = logs.error_fields(err) if isinstance(err, BaseException) else {}
    log.error("event loop error", message=str(context.get("message", ""))[:300], **fields)


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        cfg = settings_from(args)
    except config_module.ConfigFileError as err:
        return _exit(str(err), 2)
    except ValidationError as err:  # a flag's value the settings refuse
        return _exit(config_module.problems(err), 2)
    logs.configure(cfg.log_format, cfg.log_level)
    try:
        return asyncio.run(serve(cfg, args.kubeconfig, args.context))
    except k8s_config.ConfigError as err:
        return _exit(str(err), 2)
    except StartupError as err:
        return _exit(str(err), 3)
    except KeyboardInterrupt:
        return 0


def _exit(line: str, code: int) -> int:
    """The one line that says why the operator cannot start (exit 2: flags, config or kubeconfig; 3: the cluster)."""
    print(printable(f"trainjob-operator: error: {line}"), file=sys.stderr, flush=True)
    return code


# Manager, parser, plan_of, settings_from and supervise are re-exported for existing callers;
# new code imports them from their own modules.
__all__ = ["Manager", "parser", "plan_of", "run", "serve", "settings_from", "supervise"]
