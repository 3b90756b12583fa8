"""A runner that keeps making refused calls is paused, so refusals cannot burn the gateway.

A refused send_file still costs a path walk and maybe a 100 MiB copy. Refusals are
counted per runner per minute in the shared cache; once a runner passes the limit, this
process pauses its calls until the minute ends. The check on every call is a dict lookup
(no I/O): only refusals touch the cache. Another web process learns of the pause at the
runner's next refusal there, so a runner gets at most one more refusal per process.
"""

import time

from django.conf import settings
from django.core.cache import cache

from tools.errors import ToolRefused

WINDOW = 60
_paused_until: dict[int, float] = {}


def _key(runner_id: int, window: int) -> str:
    return f"refusals:{runner_id}:{window}"


def refusals_check(*, runner_id: int) -> None:
    until = _paused_until.get(runner_id)
    if until is None:
        return
    wait = until - time.time()
    if wait <= 0:
        _paused_until.pop(runner_id, None)
        return
    raise ToolRefused(
        f"this runner made more than {settings.CALVIN_REFUSALS_PER_MINUTE} refused calls in a minute, so its calls"
        f" are paused for {int(wait) + 1} more seconds; read the earlier errors and fix the calls before retrying"
    )


def refusal_note(*, runner_id: int) -> None:
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
        _paused_until[runner_id] = (window + 1) * WINDOW
