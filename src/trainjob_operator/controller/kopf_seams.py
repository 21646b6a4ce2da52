"""Every place the operator reaches into kopf's private modules, and the check that they are still there.

kopf is the framework the operator runs on; its public API covers handlers, settings and logins, not how a watch
stream fails, how a request is retried or how an event is decoded. Two private functions and one module reference
are replaced, and one private attribute is read:

- `kopf._cogs.clients.watching.continuous_watch` (one listing and its watch requests; kopf's `infinite_watch`
  calls it by its module-global name) is replaced by `resilient_watch`: a failed stream lists again instead of
  ending the operator, as client-go's reflector does, and watched objects go straight to the manager, skipping
  kopf's per-object workers (most of a restart's CPU).
- `kopf._cogs.clients.errors.check_response` (kopf's `api.request` calls it as `errors.check_response` after each
  response) is replaced by `retry_after_on_server_errors`: a 5xx with `Retry-After` is waited out as kopf waits out
  a 429's.
- `kopf._cogs.clients.errors.APIError._payload` (the Status as the server answered it) is read by
  `retry_after_on_server_errors`, to raise it again as kopf's 429 class.
- `kopf._cogs.clients.api.json` (the module `api.stream` decodes each watch event with, `json.loads` per line) is
  replaced by `StreamDecoder`: orjson (`codec.jsontext.loads`), 2.6 times as fast as the standard library on a
  kwok pod's event (5.9 KB: 15 µs against 39 µs), with the standard library for what orjson refuses (an integer
  past 64 bits), so a stream decodes as before. Decoding the pods' events was a fifth of a restart's CPU and 17 % of
  a huge TrainJob's start (docs/performance.md).

One public function is called with an argument shaped for it: `kopf.run_tasks(tasks, ignored=ForeignTasks())`.
kopf's stop treats every task created after its start as its own (its docstring says so): it waits 5 s for them,
then cancels them. In this process those are also the webhook, status and metrics servers' connection tasks: a
kept-alive connection's task was cancelled while its socket stayed open, so the API server's next call on it hung
until the server closed and failed ("EOF", "use of closed network connection": a `helm upgrade` under applies,
tests/realnode/test_chart_lifecycle.py). `ForeignTasks` counts as ignored every task whose coroutine is not kopf's
own code; kopf's tasks are stopped as before.

The login handler hands kopf the operator's client as an aiohttp session (`kopf.AiohttpSession`, public), so kopf's
requests go out as the client's do (`k8s.client.Client.as_session`: aiohttp's public client middlewares; it sets a
request's `server_hostname`); `missing()` checks that aiohttp has both.

Checked against kopf `CHECKED_AGAINST`. `install()` runs `missing()` first: when a kopf release renames, re-signs or
stops calling one of them through its module, the operator stops at start-up with one line saying which (it would
otherwise run with caches that never count as synced, and reconcile nothing, silently). The contract tests in
`tests/unit/controller/test_kopf_seams.py` run kopf's real watch loop and request path against a local fake API server and fail
if a seam stops being called. docs/architecture.md lists these seams and every other library's private behaviour the
operator relies on.

Which kinds go straight to the manager is per operator run: a `Routes` instance, handed to kopf's watch tasks in a
context variable that `routed()` sets around `kopf.operator` (kopf's tasks inherit the context they are created in).
Nothing here is a process-wide registry; the replaced functions themselves hold no state.
"""

import asyncio
import contextlib
import importlib.metadata
import inspect
import json
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .. import logs
from ..codec import jsontext
from ..k8s.client import RETRY_AFTER_CAP, parse_retry_after
from ._kopf import kopf

log = logs.get("trainjob_operator.kopf")

CHECKED_AGAINST = "1.45.2"
"""The kopf release these seams were read in and contract-tested against."""

KOPF_VERSION = importlib.metadata.version("kopf")
"""The kopf release installed."""

WATCH_RESTART_PAUSE = 1.0
"""Seconds between a watch stream that failed on the API server's side and its next listing (no spinning)."""

Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Route:
    """Where one watched kind's stream goes (see `resilient_watch`)."""

    event: Sink
    listed: Callable[[str | None], None]
    """Called with the namespace (None: cluster-wide) once a listing's objects have all gone to `event`."""


@dataclass(frozen=True)
class Routes:
    """(API group, plural) → the manager's handlers, called straight from kopf's watch streams, for one run."""

    by_resource: Mapping[tuple[str, str], Route] = field(default_factory=dict)

    def of(self, resource: Any) -> Route | None:
        return self.by_resource.get((getattr(resource, "group", ""), getattr(resource, "plural", "")))


_routes: ContextVar[Routes | None] = ContextVar("trainjob_operator_kopf_routes", default=None)


@contextlib.contextmanager
def routed(routes: Routes) -> Iterator[None]:
    """kopf's watch tasks started inside this block send the routed kinds straight to their handlers."""
    token = _routes.set(routes)
    try:
        yield
    finally:
        _routes.reset(token)


# --- the seams ---------------------------------------------------------------------------------------------------


def deliver(sink: Sink, event: dict[str, Any], resource: Any) -> None:
    """One event to its handler; a handler that raises loses that event, never the watch (as kopf did)."""
    try:
        sink(event)
    except Exception as err:
        log.error("watch event handler failed", resource=str(resource), exc_info=err, **logs.error_fields(err))


def _stream_failures() -> tuple[type[BaseException], ...]:
    from kopf._cogs.clients import errors, watching

    return (
        errors.APIServerError,
        errors.APIClientError,
        watching.WatchingError,  # an ERROR event in the stream other than 410 (kopf restarts on 410 itself)
        aiohttp.ClientError,
        TimeoutError,
        json.JSONDecodeError,  # a stream cut mid-line: kopf decodes what is left as a last line
        UnicodeDecodeError,  # the same, cut inside a character
    )


def ends_the_operator(err: BaseException) -> bool:
    """A request refused for what it asks (400, 401 after kopf's re-login, 404: the CRD is gone, 422) still stops
    the operator: listing again cannot help, and the restart's start-up checks say what is missing. The server's
    failures, throttling, 403 (seen during upgrades), 410 and any failure of the stream itself list again."""
    from kopf._cogs.clients import errors

    status = getattr(err, "status", None) or 0
    return isinstance(err, errors.APIClientError) and status < 500 and status not in (403, 410, 429)


def resilient_watch(original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """Replaces kopf's `continuous_watch` (one listing and the watch requests that follow it).

    Survival: kopf lists again on a 410 Gone ERROR event, but any other ERROR event in the stream (kopf raises
    `WatchingError`: "other watch errors should be fatal"), a 410 answered as the watch request's HTTP status, a 5xx,
    connection error or timeout that outlasts kopf's own retries, or a stream cut mid-line (kopf decodes the rest as
    a last line) escaped its watcher and ended the whole operator (found by the hostile-network scenario, issue 17).
    Those end this stream quietly instead (one warning): kopf's `infinite_watch` lists again and watches on, after
    `WATCH_RESTART_PAUSE` or the Retry-After asked for, as client-go's reflector lists again after any watch error.
    What `ends_the_operator` still propagates.

    Routing: the objects of a kind with a `Route` go to its handler right here, in stream order, and not on to kopf:
    kopf would start a worker task per object and build its causes, kwargs and loggers for each event, which was
    most of a restart's CPU with 5,000 TrainJobs (docs/performance.md). kopf still lists, watches, logs in and
    retries; only its listing-over bookmark goes on to it, after `Route.listed` (the caches' sync marker)."""
    from kopf._cogs.clients.watching import Bookmark

    failures = _stream_failures()

    async def watch(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        resource = kwargs.get("resource")
        routes = _routes.get()
        route = routes.of(resource) if routes is not None else None
        try:
            async for event in original(*args, **kwargs):
                if route is not None:
                    if isinstance(event, dict):
                        if event.get("type") != "BOOKMARK":
                            deliver(route.event, event, resource)
                        continue
                    if event is Bookmark.LISTED:  # every object of the listing went to `route.event` above
                        route.listed(kwargs.get("namespace"))
                yield event
        except failures as err:
            if ends_the_operator(err):
                raise
            log.warning("watch stream failed; listing again", resource=str(resource or ""), **logs.error_fields(err))
            await asyncio.sleep(max(WATCH_RESTART_PAUSE, kopf_retry_after(err)))

    watch.trainjob_seam = "resilient_watch"  # type: ignore[attr-defined]
    watch.__wrapped__ = original  # type: ignore[attr-defined]
    return watch


class StreamDecoder:
    """Stands in for the `json` module in kopf's `api` module, whose `stream` calls `json.loads` on each watch event's
    line (see the module's docstring). What orjson refuses is decoded by the standard library, which raises the same
    `json.JSONDecodeError` as before for a line that is not JSON (a stream cut mid-line: `resilient_watch`)."""

    trainjob_seam = "stream_decoder"
    JSONDecodeError = json.JSONDecodeError

    @staticmethod
    def loads(text: str | bytes) -> Any:
        try:
            return jsontext.loads(text)
        except ValueError:  # orjson's JSONDecodeError is one; so are its integers past 64 bits
            return json.loads(text)


def kopf_retry_after(err: BaseException) -> float:
    """The seconds a kopf API error's `Retry-After` asks for (0 without one)."""
    headers = getattr(err, "headers", None) or {}
    return min(parse_retry_after(headers.get("Retry-After")) or 0.0, RETRY_AFTER_CAP)


def retry_after_on_server_errors(original: Callable[..., Any]) -> Callable[..., Any]:
    """Replaces kopf's `check_response`: a 5xx that carries `Retry-After` is raised as kopf's 429 error class.

    kopf's request loop honours Retry-After only for 429 (`APITooManyRequestsError`) and retries any 5xx after its
    own `error_backoffs` (1 s first); client-go waits as asked for any 5xx too (`checkWait` in rest/request.go). The
    full-size hostile network caught kopf listing again 1 s after a 503 that asked for 2-3 s (issue 17). The status
    stays the server's, so `resilient_watch` still treats it as the server's failure. Reads kopf's private
    `APIError._payload`: the Status as it was answered (the public `message`/`details` are views of it)."""
    from kopf._cogs.clients import errors

    async def check_response(response: Any) -> None:
        try:
            await original(response)
        except errors.APIServerError as err:
            if not kopf_retry_after(err):
                raise
            payload = getattr(err, "_payload", None)
            raise errors.APITooManyRequestsError(payload, status=err.status, headers=err.headers) from err

    check_response.trainjob_seam = "retry_after_on_server_errors"  # type: ignore[attr-defined]
    check_response.__wrapped__ = original  # type: ignore[attr-defined]
    return check_response


_KOPF_DIR = os.path.dirname(inspect.getfile(kopf)) + os.sep
"""Where kopf's own code lives: a task whose coroutine is defined below it is kopf's."""


class ForeignTasks(Collection[asyncio.Task[Any]]):
    """The tasks `kopf.run_tasks` must leave alone: every task whose coroutine is not defined in kopf's package.
    Only membership is asked (`task not in ignored`); it holds no tasks itself."""

    def __contains__(self, task: object) -> bool:
        return not is_kopfs(task)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(())

    def __len__(self) -> int:
        return 0


def is_kopfs(task: object) -> bool:
    """The task runs a coroutine written in kopf's package (kopf's root tasks, its workers and their helpers)."""
    get_coro = getattr(task, "get_coro", None)
    code = getattr(get_coro() if get_coro else None, "cr_code", None)
    return code is not None and code.co_filename.startswith(_KOPF_DIR)


# --- checked at start-up -----------------------------------------------------------------------------------------


class SeamsMissing(Exception):
    """kopf (or aiohttp) no longer has what the operator relies on; the message is the one line to exit with."""


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _calls(fn: Any, *names: str) -> bool:
    """`fn`'s own code looks `names` up (globals or attributes) when it runs: a replaced module attribute is what
    it calls."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code is not None and all(name in code.co_names for name in names)


def _original(fn: Any) -> Any:
    """kopf's own function under our replacement (the check looks at what kopf ships)."""
    return fn.__wrapped__ if getattr(fn, "trainjob_seam", None) else fn


def missing() -> list[str]:
    """What is not as the seams expect, one phrase each (empty: all in place)."""
    try:
        from kopf._cogs.clients import api, errors, watching
    except ImportError as err:
        return [f"kopf's private client modules are gone ({err})"]
    problems: list[str] = []
    continuous = _original(getattr(watching, "continuous_watch", None))
    if not inspect.isasyncgenfunction(continuous):
        problems.append("kopf._cogs.clients.watching.continuous_watch is not an async generator function")
    elif _params(continuous) != ["settings", "resource", "namespace", "operator_pause_waiter"]:
        problems.append(f"kopf's continuous_watch takes ({', '.join(_params(continuous))})")
    if not _calls(getattr(watching, "infinite_watch", None), "continuous_watch"):
        problems.append("kopf's infinite_watch no longer calls continuous_watch through its module")
    if getattr(getattr(watching, "Bookmark", None), "LISTED", None) is None:
        problems.append("kopf's watching.Bookmark.LISTED (the listing-over marker) is gone")
    if not isinstance(getattr(watching, "WatchingError", None), type):
        problems.append("kopf's watching.WatchingError is gone")
    check = _original(getattr(errors, "check_response", None))
    if not inspect.iscoroutinefunction(check) or _params(check) != ["response"]:
        problems.append("kopf._cogs.clients.errors.check_response is not `async def check_response(response)`")
    if not _calls(getattr(api, "stream", None), "json", "loads"):
        problems.append("kopf's api.stream no longer decodes events with json.loads through its module")
    if not _calls(getattr(api, "request", None), "errors", "check_response"):
        problems.append("kopf's api.request no longer calls errors.check_response")
    classes = ("APIError", "APIClientError", "APIServerError", "APITooManyRequestsError")
    if not all(isinstance(getattr(errors, name, None), type) for name in classes):
        problems.append(f"kopf's error classes changed (expected {', '.join(classes)})")
    elif "_payload" not in vars(errors.APIError("m", status=503, headers={})):
        problems.append("kopf's APIError no longer keeps the answered Status in _payload")
    if "ignored" not in _params(kopf.run_tasks) or not inspect.iscoroutinefunction(kopf.spawn_tasks):
        problems.append("kopf.run_tasks(tasks, ignored=...) after kopf.spawn_tasks(...) is gone")
    if not hasattr(kopf, "AiohttpSession"):
        problems.append("kopf.AiohttpSession (a login handler's own aiohttp session) is gone")
    if "middlewares" not in _params(aiohttp.ClientSession):
        problems.append(f"aiohttp {aiohttp.__version__} has no client middlewares (3.12 or newer needed)")
    if "server_hostname" not in _params(aiohttp.ClientRequest):
        problems.append(f"aiohttp {aiohttp.__version__} requests have no server_hostname")
    return problems


def install() -> None:
    """Check the seams, then put the replacements into kopf (once per process; the replacements hold no state).
    Raises SeamsMissing with the one line to exit with."""
    problems = missing()
    if problems:
        raise SeamsMissing(
            f"kopf {KOPF_VERSION} lacks what the operator relies on (checked against kopf {CHECKED_AGAINST}): "
            f"{'; '.join(problems)}; install kopf=={CHECKED_AGAINST} (docs/architecture.md, 'Other libraries' "
            "private behaviour')"
        )
    if KOPF_VERSION != CHECKED_AGAINST:
        log.warning(
            "kopf is not the release its seams were checked against",
            kopf=KOPF_VERSION,
            checked_against=CHECKED_AGAINST,
        )
    from kopf._cogs.clients import api, errors, watching

    if not getattr(api.json, "trainjob_seam", None):  # type: ignore[attr-defined]
        api.json = StreamDecoder()  # type: ignore[attr-defined,assignment]
    if not getattr(watching.continuous_watch, "trainjob_seam", None):
        watching.continuous_watch = resilient_watch(watching.continuous_watch)
    if not getattr(errors.check_response, "trainjob_seam", None):
        errors.check_response = retry_after_on_server_errors(errors.check_response)


def installed() -> bool:
    from kopf._cogs.clients import api, errors, watching

    return all(
        getattr(seam, "trainjob_seam", None)
        for seam in (watching.continuous_watch, errors.check_response, api.json)  # type: ignore[attr-defined]
    )


__all__ = [
    "CHECKED_AGAINST",
    "ForeignTasks",
    "Route",
    "Routes",
    "SeamsMissing",
    "StreamDecoder",
    "install",
    "kopf_retry_after",
    "missing",
    "resilient_watch",
    "retry_after_on_server_errors",
    "routed",
]
