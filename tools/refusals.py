"""A runner that keeps making refused calls is paused, so refusals cannot burn the gateway.

A refused send_file still costs a path walk and maybe a 100 MiB copy. Refusals are
counted per runner per minute in the shared cache (Redis when REDIS_URL is set; the
embedded mode's in-process cache is fine there, as that mode is one process); once a
runner passes the limit, the pause's end is written on its Runner row, until the minute
ends. Every call reads it with the caller (tools/caller.py, the query a call makes anyway),
so a runner refused through one web process is paused on all of them at once, a call that
is not refused touches no cache at all, and the check itself (refusals_check) is free of I/O.
"""

import logging
import time

from django.conf import settings
from django.core.cache import cache

from sessions.models import Runner
from tools.errors import ToolRefused

log = logging.getLogger(__name__)
WINDOW = 60


def _key(runner_id: int, window: int) -> str:
    return f"refusals:{runner_id}:{window}"


def refusals_paused_until(*, runner_id: int) -> float | None:
    """When this runner's pause ends (a Unix time), or None."""
    return Runner.objects.filter(id=runner_id).values_list("refusals_paused_until", flat=True).first()


def refusals_check(*, paused_until: float | None) -> None:
    """Refuse at once while the pause read with the caller lasts."""
    if paused_until is None:
        return
    wait = paused_until - time.time()
    if wait <= 0:
        return
    raise ToolRefused(
        f"this runner made more than {settings.CALVIN_REFUSALS_PER_MINUTE} refused calls in a minute, so its calls"
        f" are paused for {int(wait) + 1} more seconds; read the earlier errors and fix the calls before retrying"
    )


def refusal_note(*, runner_id: int) -> None:
    try:
        _count(runner_id)
    except Exception:  # Redis (or the database) down: the refusal itself still goes back to the agent
        log.warning("a refusal of runner %s could not be counted", runner_id, exc_info=True)


def _count(runner_id: int) -> None:
    now = time.time()
    window = int(now // WINDOW)
    key = _key(runner_id, window)
    cache.add(key, 0, timeout=WINDOW * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=WINDOW * 2)
        count = 1
    if count > settings.CALVIN_REFUSALS_PER_MINUTE:
        until = (window + 1) * WINDOW
        Runner.objects.filter(id=runner_id).update(refusals_paused_until=until)
