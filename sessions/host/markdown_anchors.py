"""The `#anchor`s a Markdown file has when GitHub shows it: one per heading, as GitHub's
slugger makes them (lowercase, punctuation but `-` and `_` dropped, each space a `-`, a
repeated one suffixed -1, -2…), and those named by HTML (`<a name="x">`, `id="x"`).

Headings are read line by line (ATX `#` and setext underlines, none inside fenced code),
and their text is the rendered one, near enough: link text, no emphasis or code marks.
"""

import html
import re
import unicodedata

ATX_RE = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
SETEXT_RE = re.compile(r" {0,3}(?:=+|-+)[ \t]*")
FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
HTML_ANCHOR_RE = re.compile(r"<[A-Za-z][^>]*?\s(?:name|id)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))")
IMAGE_OR_LINK_RE = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
TAG_RE = re.compile(r"<[^>]*>")
EMPHASIS_RE = re.compile(r"[*`]|~~|(?<!\w)_+|_+(?!\w)")
ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


def slug(text: str) -> str:
    kept = (ch for ch in text.lower() if ch.isalnum() or ch in "-_ " or unicodedata.category(ch)[0] == "M")
    return "".join(kept).replace(" ", "-")


def heading_text(raw: str) -> str:
    text = IMAGE_OR_LINK_RE.sub(r"\1", raw)
    text = TAG_RE.sub("", text)
    text = EMPHASIS_RE.sub("", text)
    return html.unescape(ESCAPE_RE.sub(r"\1", text)).strip()


def _scan(markdown: str) -> tuple[list[str], list[str]]:
    """The headings' texts, and the lines outside fenced code."""
    found, prose, fence, previous = [], [], None, ""
    for line in markdown.splitlines():
        opened = FENCE_RE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence, previous = opened.group(1), ""
            continue
        prose.append(line)
        atx = ATX_RE.fullmatch(line)
        if atx:
            found.append(heading_text(atx.group(1) or ""))
            previous = ""
        elif SETEXT_RE.fullmatch(line) and previous.strip():
            found.append(heading_text(previous))
            previous = ""
        else:
            previous = line
    return found, prose


def anchors(markdown: str) -> list[str]:
    """Every anchor, in the order they appear: headings' first, then HTML ones."""
    occurrences: dict[str, int] = {}
    result = []
    texts, prose = _scan(markdown)
    for text in texts:
        base = candidate = slug(text)
        while candidate in occurrences:  # as github-slugger: "a", "a-1", "a-2"…
            occurrences[base] += 1
            candidate = f"{base}-{occurrences[base]}"
        occurrences[candidate] = 0
        result.append(candidate)
    for match in HTML_ANCHOR_RE.finditer("\n".join(prose)):
        name = next(group for group in match.groups() if group is not None)
        if name and name not in result:
            result.append(name)
    return result
