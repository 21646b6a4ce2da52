"""Who the UI serves (`ui/access.py`, issue 33), as tables: route names, the loopback rule, and the gate of each
request (read-only, Host, cross-site, token and cookie)."""

from dataclasses import dataclass, field

import pytest

from trainjob_operator.ui import access

TRAVERSAL = "x/../../../../api/v1/namespaces/kube-system/secrets/foo"


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        pytest.param("namespace", "team-a", True, id="a namespace"),
        pytest.param("name", "llm.v2-finetune", True, id="a TrainJob name may have dots (a DNS-1123 subdomain)"),
        pytest.param("pod", "llm-node-0-0-abcde", True, id="a pod name"),
        pytest.param("container", "node", True, id="a container name"),
        pytest.param("name", TRAVERSAL, False, id="the crafted traversal of issue 33"),
        pytest.param("name", "x%2F..%2Fsecrets", False, id="a percent-encoded slash"),
        pytest.param("name", "..", False, id="a parent segment"),
        pytest.param("pod", "a/b", False, id="a slash in a pod name"),
        pytest.param("namespace", "a.b", False, id="a dot in a namespace (a label, not a subdomain)"),
        pytest.param("namespace", "a" * 64, False, id="a namespace of 64 characters"),
        pytest.param("name", "a" * 254, False, id="a name of 254 characters"),
        pytest.param("name", "Upper", False, id="upper case"),
        pytest.param("name", "-leading", False, id="a leading dash"),
        pytest.param("container", "c?x=1", False, id="a query in a container name"),
        pytest.param("name", "", False, id="empty"),
        pytest.param("name", "a\n", False, id="a trailing newline (fullmatch, not match)"),
    ],
)
def test_route_names_are_the_kubernetes_names_they_must_be(kind: str, value: str, ok: bool) -> None:
    problem = access.name_problem(kind, value)
    assert (problem is None) == ok
    if problem is not None:
        assert problem.startswith(f"{kind}: ") and "DNS-1123" in problem


def test_the_first_bad_parameter_is_named() -> None:
    assert access.route_problem({"namespace": "ok", "name": "fine"}) is None
    assert (access.route_problem({"namespace": "ok", "name": "a/b", "other": "/"}) or "").startswith("name: 'a/b'")


@pytest.mark.parametrize(
    ("address", "allow", "refused"),
    [
        pytest.param("127.0.0.1", False, False, id="the loopback"),
        pytest.param("127.0.0.2", False, False, id="any of 127/8"),
        pytest.param("::1", False, False, id="IPv6 loopback"),
        pytest.param("[::1]", False, False, id="IPv6 loopback in brackets"),
        pytest.param("localhost", False, False, id="localhost"),
        pytest.param("0.0.0.0", False, True, id="every address: refused without the flag"),
        pytest.param("::", False, True, id="every IPv6 address: refused"),
        pytest.param("10.1.2.3", False, True, id="a LAN address: refused"),
        pytest.param("ui.example.com", False, True, id="a host name other than localhost: refused"),
        pytest.param("0.0.0.0", True, False, id="every address with --allow-remote"),
    ],
)
def test_a_non_loopback_address_needs_allow_remote(address: str, allow: bool, refused: bool) -> None:
    refusal = access.remote_refusal(address, allow)
    assert (refusal is not None) == refused
    if refusal is not None:
        assert f"--address {address} is not a loopback address" in refusal and "--allow-remote" in refusal


TOKEN, SESSION = "t" * 43, "s" * 43
HOSTS = {"127.0.0.1:8765", "localhost:8765"}


@dataclass(frozen=True)
class Gate:
    method: str = "GET"
    path: str = "/api/trainjobs"
    host: str = "127.0.0.1:8765"
    headers: dict[str, str] = field(default_factory=dict)
    query_token: str | None = None
    cookie: str | None = SESSION


GATES = [
    pytest.param(Gate(), access.PASS, id="the page's own request with the session cookie"),
    pytest.param(
        Gate(headers={"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8765"}),
        access.PASS,
        id="same-origin fetch with its Origin",
    ),
    pytest.param(
        Gate(path="/", cookie=None, query_token=TOKEN),
        access.AccessVerdict(303, location="/", set_cookie=True),
        id="the printed URL: the token exchanged for the cookie, the address bar cleaned",
    ),
    pytest.param(
        Gate(path="/api/trainjobs", cookie=None, query_token=TOKEN),
        access.AccessVerdict(0, set_cookie=True),
        id="the token on another path: answered, and the cookie set",
    ),
    pytest.param(
        Gate(cookie=None, headers={"Authorization": f"Bearer {TOKEN}"}), access.PASS, id="a script with the token"
    ),
    pytest.param(Gate(cookie=None), 401, id="no cookie, no token: 401"),
    pytest.param(Gate(path="/", cookie=None), 401, id="the page itself without the token: 401"),
    pytest.param(Gate(cookie="s" * 42), 401, id="a wrong cookie: 401"),
    pytest.param(Gate(cookie=TOKEN), 401, id="the token is not the cookie"),
    pytest.param(Gate(cookie=None, query_token="guess"), 401, id="a wrong token: 401"),
    pytest.param(Gate(cookie=None, headers={"Authorization": f"Basic {TOKEN}"}), 401, id="another scheme: 401"),
    pytest.param(Gate(method="POST"), 405, id="read-only: POST"),
    pytest.param(Gate(method="DELETE"), 405, id="read-only: DELETE"),
    pytest.param(Gate(host="evil.example:8765"), 403, id="a foreign Host (DNS rebinding)"),
    pytest.param(Gate(headers={"Sec-Fetch-Site": "cross-site"}), 403, id="a cross-site request"),
    pytest.param(Gate(headers={"Sec-Fetch-Site": "same-site"}), 403, id="a same-site request from another port"),
    pytest.param(Gate(headers={"Origin": "http://evil.example"}), 403, id="another Origin"),
    pytest.param(Gate(headers={"Origin": "null"}), 403, id="an opaque Origin (a sandboxed frame, a file)"),
    pytest.param(
        Gate(headers={"Origin": "http://localhost:8765"}), 403, id="localhost is another origin than 127.0.0.1"
    ),
    pytest.param(
        Gate(path="/", cookie=None, query_token=TOKEN, headers={"Sec-Fetch-Site": "cross-site"}),
        403,
        id="the token in a link from another site is refused too (a cross-site navigation)",
    ),
    pytest.param(Gate(headers={"Sec-Fetch-Site": "none"}), access.PASS, id="typed in the address bar"),
]


@pytest.mark.parametrize(("gate", "want"), GATES)
def test_the_gate_of_each_request(gate: Gate, want: access.AccessVerdict | int) -> None:
    got = access.decide(
        gate.method, gate.path, gate.host, gate.headers, gate.query_token, gate.cookie, TOKEN, SESSION, HOSTS
    )
    if isinstance(want, int):
        assert got.code == want and got.message and not got.set_cookie
    else:
        assert got == want


def test_no_host_list_accepts_any_host_but_still_not_another_origin() -> None:
    """`--any-host` (behind a proxy with its own name): any Host, but an Origin must still be that Host."""
    assert access.decide("GET", "/", "ui.corp:443", {}, None, SESSION, TOKEN, SESSION, ()) == access.PASS
    headers = {"Origin": "https://ui.corp:443"}
    assert access.decide("GET", "/", "ui.corp:443", headers, None, SESSION, TOKEN, SESSION, ()) == access.PASS
    headers = {"Origin": "https://evil.example"}
    assert access.decide("GET", "/", "ui.corp:443", headers, None, SESSION, TOKEN, SESSION, ()).code == 403
