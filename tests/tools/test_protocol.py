"""Bad input at the protocol level: a clear error, and nothing half-written."""

import json

import httpx2
import pytest

from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


def raw(agent, body: bytes, content_type: str = "application/json"):
    return httpx2.post(
        agent.url,
        content=body,
        headers={"authorization": f"Bearer {agent.token}", "content-type": content_type, "accept": ACCEPT},
        timeout=30,
    )


def call(agent, name: str, arguments) -> dict:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = raw(agent, json.dumps(body).encode())
    assert response.status_code == 200
    return response.json()


@pytest.fixture(autouse=True)
def nothing_written():
    yield
    assert not ToolCall.objects.exists()


def test_malformed_json_is_a_parse_error(agent):
    response = raw(agent, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_a_non_request_is_rejected(agent):
    response = raw(agent, b"[1, 2, 3]")
    assert response.status_code == 400
    assert response.json()["error"]["code"] in (-32600, -32602)


def test_wrong_content_type_is_rejected(agent):
    assert raw(agent, b"{}", content_type="text/plain").status_code == 400


def test_unknown_tool(agent):
    result = call(agent, "delete_everything", {})["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Unknown tool: delete_everything"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("send_file", {"path": 5}, "Input should be a valid string"),
        ("send_file", {}, "path"),
        ("send_file", {"path": ""}, "at least 1 character"),
        ("send_file", {"path": "a.txt", "comment": ["x"]}, "comment"),
        ("post_card", {"spec": "card"}, "spec"),
        ("post_card", {"spec": {"root": 1, "elements": {}}}, "root"),
        ("post_card", {"spec": {"root": "r", "elements": []}}, "elements"),
        ("post_card", {"spec": {"root": "r", "elements": {}, "bogus": 1}}, "bogus"),
    ],
)
def test_wrong_types_are_tool_errors(agent, name, arguments, expected):
    result = call(agent, name, arguments)["result"]
    assert result["isError"] is True
    assert expected in result["content"][0]["text"]


def test_a_body_over_4_mib_is_refused_before_parsing(agent):
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "send_file", "arguments": {"path": "x" * (5 << 20)}},
        }
    ).encode()
    assert raw(agent, body).status_code == 413


def test_too_many_card_elements_is_refused_without_work(agent):
    elements = {f"e{i}": {"type": "Divider"} for i in range(600)}
    elements["r"] = {"type": "Card", "children": list(elements)}
    result = call(agent, "post_card", {"spec": {"root": "r", "elements": elements}})["result"]
    assert result["isError"] is True
    assert "at most 500 elements (got 601)" in result["content"][0]["text"]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_answered(agent, method):
    """Stateless JSON: a GET would open an event stream that never closes."""
    response = httpx2.request(
        method, agent.url, headers={"authorization": f"Bearer {agent.token}", "accept": ACCEPT}, timeout=5
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_a_huge_header_is_cut_off_at_64_kib(agent):
    """The server stops reading the head past 64 KiB: a 64 MB Authorization header is not
    read whole (and never reaches the token lookup)."""
    import socket

    host, port = agent.url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer ".encode())
        sent = 0
        try:
            while sent < 64 << 20:
                conn.sendall(b"a" * (1 << 20))
                sent += 1 << 20
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection: what this test wants
        assert sent < 8 << 20, f"the server read {sent} bytes of one header"
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:80]


def test_a_head_just_under_the_cap_is_served(agent):
    response = httpx2.post(
        agent.url,
        content=b"{}",
        headers={"authorization": f"Bearer {agent.token}", "x-padding": "p" * 60_000, "accept": ACCEPT},
        timeout=10,
    )
    assert response.status_code != 431


def test_a_foreign_host_header_is_refused(agent):
    """DNS rebinding: a page on evil.example that resolves to the gateway cannot call tools."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    response = httpx2.post(
        agent.url,
        content=body,
        headers={
            "authorization": f"Bearer {agent.token}",
            "content-type": "application/json",
            "accept": ACCEPT,
            "host": "evil.example",
        },
        timeout=10,
    )
    assert response.status_code == 421


def test_a_number_too_big_to_parse_is_a_parse_error(agent):
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "post_card", "arguments": '
    body += '{"spec": {"root": "r", "elements": {}, "state": {"n": 1' + "0" * 5000 + "}}}}}"
    response = raw(agent, body.encode())
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_a_head_over_the_cap_in_one_read_is_refused_before_the_app(agent):
    import socket

    host, port = agent.url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {agent.token}\r\n".encode()
            + b"X-Padding: "
            + b"p" * 70_000
            + b"\r\nContent-Length: 2\r\n\r\n{}"
        )
        assert conn.recv(100).startswith(b"HTTP/1.1 431 ")


@pytest.fixture
def public_gateway(settings):
    """/mcp as tools/server.py builds it for a gateway whose public name is calvin.example.com,
    served by uvicorn on a loopback port (the Host header is what the test sends)."""
    import threading
    import time

    import uvicorn

    from tests.conftest import free_port
    from tools.server import build_http_app

    settings.ALLOWED_HOSTS = ["calvin.example.com"]
    mcp_app, lifespan_app = build_http_app()

    async def app(scope, receive, send):
        return await (lifespan_app if scope["type"] == "lifespan" else mcp_app)(scope, receive, send)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)


def test_the_public_name_is_served_and_no_other(agent, public_gateway):
    """The Host (and Origin) check follows ALLOWED_HOSTS: the public name, with or without a
    port, is answered; any other name is refused, even one that starts like it."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()

    def post(host: str, origin: str | None = None) -> int:
        headers = {
            "authorization": f"Bearer {agent.token}",
            "content-type": "application/json",
            "accept": ACCEPT,
            "host": host,
        }
        if origin:
            headers["origin"] = origin
        return httpx2.post(public_gateway, content=body, headers=headers, timeout=10).status_code

    assert post("calvin.example.com") == 200
    assert post("calvin.example.com:8443") == 200
    assert post("calvin.example.com", origin="https://calvin.example.com") == 200
    assert post("calvin.example.com:8443", origin="https://calvin.example.com:8443") == 200
    assert post("evil.example") == 421
    assert post("127.0.0.1") == 421  # not in this gateway's ALLOWED_HOSTS
    assert post("calvin.example.com.evil.example") == 421
    assert post("calvin.example.com", origin="https://evil.example") == 403


SERVER_PATHS = ["/mcp", "/mcp/nanoclaw"]
# Request ids JSON-RPC (and MCP: a string or an integer, never null) does not allow.
BAD_IDS = ["NaN", "Infinity", "-Infinity", "{}", '{"a": 1}', "[]", "[1]", "null", "true", "1.5", "1e3"]


def post_to(agent, path: str, body: str):
    url = agent.url.rsplit("/mcp", 1)[0] + path
    return httpx2.post(
        url,
        content=body.encode(),
        headers={"authorization": f"Bearer {agent.token}", "content-type": "application/json", "accept": ACCEPT},
        timeout=30,
    )


@pytest.mark.parametrize("path", SERVER_PATHS)
@pytest.mark.parametrize("request_id", BAD_IDS)
def test_a_request_id_that_is_not_a_string_or_an_integer_is_an_invalid_request(agent, path, request_id):
    """Not a silent 202 (the SDK would take such a request for a notification and drop it):
    a JSON-RPC error with a null id, since the id sent cannot be echoed."""
    (agent.directory / "ok.txt").write_text("never sent")
    body = (
        '{"jsonrpc": "2.0", "id": ' + request_id + ', "method": "tools/call", '
        '"params": {"name": "send_file", "arguments": {"path": "ok.txt", "to": "thread"}}}'
    )
    response = post_to(agent, path, body)
    assert response.status_code == 400, (response.status_code, response.text[:200])
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None, answer
    assert answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"] == "Invalid Request: the id must be a string or an integer", answer


@pytest.mark.parametrize("path", SERVER_PATHS)
@pytest.mark.parametrize("request_id", ["7", "0", "-3", '"abc"', '""', "9007199254740993"])
def test_string_and_integer_ids_are_answered_with_the_same_id(agent, path, request_id):
    response = post_to(agent, path, '{"jsonrpc": "2.0", "id": ' + request_id + ', "method": "tools/list"}')
    assert response.status_code == 200, response.text[:200]
    assert response.json()["id"] == json.loads(request_id)
    assert response.json()["result"]["tools"]


@pytest.mark.parametrize("path", SERVER_PATHS)
def test_a_notification_without_an_id_is_still_accepted(agent, path):
    response = post_to(agent, path, '{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert response.status_code == 202, response.text[:200]
