"""Websockets of the live pages: a thread page's, and a workspace's (the dashboard, the admin
change lists), each live while the person may see what it shows, and no longer.

Access is checked on connect, when a push says it may have changed (a membership or user
changed here, a logout), before each event is sent on, and every CALVIN_SOCKET_RECHECK_SECONDS:
a change made where no push is sent (a shell, another deployment's process) is noticed too.

Every event carries its stream's seq (calvin/dashboard/live.py). The page sends
{"since": <last seq it applied>} on (re)connect, or {"since": n, "until": m} for a gap it saw,
and gets exactly the events in between from the log, or {"reload": true} when they are gone.
"""

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from calvin.dashboard.events import login_group, thread_group, user_group
from calvin.dashboard.live import (
    live_catch_up,
    live_stream_seq,
    live_stream_settle,
    thread_stream,
    workspace_group,
    workspace_stream,
)
from calvin.dashboard.selectors import watcher_may_see, workspace_watcher_may_see
from calvin.dashboard.throttle import TokenBucket
from calvin.sockets import EndsOnClosedSocket

log = logging.getLogger(__name__)

REFUSED = 4403
UNCHECKED = 1011  # access could not be checked (the database failed): the page reconnects and is checked again
# Each catch-up re-checks access and renders up to CATCH_UP_BYTES: a page sends one per (re)connect or gap.
CATCH_UP_BURST, CATCH_UP_EVERY = 5, 2.0


def _seq(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class LiveConsumer(EndsOnClosedSocket, AsyncJsonWebsocketConsumer):
    """What both sockets share: access rules, re-checks, seq catch-up. Subclasses say what is watched."""

    kind = ""

    def watched(self) -> tuple[str, str]:
        """(the Channels group, the live stream)."""
        raise NotImplementedError

    def may_watch(self) -> bool:
        raise NotImplementedError

    async def connect(self):
        self.session_key = self.scope["session"].session_key
        self.user_id = self.scope["user"].pk
        self.group, self.stream = self.watched()
        self.joined = []
        self.rechecks = self.lost_pushes = None
        self.sent = None  # the highest seq this socket sent (None: the page has not said where it is)
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
        await self._join(self.group)
        await self.accept()
        self.rechecks = asyncio.ensure_future(self._recheck_every(settings.CALVIN_SOCKET_RECHECK_SECONDS))
        self.lost_pushes = asyncio.ensure_future(self._send_lost_pushes_every(settings.CALVIN_LIVE_CHECK_SECONDS))

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Garbage (binary, not JSON) is ignored: channels would raise, and log a traceback per frame."""
        try:
            content = json.loads(text_data) if text_data is not None else None
        except ValueError:
            content = None
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs):
        """{"since": <seq>} or {"since": <seq>, "until": <seq>}: send what the page lacks."""
        if not isinstance(content, dict) or self.group not in self.joined:
            return
        since, until = _seq(content.get("since")), content.get("until")
        where = content.get("since") is None and "since" in content and self.kind == "workspace"
        if since is None and not where:
            return
        if until is not None and (_seq(until) is None or until < since):
            return
        if not self.catch_ups.take():
            await self.send_json({"error": f"too many catch-up requests: at most one every {CATCH_UP_EVERY:g} s"})
            return
        if not await self._may_watch():
            await self._refuse()
            return
        if where:  # a page rendered without a seq asks where the stream is
            at = await database_sync_to_async(live_stream_seq)(self.stream)
            self._sent(at)
            await self.send_json({"stream": self.stream, "at": at})
            return
        if until is None:
            self.sent = since  # what the page has, by its own word
        await self._catch_up(since, until)

    async def _catch_up(self, since: int, until: int | None = None):
        caught = await database_sync_to_async(live_catch_up)(self.stream, since, until)
        if caught.reload:
            self._sent(await database_sync_to_async(live_stream_seq)(self.stream))
            await self.send_json({"reload": True})  # the page reloads (or refetches) and starts again
        for frame in caught.frames:  # checked once above, not once per frame
            if until is None and self._has_sent(frame["seq"]):
                continue  # pushed while this was read (a gap's fill, with `until`, sends all it asked for)
            self._sent(frame["seq"])
            await self.send_json(frame)

    def _sent(self, seq: int) -> None:
        self.sent = seq if self.sent is None else max(self.sent, seq)

    async def _send_lost_pushes_every(self, seconds: float):
        """A push lost between commit and page (the layer down, a worker killed after commit) is
        sent from the log within `seconds`, even when no later event shows the page the gap."""
        while self.group in self.joined:
            await asyncio.sleep(seconds)
            if self.sent is None:
                continue
            try:
                latest = await database_sync_to_async(live_stream_settle)(self.stream)
                if latest > self.sent and await self._still_watching():
                    await self._catch_up(self.sent)
            except Exception:
                log.warning("a %s socket's look for lost pushes failed", self.kind, exc_info=True)

    async def disconnect(self, code):
        for task in (self.rechecks, self.lost_pushes):
            if task is not None:
                task.cancel()
        await self._leave()

    async def _recheck_every(self, seconds: float):
        while self.group in self.joined:
            await asyncio.sleep(seconds)
            try:
                allowed = await self._may_watch()
            except Exception:
                log.warning("a %s socket's access re-check failed; closing it", self.kind, exc_info=True)
                await self._leave()
                await self.close(code=UNCHECKED)
                return
            if not allowed:
                await self._refuse()
                return

    async def _still_watching(self) -> bool:
        """Before an event goes out: still joined (not refused) and still allowed."""
        if self.group not in self.joined:
            return False  # refused: an event already queued for this socket is dropped
        if not await self._may_watch():
            await self._refuse()
            return False
        return True

    async def live_event(self, event):
        """A logged event, pushed after its commit (calvin/dashboard/live.py)."""
        seq = event["frame"]["seq"]
        if self._has_sent(seq):
            return  # a catch-up sent it already (the push came late, or after the look numbered it)
        # Asked again after the access check: the periodic look may have sent it meanwhile.
        if await self._still_watching() and not self._has_sent(seq):
            self._sent(seq)
            await self.send_json(event["frame"])

    def _has_sent(self, seq: int) -> bool:
        return self.sent is not None and seq <= self.sent

    async def access_recheck(self, event):
        """Pushed when a membership or the user changed: close if that took the access away."""
        if not await self._may_watch():
            await self._refuse()

    async def login_ended(self, event):
        # Pushed by the logout itself, before the session is flushed: a re-check now would still pass.
        await self._refuse()

    async def _may_watch(self) -> bool:
        return await database_sync_to_async(self.may_watch)()

    async def _refuse(self):
        await self._leave()  # nothing more reaches this socket, even before the close completes
        await self.close(code=REFUSED)

    async def _join(self, *groups):
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)

    async def _leave(self):
        """Every group is left even if one discard fails (a channel left behind is only pushed to
        until the group expires; an exception here would skip the rest)."""
        while self.joined:
            group = self.joined.pop()
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:
                log.warning("a %s socket could not leave %s", self.kind, group.split(".")[0], exc_info=True)


class ThreadConsumer(LiveConsumer):
    """/ws/threads/<id>/: the thread's messages and header, and what its agent does right now."""

    kind = "thread"

    def watched(self):
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        return thread_group(self.thread_id), thread_stream(self.thread_id)

    def may_watch(self) -> bool:
        return watcher_may_see(self.session_key, self.user_id, self.thread_id)

    async def thread_message(self, event):
        """A push without a seq (a caller not yet announcing its message): shown, not counted."""
        if await self._still_watching():
            await self.send_json({key: value for key, value in event.items() if key != "type"})

    async def thread_activity(self, event):
        """What the agent is doing now (a turn started, a tool used, a turn ended): text is escaped by the page."""
        if not await self._still_watching():
            return
        await self.send_json({"activity": {k: str(v)[:4000] for k, v in event.items() if k != "type"}})


class WorkspaceConsumer(LiveConsumer):
    """/ws/workspaces/<id>/: ids and statuses of the workspace's sessions, turns, tool calls,
    approvals, questions and hosts, for pages that refetch what they show (static/dashboard/live.js)."""

    kind = "workspace"

    def watched(self):
        self.workspace_id = self.scope["url_route"]["kwargs"]["workspace_id"]
        return workspace_group(self.workspace_id), workspace_stream(self.workspace_id)

    def may_watch(self) -> bool:
        return workspace_watcher_may_see(self.session_key, self.user_id, self.workspace_id)
