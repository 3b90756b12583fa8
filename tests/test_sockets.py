"""calvin/sockets.py: a send that meets a closed socket ends the consumer through disconnect()."""

import asyncio

import pytest
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from uvicorn.protocols.utils import ClientDisconnected

from calvin.sockets import ABNORMAL_CLOSURE, EndsOnClosedSocket


class Probe(EndsOnClosedSocket, AsyncJsonWebsocketConsumer):
    def __init__(self):
        super().__init__()
        self.disconnected = []

    async def probe_send(self, event):
        raise ClientDisconnected()  # what uvicorn raises from a send after the peer went

    async def probe_fail(self, event):
        raise ValueError("a bug")

    async def disconnect(self, code):
        self.disconnected.append(code)


def test_a_send_to_a_closed_socket_runs_disconnect_and_ends_the_consumer():
    probe = Probe()
    with pytest.raises(StopConsumer):
        asyncio.run(probe.dispatch({"type": "probe.send"}))
    assert probe.disconnected == [ABNORMAL_CLOSURE]


def test_other_errors_are_not_taken_for_a_disconnect():
    probe = Probe()
    with pytest.raises(ValueError):
        asyncio.run(probe.dispatch({"type": "probe.fail"}))
    assert probe.disconnected == []
