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
