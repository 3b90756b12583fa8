"""What agent text must become before Slack sees it: channel-wide mentions made inert, and
long text cut into messages Slack takes. Pure functions, no Django.

Mentions. Slack notifies a whole channel for `<!channel>`, `<!here>`, `<!everyone>` (and the
older `<!group>`), a user group for `<!subteam^ID>` or `<!subteam^ID|@name>`, and, where
`link_names` is on, for a bare `@channel` / `@here` / `@everyone`. Each becomes the same word
after a fullwidth at sign (＠here): people still read it, nobody is notified, and the text
never gets longer (a section's 3,000 characters still hold). A person (`<@U123>`) is left alone.

Size. Slack refuses `chat.postMessage` text "beyond ~40,000 characters" (`msg_too_long`)
without saying whether it counts code points, UTF-16 units or UTF-8 bytes, nor whether
before or after escaping & < > as entities. `slack_size` is the worst of all of them (UTF-8
bytes, with & as `&amp;` and < > as `&lt;` `&gt;`), and a part is at most PART_LIMIT = 36,000
of those: 10 % under the limit whatever Slack counts. A part that size holds 36,000 ASCII
characters, so 100,000 characters leave as 3 messages (the channel takes about one a second,
so fewer, larger parts finish sooner; Slack folds a long message behind "Show more").
"""

import re
from bisect import bisect_right
from itertools import accumulate

PART_LIMIT = 36_000
FENCE = "```"
# Room for closing a code block at the end of a part and opening it again in the next.
FENCE_RESERVE = len("\n" + FENCE) + len(FENCE + "\n")
BLOCKS_PER_MESSAGE = 50  # Slack's limit, per message

INERT_AT = "\uff20"  # FULLWIDTH COMMERCIAL AT: looks like @, is not a mention
# The closing ">" is optional: an unclosed "<!here" is inert for Slack but not for every reader's client.
_SPECIAL = re.compile(r"<!(channel|here|everyone|group)(?:\|[^>]*>|>)?", re.IGNORECASE)
_SUBTEAM = re.compile(r"<!subteam\^[^>|]*(?:\|([^>]*))?>", re.IGNORECASE)
_SUBTEAM_OPEN = re.compile(r"<!(subteam\^)", re.IGNORECASE)  # one never closed
_BARE = re.compile(r"@(channel|here|everyone)(?![A-Za-z0-9_])", re.IGNORECASE)
# Rich text elements that notify: a broadcast (@here...) and a user group.
_NOTIFYING_ELEMENTS = {"broadcast": "range", "usergroup": None}


def _inert_group(match: re.Match) -> str:
    label = (match.group(1) or "").strip().lstrip("@").strip()
    return INERT_AT + (label or "group")


def mentions_neutralised(text: str) -> str:
    """`text` with every channel-wide and user-group mention made inert; nothing else changes."""
    if "<!" not in text and "@" not in text:
        return text
    while True:  # until nothing is left to find: a replacement never builds a new mention, this is belt and braces
        changed = _SPECIAL.sub(lambda m: INERT_AT + m.group(1).lower(), text)
        changed = _SUBTEAM.sub(_inert_group, changed)
        changed = _SUBTEAM_OPEN.sub(lambda m: INERT_AT + m.group(1), changed)
        changed = _BARE.sub(lambda m: INERT_AT + m.group(1), changed)
        if changed == text:
            return text
        text = changed


def blocks_text_map(value, change):
    """A copy of a Block Kit value with `change` applied to every string under a "text" key
    (text objects, fields, button labels, rich text elements)."""
    if isinstance(value, list):
        return [blocks_text_map(item, change) for item in value]
    if isinstance(value, dict):
        return {
            key: change(item) if key == "text" and isinstance(item, str) else blocks_text_map(item, change)
            for key, item in value.items()
        }
    return value


def _rich_text_inert(value):
    if isinstance(value, list):
        return [_rich_text_inert(item) for item in value]
    if isinstance(value, dict):
        if value.get("type") in _NOTIFYING_ELEMENTS:
            word = value.get("range") if value.get("type") == "broadcast" else "group"
            return {"type": "text", "text": INERT_AT + str(word or "group")}
        return {key: _rich_text_inert(item) for key, item in value.items()}
    return value


def blocks_neutralised(blocks: list) -> list:
    """Blocks with mentions made inert in every text and no notifying rich text element."""
    return blocks_text_map(_rich_text_inert(blocks), mentions_neutralised)


def _char_size(char: str) -> int:
    if char == "&":
        return 5
    if char in "<>":
        return 4
    return len(char.encode("utf-8", "surrogatepass"))


def slack_size(text: str) -> int:
    """The largest count Slack could make of `text` (see the module's docstring)."""
    return sum(_char_size(char) for char in text)


def _cut(window: str) -> int:
    """Where to end a part inside `window` (the most that fits): after the last paragraph
    break, else line break, else space, in the window's second half; else at its end."""
    half = len(window) // 2
    for separator in ("\n\n", "\n", " ", "\t"):
        found = window.rfind(separator)
        if found >= 0 and found + len(separator) > half:
            return found + len(separator)
    if len(window) > 1 and window[-1] == "\r":
        return len(window) - 1  # keep \r\n together
    return len(window)


def text_split(text: str, limit: int = PART_LIMIT) -> list[str]:
    """`text` in consecutive pieces of at most `limit` (slack_size), cut at paragraph, then
    line, then word boundaries; the separators stay in the piece they end, so the pieces
    joined are exactly `text`."""
    if limit < 5:
        raise ValueError("a piece must hold at least one character of any size")
    sizes = [0, *accumulate(_char_size(char) for char in text)]
    pieces, start = [], 0
    while sizes[-1] - sizes[start] > limit:
        end = bisect_right(sizes, sizes[start] + limit) - 1  # the longest prefix that fits
        step = _cut(text[start:end])
        pieces.append(text[start : start + step])
        start += step
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def text_parts(text: str, limit: int = PART_LIMIT) -> list[str]:
    """The messages `text` leaves as: split (text_split), a code block cut by a split closed
    at the end of its part and opened again in the next, parts of only whitespace dropped
    (Slack shows nothing for them). Each part's slack_size is at most `limit`."""
    parts, open_fence = [], False
    for piece in text_split(text, limit - FENCE_RESERVE):
        part = (FENCE + "\n" if open_fence else "") + piece
        if piece.count(FENCE) % 2:
            open_fence = not open_fence
        if open_fence:
            part += "\n" + FENCE
        if part.strip():
            parts.append(part)
    return parts


def blocks_split(blocks: list, per: int = BLOCKS_PER_MESSAGE) -> list[list]:
    """Blocks in runs of at most `per`, one run a message, in order."""
    return [blocks[start : start + per] for start in range(0, len(blocks), per)]
