"""Websocket for a thread page: live messages while the person may see the thread, and no longer.

Access is checked on connect, when a push says it may have changed (a membership or user
changed here, a logout), before each event is sent on, and every CALVIN_SOCKET_RECHECK_SECONDS:
a change made where no push is sent (a shell, another deployment's process) is noticed too.
"""

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from calvin.dashboard.events import login_group, thread_catch_up, thread_group, user_group
from calvin.dashboard.selectors import watcher_may_see
from calvin.dashboard.throttle import TokenBucket

log = logging.getLogger(__name__)

REFUSED = 4403
UNCHECKED = 1011  # access could not be checked (the database failed): the page reconnects and is checked again
# Each catch-up re-checks access and renders up to CATCH_UP_BYTES: a page sends one per (re)connect.
CATCH_UP_BURST, CATCH_UP_EVERY = 5, 2.0


class ThreadConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self.session_key = self.scope["session"].session_key
        self.user_id = self.scope["user"].pk
        self.joined = []
        self.rechecks = None
        self.catch_ups = TokenBucket(burst=CATCH_UP_BURST, every=CATCH_UP_EVERY)
        if self.session_key and self.user_id is not None:
            # Listen for revocations before checking, so none falls between the check and the join.
            await self._join(user_group(self.user_id), login_group(self.session_key))
        if not await self._may_watch():
            # Closing before the handshake would answer a bare HTTP 403, and the page could not tell
            # "not allowed" from "server down" (it would retry forever): accept, then close with 4403.
            await self.accept()
            await self._refuse()
            return
        await self._join(thread_group(self.thread_id))
        await self.accept()
        self.rechecks = asyncio.ensure_future(self._recheck_every(settings.CALVIN_SOCKET_RECHECK_SECONDS))

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Garbage (binary, not JSON) is ignored: channels would raise, and log a traceback per frame."""
        try:
            content = json.loads(text_data) if text_data is not None else None
        except ValueError:
            content = None
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs):
        """{"since": <last message id the page has>}: send what it missed (render-to-connect gap, reconnects)."""
        since = content.get("since") if isinstance(content, dict) else None
        if not isinstance(since, int) or isinstance(since, bool) or thread_group(self.thread_id) not in self.joined:
            return
        if not self.catch_ups.take():
            await self.send_json({"error": f"too many catch-up requests: at most one every {CATCH_UP_EVERY:g} s"})
            return
        if not await self._may_watch():
            await self._refuse()
            return
        events, too_many = await database_sync_to_async(thread_catch_up)(self.thread_id, since)
        if too_many:
            await self.send_json({"reload": True})  # the page reloads and shows the latest messages
        for event in events:  # checked once above, not once per message
            await self._send_message(event)

    async def disconnect(self, code):
        if self.rechecks is not None:
            self.rechecks.cancel()
        await self._leave()

    async def _recheck_every(self, seconds: float):
        while thread_group(self.thread_id) in self.joined:
            await asyncio.sleep(seconds)
            try:
                allowed = await self._may_watch()
            except Exception:
                log.warning("a thread socket's access re-check failed; closing it", exc_info=True)
                await self._leave()
                await self.close(code=UNCHECKED)
                return
            if not allowed:
                await self._refuse()
                return

    async def _still_watching(self) -> bool:
        """Before an event goes out: still joined (not refused) and still allowed."""
        if thread_group(self.thread_id) not in self.joined:
            return False  # refused: an event already queued for this socket is dropped
        if not await self._may_watch():
            await self._refuse()
            return False
        return True

    async def thread_message(self, event):
        if await self._still_watching():
            await self._send_message(event)

    async def _send_message(self, event):
        await self.send_json({key: value for key, value in event.items() if key != "type"})

    async def thread_activity(self, event):
        """What the agent is doing now (a turn started, a tool used, a turn ended): text is escaped by the page."""
        if not await self._still_watching():
            return
        await self.send_json({"activity": {k: str(v)[:4000] for k, v in event.items() if k != "type"}})

    async def access_recheck(self, event):
        """Pushed when a membership or the user changed: close if that took the access away."""
        if not await self._may_watch():
            await self._refuse()

    async def login_ended(self, event):
        # Pushed by the logout itself, before the session is flushed: a re-check now would still pass.
        await self._refuse()

    async def _may_watch(self) -> bool:
        return await database_sync_to_async(watcher_may_see)(self.session_key, self.user_id, self.thread_id)

    async def _refuse(self):
        await self._leave()  # nothing more reaches this socket, even before the close completes
        await self.close(code=REFUSED)

    async def _join(self, *groups):
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)

    async def _leave(self):
        while self.joined:
            await self.channel_layer.group_discard(self.joined.pop(), self.channel_name)
