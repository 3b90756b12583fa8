"""Which of the host connection's messages skip Channels' close-old-connections hop: those of
preview streams only (their handlers pass bytes on and touch no database)."""

import json

import pytest

from sessions.consumers import HostConsumer


@pytest.mark.parametrize(
    ("message", "skips"),
    [
        ({"type": "preview.data", "reply": "r", "data": b"x"}, True),
        ({"type": "preview.open", "reply": "r"}, True),
        ({"type": "websocket.receive", "bytes": b"D\x00\x00\x00\x01x"}, True),
        ({"type": "websocket.receive", "text": json.dumps({"type": "stream.credit", "stream": 1})}, True),
        ({"type": "websocket.receive", "text": json.dumps({"type": "heartbeat"})}, False),
        ({"type": "websocket.receive", "text": json.dumps({"type": "turn.finished", "stream.": 1})}, False),
        ({"type": "websocket.receive", "text": json.dumps({"turn": 1, "type": "stream.end"})}, False),
        ({"type": "websocket.connect"}, False),
        ({"type": "websocket.disconnect", "code": 1000}, False),
        ({"type": "host.request", "message": {}}, False),
    ],
)
def test_only_stream_messages_skip_the_database_hop(message, skips):
    assert HostConsumer().without_database(message) is skips
