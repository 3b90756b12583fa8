"""How a card writes values and times: nothing hidden, one clock. Pure functions, shared by
every card (approvals, secret requests, tools' own)."""

import json
from datetime import datetime, timedelta

from django.utils import timezone


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str, keep_newlines: bool = False) -> str:
    """The text with every invisible or control character (bidi overrides, zero-width
    spaces, NBSP, tabs...) written as an escape, so nothing on the card hides."""
    return "".join(c if c.isprintable() or (keep_newlines and c == "\n") else _escaped(c) for c in text)


def quoted(value: str) -> str:
    """A string as a JSON literal, quotes included, with invisible characters escaped."""
    return visible(json.dumps(value, ensure_ascii=False))


def when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def clock(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    local = timezone.localtime(moment)
    return f"{local:%H:%M} {local.tzname()}"


def duration(span: timedelta) -> str:
    seconds = max(round(span.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours and not rest:
        return f"{hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes and not secs:
        return f"{minutes} min"
    return f"{seconds} s"
