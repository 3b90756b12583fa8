"""What a host daemon says when it registers again after a dropped connection.

A turn that ended while the connection was down has its turn.finished waiting in the outbox,
sent only after the register. Registering without it, the gateway took the turn for lost in a
restart and ran it again elsewhere (bench/gateway_scale.py saw hundreds run twice).
"""

import asyncio
import json

import pytest
from websockets.asyncio.server import serve

from sessions.host.daemon import UNAUTHORIZED, HostDaemon, HostRefused
from sessions.host.sandbox import Sandbox


def test_a_turn_whose_end_waits_in_the_outbox_is_registered_as_this_hosts(tmp_path):
    received: list[dict] = []

    async def gateway(ws):
        received.append(json.loads(await ws.recv()))
        await ws.close(UNAUTHORIZED, "enough")  # the daemon stops: one registration to look at

    async def scenario():
        async with serve(gateway, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            daemon = HostDaemon(gateway=f"http://127.0.0.1:{port}", token="t", name="h", capacity=2, state_dir=tmp_path)
            daemon.sandbox, daemon.allow_unsandboxed = Sandbox.none("not needed"), True
            daemon.turn_sessions[7] = 70  # still running
            daemon.post({"type": "turn.finished", "turn": 5, "status": "done", "reply": "ok", "error": ""})
            daemon.post({"type": "turn.event", "turn": 9, "event": {}})  # an event is no claim on a turn
            await asyncio.wait_for(daemon.run(), 10)

    with pytest.raises(HostRefused):
        asyncio.run(scenario())
    assert received[0]["type"] == "register"
    assert received[0]["running"] == [5, 7]
