"""Slack mrkdwn to safe HTML, for the web channel. Pure functions, standard library only.

No well-kept library does this (PyPI's slackdown is a 2017 0.0.3), and none is needed for
safety: every piece of text is escaped here, and the only markup in the output is the
renderer's own: p, br, strong, em, del, code, pre, blockquote, ul, ol, li, a, span, with
href, rel and class attributes only.

What is read, as Slack reads it:
- `*bold*`, `_italic_`, `~strike~`: a marker opens after a line start, a space or punctuation
  and before a non-space; it closes before the end, a space or punctuation and after a
  non-space, on the same line. Markers nest (`*_both_*`); an unmatched one stays itself.
- `` `code` `` and ```` ```blocks``` ````: nothing inside is interpreted (entities are decoded).
- `>` (or `&gt;`, as Slack encodes it) quotes a line; `>>>` quotes the rest.
- Lines starting with `•`, `-`, `*` or `◦` then a space are a list, `1.` / `1)` a numbered one.
- `<url|label>`, `<url>`: links, http, https and mailto only (a `<javascript:…>` stays text);
  bare http(s) URLs become links too. Every link has rel="noopener noreferrer".
- `<@U123>` → @name (from `names`, else the id), `<#C123|general>` → #general, `<!here>` → @here,
  `<!subteam^S1|@team>` → @team, `<!date^…|fallback>` → fallback.
- `&amp;` `&lt;` `&gt;` (Slack's own escapes) are decoded once, then everything is escaped:
  `&amp;lt;` shows as `&lt;`, and `<script>` as `<script>`.
"""

import re
from bisect import bisect_left
from collections.abc import Mapping
from html import escape

SAFE_SCHEMES = ("http", "https", "mailto")
ALLOWED_TAGS = frozenset({"p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a", "span"})
ALLOWED_ATTRIBUTES = frozenset({"href", "rel", "class"})
MARKERS = {"*": "strong", "_": "em", "~": "del"}

_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_FENCE = re.compile(r"```(.+?)```", re.DOTALL)
_QUOTE = re.compile(r"^(?:>|&gt;) ?")
_QUOTE_REST = re.compile(r"^(?:>>>|&gt;&gt;&gt;) ?")
_BULLET = re.compile(r"^\s*[•◦▪\-*] +(?=\S)")
_NUMBER = re.compile(r"^\s*(\d{1,4})[.)] +(?=\S)")
_ANGLE = re.compile(r"<([^<>\n]+)>")
_CODE = re.compile(r"`([^`\n]+)`")
_BARE_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)
_USER_ID = re.compile(r"^@([UW][A-Z0-9]+)(?:\|(.*))?$")
_URL_TAIL = ".,;:!?*_~'\""


def _decoded(text: str) -> str:
    """Slack's three escapes, decoded in one pass (so `&amp;lt;` becomes `&lt;`, not `<`)."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _text(raw: str) -> str:
    return escape(_decoded(raw))


def safe_href(url: str) -> str | None:
    """The URL if people may follow it from Calvin's pages (http, https, mailto), else None."""
    url = url.strip()
    if not url or any(ord(c) < 33 or c in "<>\"'`\\" for c in url):
        return None
    scheme, colon, rest = url.partition(":")
    if not colon or scheme.lower() not in SAFE_SCHEMES:
        return None
    if scheme.lower() in ("http", "https") and not (rest.startswith("//") and len(rest) > 2):
        return None
    return url


def _link(href: str, label_html: str) -> str:
    return f'<a href="{escape(href)}" rel="noopener noreferrer">{label_html}</a>'


def _mention(text: str) -> str:
    return f'<span class="mention">{escape(text)}</span>'


def mentioned_users(text: str) -> set[str]:
    """The Slack user ids `text` mentions (`<@U123>`), to look their names up."""
    found = set()
    for match in _ANGLE.finditer(text or ""):
        user = _USER_ID.match(match.group(1))
        if user:
            found.add(user.group(1))
    return found


def _angle(inner: str, names: Mapping[str, str]) -> str | None:
    """What a `<…>` stands for, as HTML; None when it is not Slack markup (then it is text)."""
    user = _USER_ID.match(inner)
    if user:
        name = names.get(user.group(1)) or _decoded(user.group(2) or "").lstrip("@") or user.group(1)
        return _mention("@" + name)
    if inner.startswith("#C") or inner.startswith("#G"):
        ident, _bar, label = inner[1:].partition("|")
        return _mention("#" + (_decoded(label) or names.get(ident) or ident))
    if inner.startswith("!"):
        word, _bar, label = inner[1:].partition("|")
        if word.lower() in ("here", "channel", "everyone", "group"):
            return _mention("@" + word.lower())
        if word.startswith("subteam^"):
            return _mention("@" + _decoded(label.lstrip("@") or "group"))
        if word.startswith("date^") and label:
            return escape(_decoded(label))
        return None
    target, _bar, label = inner.partition("|")
    href = safe_href(_decoded(target))
    if href is None:
        return None
    return _link(href, escape(_decoded(label)) if label else escape(href))


def _bare_urls(decoded: str) -> list:
    """Plain (decoded) text as characters, with each bare URL as one finished link."""
    atoms: list = []
    at = 0
    for match in _BARE_URL.finditer(decoded):
        url = match.group(0)
        while url and (url[-1] in _URL_TAIL or (url[-1] == ")" and url.count("(") < url.count(")"))):
            url = url[:-1]
        href = safe_href(url)
        if href is None:
            continue
        atoms.extend(decoded[at : match.start()])
        atoms.append(_Html(_link(href, escape(url))))
        at = match.start() + len(url)
    atoms.extend(decoded[at:])
    return atoms


class _Html(str):
    """A finished piece (a link, a mention, inline code): opaque to the emphasis markers."""


def _atoms(line: str, names: Mapping[str, str]) -> list:
    """A line as characters (decoded) and finished pieces, for the emphasis pass."""
    atoms: list = []
    at = 0
    code, angle = _CODE.search(line), _ANGLE.search(line)
    while code or angle:
        # Searched again only once passed: a line of 40,000 "<" stays linear.
        if code and code.start() < at:
            code = _CODE.search(line, at)
        if angle and angle.start() < at:
            angle = _ANGLE.search(line, at)
        nearest = min((m for m in (code, angle) if m), key=lambda m: m.start(), default=None)
        if nearest is None:
            break
        html = f"<code>{_text(nearest.group(1))}</code>" if nearest is code else _angle(nearest.group(1), names)
        if html is None:  # not markup: the "<" is text, and the search goes on after it
            atoms.extend(_bare_urls(_decoded(line[at : nearest.start() + 1])))
            at = nearest.start() + 1
            continue
        atoms.extend(_bare_urls(_decoded(line[at : nearest.start()])))
        atoms.append(_Html(html))
        at = nearest.end()
    atoms.extend(_bare_urls(_decoded(line[at:])))
    return atoms


def _is_char(atom) -> bool:
    return not isinstance(atom, _Html)


def _word(atom) -> bool:
    """Letters, digits and finished pieces: what a marker may not touch from outside."""
    return not _is_char(atom) or atom.isalnum()


def _space(atom) -> bool:
    return _is_char(atom) and atom.isspace()


def _closers(atoms: list) -> dict[str, list[int]]:
    """Per marker, where it may close: after a non-space, before the end or a non-word (a run
    of one marker, `**` or `__init__`, is text).

    That does not depend on the opener, so each opener finds its closer by bisection."""
    found: dict[str, list[int]] = {marker: [] for marker in MARKERS}
    for j, atom in enumerate(atoms):
        if _is_char(atom) and atom in MARKERS and j and not _space(atoms[j - 1]) and atoms[j - 1] != atom:
            if j + 1 == len(atoms) or (not _word(atoms[j + 1]) and atoms[j + 1] != atom):
                found[atom].append(j)
    return found


def _emphasis(atoms: list, closers: dict[str, list[int]], lo: int, hi: int) -> str:
    out, i = [], lo
    while i < hi:
        atom = atoms[i]
        if (
            _is_char(atom)
            and atom in MARKERS
            and (i == lo or (not _word(atoms[i - 1]) and atoms[i - 1] != atom))
            and i + 1 < hi
            and not _space(atoms[i + 1])
            and atoms[i + 1] != atom
        ):
            places = closers[atom]
            k = bisect_left(places, i + 2)
            if k < len(places) and places[k] < hi:
                j, tag = places[k], MARKERS[atom]
                out.append(f"<{tag}>{_emphasis(atoms, closers, i + 1, j)}</{tag}>")
                i = j + 1
                continue
        out.append(atom if not _is_char(atom) else escape(atom))
        i += 1
    return "".join(out)


def _inline(line: str, names: Mapping[str, str]) -> str:
    atoms = _atoms(line, names)
    return _emphasis(atoms, _closers(atoms), 0, len(atoms))


def _blocks(lines: list[str], names: Mapping[str, str], quoted: bool = False) -> list[str]:
    """Lines (no code blocks among them) as paragraphs, quotes and lists."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not quoted and _QUOTE_REST.match(line):
            rest = [_QUOTE_REST.sub("", line, count=1), *lines[i + 1 :]]
            out.append(f"<blockquote>{''.join(_blocks(rest, names, quoted=True))}</blockquote>")
            break
        if not quoted and _QUOTE.match(line):
            run = []
            while i < len(lines) and _QUOTE.match(lines[i]) and not _QUOTE_REST.match(lines[i]):
                run.append(_QUOTE.sub("", lines[i], count=1))
                i += 1
            out.append(f"<blockquote>{''.join(_blocks(run, names, quoted=True))}</blockquote>")
            continue
        number = _NUMBER.match(line)
        if _BULLET.match(line) or (number and number.group(1) == "1"):
            pattern, tag = (_BULLET, "ul") if _BULLET.match(line) else (_NUMBER, "ol")
            items = []
            while i < len(lines) and pattern.match(lines[i]):
                items.append(f"<li>{_inline(pattern.sub('', lines[i], count=1), names)}</li>")
                i += 1
            out.append(f"<{tag}>{''.join(items)}</{tag}>")
            continue
        if not line.strip():
            i += 1
            continue
        run = []
        while i < len(lines) and lines[i].strip() and not _starts_block(lines[i], quoted):
            run.append(_inline(lines[i], names))
            i += 1
        out.append(f"<p>{'<br>'.join(run)}</p>")
    return out


def _starts_block(line: str, quoted: bool) -> bool:
    number = _NUMBER.match(line)
    return bool(
        (not quoted and (_QUOTE.match(line) or _QUOTE_REST.match(line)))
        or _BULLET.match(line)
        or (number and number.group(1) == "1")
    )


def _code_block(raw: str) -> str:
    body = raw.removeprefix("\n").removesuffix("\n")
    return f"<pre>{_text(body)}</pre>"


def mrkdwn_html(text: str, names: Mapping[str, str] | None = None, *, inline: bool = False) -> str:
    """`text` (Slack mrkdwn) as HTML that is safe to put in a page as it is.

    `names`: Slack user (and channel) ids to the names people know them by; ids not in it show as ids.
    `inline`: for a table cell or a field: text that is only paragraphs comes without <p>, its
    paragraphs joined by line breaks (a quote, a list or code still comes as its block).
    """
    names = names or {}
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    at = 0
    for fence in _FENCE.finditer(text):
        if not fence.group(1).strip("\n"):
            continue
        out.extend(_blocks(text[at : fence.start()].split("\n"), names))
        out.append(_code_block(fence.group(1)))
        at = fence.end()
    out.extend(_blocks(text[at:].split("\n"), names))
    if inline and all(block.startswith("<p>") for block in out):
        return "<br>".join(block[3:-4] for block in out)
    return "".join(out)
