"""/ws/host/: the one connection a host daemon keeps to the gateway.

The daemon authenticates with its host token (Authorization: Bearer), registers, heartbeats,
receives turns and stops, reports what its runners do, and answers host-local requests.
Everything here is a thin adapter: sessions/hosts.py, scheduling.py and turns.py decide.
"""

import json
import logging

from channels.db import DatabaseSyncToAsync
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from calvin.sockets import EndsOnClosedSocket
from sessions import hosts, scheduling, turns
from sessions.host_link import HOSTS_GROUP
from sessions.stream_relay import LOCAL_RELAYS, StreamRelay
from tools.auth import bearer_token
from tools.services.code_channel_checkouts import code_channel_checkout_record

log = logging.getLogger(__name__)

UNAUTHORIZED = 4401  # unknown or revoked token: the daemon stops and says so
REPLACED = 4409  # a newer connection of the same host took over
# Its heartbeat lapsed and the sweep moved its turns (a pause, a slow network): the daemon is not
# refused, it connects again and registers, as after any dropped connection.
LAPSED = 4408
MAX_PENDING_REQUESTS = 64


def _off_loop(fn):
    """`fn` in the process's thread pool, each thread on its own database connection. Channels'
    default runs every consumer's calls on one shared thread: with many hosts their claims,
    reports and heartbeats queued there, pings went unread and live hosts were swept as lapsed
    (bench/gateway_scale.py). One consumer still awaits its calls one at a time, in order."""
    return DatabaseSyncToAsync(fn, thread_sensitive=False)


@_off_loop
def _host_id_for(token: str) -> int | None:
    host = hosts.host_for_token(token) if token else None
    return host.id if host else None


class HostConsumer(EndsOnClosedSocket, AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.host_id = await _host_id_for(bearer_token(self.scope) or "")
        self.registered = False
        self.pending: set[str] = set()  # reply channels of requests this host was sent
        await self.accept()  # then close with a code: a bare 403 would look like "server down"
        if self.host_id is None:
            await self.close(code=UNAUTHORIZED)
            return
        await self.channel_layer.group_add(HOSTS_GROUP, self.channel_name)
        self.streams = StreamRelay(
            send_text=self.send_json, send_bytes=self._send_frame, channel_layer=self.channel_layer
        )
        LOCAL_RELAYS[self.channel_name] = self.streams

    async def disconnect(self, code):
        streams = getattr(self, "streams", None)
        if streams is not None:
            LOCAL_RELAYS.pop(self.channel_name, None)
            await streams.host_gone()
        if getattr(self, "host_id", None) is not None:
            await self.channel_layer.group_discard(HOSTS_GROUP, self.channel_name)
            await _off_loop(hosts.host_disconnected)(host_id=self.host_id, channel_name=self.channel_name)

    def without_database(self, message) -> bool:
        """Preview streams' messages only pass bytes on: from the gateway's side (preview.*), and
        from the host (binary frames, and JSON whose type, its first key, is stream.*)."""
        kind = message["type"]
        if kind.startswith("preview."):
            return True
        if kind != "websocket.receive":
            return False
        text = message.get("text")
        return message.get("bytes") is not None if text is None else text.startswith('{"type": "stream.')

    async def _send_frame(self, frame: bytes) -> None:
        await self.send(bytes_data=frame)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if bytes_data is not None:
            if self.registered:
                await self.streams.host_frame(bytes_data)  # a preview stream's bytes
            return
        try:
            content = json.loads(text_data) if text_data is not None else None
        except ValueError:
            content = None
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self.send_json({"type": "error", "error": "each message is a JSON object with a type"})
            return
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs):
        if self.host_id is None:
            return
        kind = content["type"]
        if kind == "register":
            await self._register(content)
        elif not self.registered:
            await self.send_json({"type": "error", "error": "register first"})
        elif kind == "heartbeat":
            await self._heartbeat()
        elif kind in ("turn.started", "turn.event", "turn.finished"):
            await self._turn_report(kind, content)
        elif kind == "turn.checkout":
            await self._checkout_report(content)
        elif kind in ("reply", "reply.chunk"):
            await self._reply(content)
        elif kind.startswith("stream."):
            await self.streams.host_message(content)
        else:
            await self.send_json({"type": "error", "error": f"unknown message type {kind[:40]!r}"})

    async def _register(self, content):
        def number(name, default=0):
            value = content.get(name, default)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        running = [t for t in content.get("running", []) if isinstance(t, int)]
        runners = [
            (r.get("session"), r.get("generation"))
            for r in content.get("runners", [])
            if isinstance(r, dict) and isinstance(r.get("session"), int) and isinstance(r.get("generation"), int)
        ]
        registration = await _off_loop(hosts.host_register)(
            host_id=self.host_id,
            channel_name=self.channel_name,
            capacity=number("capacity", 1),
            version=str(content.get("version", "")),
            sandbox=str(content.get("sandbox", "")),
            running=running,
            runners=runners,
        )
        self.registered = True
        if registration.replaced_channel:
            await self.channel_layer.send(
                registration.replaced_channel, {"type": "host.close", "reason": "replaced", "code": REPLACED}
            )
        from django.conf import settings

        await self.send_json(
            {"type": "registered", "host": self.host_id, "heartbeat_seconds": settings.CALVIN_HOST_HEARTBEAT_SECONDS}
        )
        for turn in registration.stale_turns:
            await self.send_json({"type": "stop", "turn": turn, "reason": "this turn runs elsewhere now"})
        await self._claim()

    async def _heartbeat(self):
        alive = await _off_loop(hosts.host_heartbeat)(host_id=self.host_id, channel_name=self.channel_name)
        if not alive:
            lapsed = await _off_loop(hosts.host_lapsed)(host_id=self.host_id)
            await self.close(code=LAPSED if lapsed else UNAUTHORIZED)
            return
        # Every live host sweeps for lapsed ones: their turns run again without waiting for beat.
        await _off_loop(hosts.hosts_sweep)()
        await self._claim()

    async def _turn_report(self, kind, content):
        turn_id = content.get("turn")
        if not isinstance(turn_id, int):
            return
        if kind == "turn.started":
            await _off_loop(turns.turn_started)(
                host_id=self.host_id,
                turn_id=turn_id,
                directory=str(content.get("directory", "")),
                temp_directory=str(content.get("temp_directory", "")),
            )
        elif kind == "turn.event":
            await _off_loop(turns.turn_event)(host_id=self.host_id, turn_id=turn_id, event=content.get("event"))
        else:
            await _off_loop(turns.turn_finish)(
                host_id=self.host_id,
                turn_id=turn_id,
                status=str(content.get("status", "")),
                reply=content.get("reply") if isinstance(content.get("reply"), str) else "",
                error=content.get("error") if isinstance(content.get("error"), str) else "",
                agent_session_id=content.get("agent_session_id") or "",
                usage=content.get("usage"),  # checked by sessions/usage.py
            )
            await self._claim()

    async def _checkout_report(self, content):
        """A code channel's checkout before a turn (sessions/host/code_channel.py), recorded as a checkout_repo call."""
        turn_id = content.get("turn")
        if isinstance(turn_id, int) and not isinstance(turn_id, bool):
            await _off_loop(code_channel_checkout_record)(host_id=self.host_id, turn_id=turn_id, report=content)

    async def _claim(self):
        for message in await _off_loop(scheduling.turns_claim)(host_id=self.host_id):
            await self.send_json(message)

    async def _reply(self, content):
        """A host's answer goes only to a request this host was sent, never to a channel it names."""
        reply_to = content.get("request")
        if reply_to not in self.pending:
            return
        if content["type"] == "reply":
            self.pending.discard(reply_to)
        await self.channel_layer.send(reply_to, content)

    # Channel-layer events from the gateway's other processes.

    async def host_wake(self, event):
        if self.registered:
            await self._claim()

    async def host_forward(self, event):
        await self.send_json(event["message"])

    async def host_request(self, event):
        message = event["message"]
        if len(self.pending) >= MAX_PENDING_REQUESTS:
            await self.channel_layer.send(message["request"], {"type": "reply", "ok": False, "error": "host busy"})
            return
        self.pending.add(message["request"])
        await self.send_json(message)

    async def preview_open(self, event):
        await self.streams.handle(event)

    preview_data = preview_credit = preview_end = preview_reset = preview_open

    async def host_close(self, event):
        await self.send_json({"type": "closing", "reason": event.get("reason", "")})
        await self.close(code=event.get("code", UNAUTHORIZED))
