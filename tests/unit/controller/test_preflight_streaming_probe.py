"""The start-up probe that decides whether the watches start from the API server's watch cache (streaming lists,
`sendInitialEvents`) or from paged LISTs: only a stream that ends its initial events with the end bookmark says yes;
a refusal, a stream without that bookmark, or an API server that never answers says no, quickly."""

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fake_client import FakeClient
from trainjob_operator.controller import preflight as startup_exec
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


def server(
    lines: Sequence[bytes] = (), error: BaseException | None = None, hang: bool = False, errors: int = 1
) -> FakeClient:
    """Answers the probe's watch with `error` first, `errors` times, then `lines`, then hangs when `hang`."""
    client = FakeClient(lines=list(lines), stream_hangs=hang)
    if error is not None:
        client.fail("stream", error, times=errors)
    return client


def asked(client: FakeClient) -> list[tuple[str, dict[str, str]]]:
    """The watches the probe opened: (path, query)."""
    return [(call[1], call[2]) for call in client.calls if call[0] == "stream"]


CASES = {
    "a server that streams ends the probe at the bookmark that closes the initial events": (server([b"\n", END]), True),
    "a server that refuses sendInitialEvents (the WatchList gate off, before 1.34)": (server(error=REFUSED), False),
    "a server that does not know the parameters answers a plain watch: its first bookmark is not the end one": (
        server([line("BOOKMARK")]),
        False,
    ),
    "a stream that closes without any bookmark": (server([]), False),
    "a connection that fails": (server(error=OSError("connection reset")), False),
    "a line that is not JSON": (server([b"<html>\n"]), False),
    "a watch cache still initialising (429) is waited out": (server([END], error=INITIALISING, errors=3), True),
    "a watch cache that keeps initialising past the probe's deadline is a no": (
        server([END], error=ApiError(429, "TooManyRequests", "storage is (re)initializing", retry_after=60)),
        False,
    ),
}


@pytest.mark.parametrize(("server", "want"), CASES.values(), ids=CASES.keys())
def test_streaming_probe(server: FakeClient, want: bool) -> None:
    assert asyncio.run(startup_exec.streams_initial_events(server, Plan("ops"))) is want


def test_a_server_that_never_answers_is_a_no_within_the_probes_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup_exec, "STREAMING_PROBE_TIMEOUT", 0.2)
    silent = server(hang=True)
    loop = asyncio.new_event_loop()
    try:
        started = loop.time()
        assert loop.run_until_complete(startup_exec.streams_initial_events(silent, Plan("ops"))) is False
        assert loop.time() - started < 5
    finally:
        loop.close()


def test_the_probe_asks_for_streamed_initial_events_of_trainjobs_that_match_nothing_where_it_may_watch() -> None:
    cluster_wide, namespaced = server([END]), server([END])
    asyncio.run(startup_exec.streams_initial_events(cluster_wide, Plan("ops")))
    asyncio.run(startup_exec.streams_initial_events(namespaced, Plan("ops", namespaces=("team-a", "team-b"))))
    path, params = asked(cluster_wide)[0]
    assert path == "/apis/trainer.kubeflow.org/v1alpha1/trainjobs"
    assert asked(namespaced)[0][0] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
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
