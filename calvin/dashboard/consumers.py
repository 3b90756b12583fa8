"""Websocket for a thread page: joins the thread's group once the person may see it."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from calvin.dashboard.events import thread_group
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

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def thread_message(self, event):
        await self.send_json({key: value for key, value in event.items() if key != "type"})
