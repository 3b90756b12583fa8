"""What the preview tests share: a host on the channel layer, sessions in two workspaces."""

import asyncio
import threading

from asgiref.sync import async_to_sync
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.utils import timezone

from calvin.previews.models import Preview
from sessions.hosts import host_create
from sessions.models import Host, Session


class LayerHost:
    """A stand-in for a connected host's consumer, on the real channel layer (Redis): it answers
    `preview.probe` with `answer` and keeps what the gateway forwards to the daemon. The tests
    with a real daemon use tests/sessions/host_processes.py; this one answers what they cannot
    make a daemon say (a probe's exact answer, a host without a sandbox)."""

    def __init__(self, *, name: str, workspace=None, sandbox: str = "bwrap"):
        # A layer of its own, used only on this stand-in's thread: the process's layer belongs to
        # the gateway's event loop, and two loops on one channels_redis layer lose messages.
        self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.channel = async_to_sync(self.layer.new_channel)("previewhost.")
        self.host, _ = host_create(name=name, workspace=workspace)
        now = timezone.now()
        Host.objects.filter(id=self.host.id).update(
            channel_name=self.channel, connected_at=now, last_heartbeat_at=now, sandbox=sandbox, capacity=0
        )
        self.answer = {"ok": True, "listening": True, "why": ""}
        self.requests: list[dict] = []
        self.forwarded: list[dict] = []
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._thread.start()

    def seat(self, session) -> None:
        Session.objects.filter(id=session.id).update(host=self.host)

    async def _serve(self) -> None:
        layer = self.layer
        while True:
            # Never cancelled mid-receive (channels_redis may lose the message it was taking).
            event = await layer.receive(self.channel)
            if event["type"] == "test.stop":
                return
            if event["type"] == "host.request":
                message = event["message"]
                self.requests.append(message)
                await layer.send(message["request"], {"type": "reply", "request": message["request"], **self.answer})
            elif event["type"] == "host.forward":
                self.forwarded.append(event["message"])

    def pushes(self, session_id: int) -> list[list[int]]:
        return [
            m["ports"] for m in self.forwarded if m.get("type") == "session.previews" and m.get("session") == session_id
        ]

    def stop(self) -> None:
        async_to_sync(self.layer.send)(self.channel, {"type": "test.stop"})
        self._thread.join(timeout=5)


def preview_of(session, name: str, port: int = 8000, **fields) -> Preview:
    return Preview.objects.create(workspace_id=session.workspace_id, session=session, name=name, port=port, **fields)
