"""A runner that keeps making refused calls is paused, so refusals cannot burn the gateway.

A refused send_file still costs a path walk and maybe a 100 MiB copy. Refusals are
counted per runner per minute in the shared cache (Redis when REDIS_URL is set; the
embedded mode's in-process cache is fine there, as that mode is one process); once a
runner passes the limit, the pause is written there too, until the minute ends. Every web
process reads it with the caller (tools/auth.py, in the thread hop that already reads the
database), so a runner refused through one web process is paused on all of them at once,
and the check itself (refusals_check) stays free of I/O on the event loop.
"""

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache

from tools.errors import ToolRefused

log = logging.getLogger(__name__)
WINDOW = 60


def _key(runner_id: int, window: int) -> str:
    return f"refusals:{runner_id}:{window}"


def _pause_key(runner_id: int) -> str:
    return f"refusals:paused:{runner_id}"


def refusals_paused_until(*, runner_id: int) -> float | None:
    """When this runner's pause ends (a Unix time), or None: one read of the shared cache."""
    try:
        until = cache.get(_pause_key(runner_id))
    except Exception:  # Redis down: the pause guards the gateway; calls must not fail for want of it
        log.warning("the refusal pause of runner %s could not be read", runner_id, exc_info=True)
        return None
    return until if isinstance(until, int | float) else None


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
    except Exception:  # Redis down: the refusal itself still goes back to the agent
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
        cache.set(_pause_key(runner_id), until, timeout=max(1, math.ceil(until - now)))
