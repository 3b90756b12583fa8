"""Hundreds of thread pages closing at once (a deploy, a network blip) all leave their groups.

Each closing socket discards its groups on the channel layer at the same moment; redis-py's
pool held 100 connections and then raised, so most sockets stayed in their groups (bench/memory.py
found 557 of 1,000 left behind), pushed to until the group expired a day later.
"""

import asyncio

import pytest
import redis
from django.conf import settings
from websockets.asyncio.client import connect

from calvin.dashboard.events import thread_group
from tests.conftest import wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = 300


def _members(group: str) -> int:
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
    return redis.Redis.from_url(settings.REDIS_URL).zcard(f"{prefix}:group:{group}")


def test_pages_closing_all_at_once_each_leave_the_threads_group(gateway, make_agent):
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    url = gateway.replace("http://", "ws://", 1) + f"/ws/threads/{thread_id}/"
    group = thread_group(thread_id)

    async def open_page():
        return await connect(url, origin=gateway, additional_headers={"Cookie": f"sessionid={sessionid}"})

    async def burst():
        pages = []
        for start in range(0, PAGES, 25):  # opened 25 at a time, as pages come and go
            pages += await asyncio.gather(*(open_page() for _ in range(start, min(start + 25, PAGES))))
        await asyncio.to_thread(wait_for, lambda: _members(group) == PAGES, 30)
        await asyncio.gather(*(page.close() for page in pages))  # all at once

    asyncio.run(burst())
    wait_for(lambda: _members(group) == 0, timeout=30)
