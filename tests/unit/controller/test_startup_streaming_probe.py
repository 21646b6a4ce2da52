"""The start-up probe that decides whether the watches start from the API server's watch cache (streaming lists,
`sendInitialEvents`) or from paged LISTs: only a stream that ends its initial events with the end bookmark says yes;
a refusal, a stream without that bookmark, or an API server that never answers says no, quickly."""

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from trainjob_operator.controller import startup as startup_exec
from trainjob_operator.controller.main import parser, plan_of, settings_from
from trainjob_operator.k8s.client import ApiError
from trainjob_operator.runtime.startup import Plan


def line(event_type: str, annotations: dict[str, str] | None = None) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": "42"}
    if annotations is not None:
        meta["annotations"] = annotations
    return json.dumps({"type": event_type, "object": {"kind": "TrainJob", "metadata": meta}}).encode() + b"\n"


END = line("BOOKMARK", {"k8s.io/initial-events-end": "true"})
REFUSED = ApiError(
    422, "Invalid", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
)


INITIALISING = ApiError(429, "TooManyRequests", "storage is (re)initializing", retry_after=0.01)


class Server:
    """Answers the probe's watch with `errors` first, one per request, then `lines`, or hangs."""

    def __init__(
        self, lines: list[bytes] = (), error: BaseException | None = None, hang: bool = False, errors: int = 1
    ) -> None:
        self.lines, self.hang = list(lines), hang
        self.errors = [error] * errors if error is not None else []
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def stream_lines(
        self, path: str, params: Mapping[str, str] | None = None, read_timeout: float = 330
    ) -> AsyncIterator[bytes]:
        self.asked.append((path, dict(params or {})))
        if self.errors:
            raise self.errors.pop(0)
        for each in self.lines:
            yield each
        if self.hang:
            await asyncio.sleep(3600)


CASES = {
    "a server that streams ends the probe at the bookmark that closes the initial events": (Server([b"\n", END]), True),
    "a server that refuses sendInitialEvents (the WatchList gate off, before 1.34)": (Server(error=REFUSED), False),
    "a server that does not know the parameters answers a plain watch: its first bookmark is not the end one": (
        Server([line("BOOKMARK")]),
        False,
    ),
    "a stream that closes without any bookmark": (Server([]), False),
    "a connection that fails": (Server(error=OSError("connection reset")), False),
    "a line that is not JSON": (Server([b"<html>\n"]), False),
    "a watch cache still initialising (429) is waited out": (Server([END], error=INITIALISING, errors=3), True),
    "a watch cache that keeps initialising past the probe's deadline is a no": (
        Server([END], error=ApiError(429, "TooManyRequests", "storage is (re)initializing", retry_after=60)),
        False,
    ),
}


@pytest.mark.parametrize(("server", "want"), CASES.values(), ids=CASES.keys())
def test_streaming_probe(server: Server, want: bool) -> None:
    assert asyncio.run(startup_exec.streams_initial_events(server, Plan("ops"))) is want  # type: ignore[arg-type]


def test_a_server_that_never_answers_is_a_no_within_the_probes_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup_exec, "STREAMING_PROBE_TIMEOUT", 0.2)
    server = Server(hang=True)
    loop = asyncio.new_event_loop()
    try:
        started = loop.time()
        assert loop.run_until_complete(startup_exec.streams_initial_events(server, Plan("ops"))) is False  # type: ignore[arg-type]
        assert loop.time() - started < 5
    finally:
        loop.close()


def test_the_probe_asks_for_streamed_initial_events_of_trainjobs_that_match_nothing_where_it_may_watch() -> None:
    cluster_wide, namespaced = Server([END]), Server([END])
    asyncio.run(startup_exec.streams_initial_events(cluster_wide, Plan("ops")))  # type: ignore[arg-type]
    asyncio.run(startup_exec.streams_initial_events(namespaced, Plan("ops", namespaces=("team-a", "team-b"))))  # type: ignore[arg-type]
    path, params = cluster_wide.asked[0]
    assert path == "/apis/trainer.kubeflow.org/v1alpha1/trainjobs"
    assert namespaced.asked[0][0] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
    assert params == {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "labelSelector": "trainer.kubeflow.org/streaming-list-probe=none",
        "timeoutSeconds": "2",
    }


@pytest.mark.parametrize(
    ("argv", "config", "want"),
    [
        ([], None, True),
        (["--streaming-lists", "off"], None, False),
        ([], "client:\n  streaming_lists: 'off'\n", False),
        (["--streaming-lists", "auto"], "client:\n  streaming_lists: 'off'\n", True),
    ],
    ids=["asked by default", "off by flag", "off in the config file", "the flag wins over the file"],
)
def test_streaming_lists_setting_decides_whether_the_probe_is_asked(
    argv: list[str], config: str | None, want: bool, tmp_path: Path
) -> None:
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
        argv = [*argv, "--config", str(tmp_path / "config.yaml")]
    assert plan_of(settings_from(parser().parse_args(argv))).streaming_lists is want
