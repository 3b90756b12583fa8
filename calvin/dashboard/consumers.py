"""Websocket for a thread page: joins the thread's group once the person may see it."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from calvin.dashboard.events import thread_events_since, thread_group
from calvin.dashboard.selectors import thread_visible_to


class ThreadConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        if not await database_sync_to_async(thread_visible_to)(self.scope["user"], thread_id):
            # Closing before the handshake would answer a bare HTTP 403, and the page could not tell
            # "not allowed" from "server down" (it would retry forever): accept, then close with 4403.
            await self.accept()
            await self.close(code=4403)
            return
        self.group = thread_group(thread_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def receive_json(self, content, **kwargs):
        """{"since": <last message id the page has>}: send what it missed (render-to-connect gap, reconnects)."""
        since = content.get("since") if isinstance(content, dict) else None
        if not isinstance(since, int) or isinstance(since, bool) or not hasattr(self, "group"):
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        for event in await database_sync_to_async(thread_events_since)(thread_id, since):
            await self.thread_message(event)

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def thread_message(self, event):
        await self.send_json({key: value for key, value in event.items() if key != "type"})
