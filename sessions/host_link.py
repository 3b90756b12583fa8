"""The gateway's side of talking to a host: through the channel layer to the consumer that
holds the host's websocket, whichever web process that is.

Called from sync code that runs in asgiref's threads (tool services, views): async_to_sync
then runs on the server's own event loop, the one the consumers and the layer live on.
"""

import base64
import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from sessions.models import Host

log = logging.getLogger(__name__)

HOSTS_GROUP = "hosts"
REPLY_PREFIX = "hostreply"


class HostUnavailable(Exception):
    """The host is not connected, or did not answer in time; the text says which."""


class HostRefused(Exception):
    """The host answered with a refusal (its own checks of a path, say); the text is its reason."""


def host_channel_send(channel: str, event: dict) -> None:
    try:
        async_to_sync(get_channel_layer().send)(channel, event)
    except Exception:
        log.warning("send of %s to a host connection failed", event.get("type"), exc_info=True)


def host_send(host_id: int, message: dict) -> bool:
    """Forward a message to the host's daemon; False when it is not connected."""
    channel = Host.objects.filter(id=host_id).values_list("channel_name", flat=True).first()
    if not channel:
        return False
    host_channel_send(channel, {"type": "host.forward", "message": message})
    return True


def host_channels_wake(channels: list[str]) -> None:
    for channel in channels:
        host_channel_send(channel, {"type": "host.wake"})


def hosts_wake() -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(HOSTS_GROUP, {"type": "host.wake"})
    except Exception:
        log.warning("waking the hosts failed; their next heartbeat claims the work", exc_info=True)


async def _receive(layer, channel: str, timeout: float):
    import asyncio

    try:
        return await asyncio.wait_for(layer.receive(channel), timeout)
    except TimeoutError:
        return None


async def host_ask(*, host_id: int, op: str, arguments: dict, sink=None, timeout: float | None = None) -> dict:
    """Ask the host for something only it has (a file of a session's directory, git work in it),
    waiting on the event loop: a long clone holds no thread of the server's pool.

    Bytes arrive in chunks and are written to `sink` (a binary file) as they come; the
    result is the host's final answer. Raises HostUnavailable or HostRefused.
    """
    from asgiref.sync import sync_to_async

    timeout = timeout or settings.CALVIN_HOST_REQUEST_SECONDS
    host = await sync_to_async(_host_address, thread_sensitive=False)(host_id)
    if not host or not host["channel_name"]:
        raise HostUnavailable("the session's host is not connected")
    layer = get_channel_layer()
    reply_to = f"{REPLY_PREFIX}.{uuid.uuid4().hex}"
    request = {"type": "request", "request": reply_to, "op": op, **arguments}
    await layer.send(host["channel_name"], {"type": "host.request", "message": request})
    while True:
        reply = await _receive(layer, reply_to, timeout)
        if reply is None:
            raise HostUnavailable(f"the session's host {host['name']} did not answer within {timeout:g} s")
        if reply.get("type") == "reply.chunk":
            if sink is not None:
                sink.write(base64.b64decode(reply.get("data", "")))
            continue
        if reply.get("ok"):
            return reply
        raise HostRefused(str(reply.get("error") or "the host refused"))


def _host_address(host_id: int) -> dict | None:
    return Host.objects.filter(id=host_id).values("channel_name", "name").first()


def host_request(*, host_id: int, op: str, arguments: dict, sink=None, timeout: float | None = None) -> dict:
    """host_ask for sync code (it runs on the server's event loop)."""
    return async_to_sync(host_ask)(host_id=host_id, op=op, arguments=arguments, sink=sink, timeout=timeout)
