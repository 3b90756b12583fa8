"""Does outbound content hold a secret? One multi-pattern pass over each reading of the text.

Every outbound path (messages, cards, files, tool-call records) checks its content against
the values in scope before anything is sent or stored. A value can leave encoded as well as
plain, so each value contributes the patterns that betray it (`encoded_forms`): base64 and
base64url at each of the three byte alignments, base32 at each of its five, hex. With 15 or
so patterns per secret and 100 secrets in scope, one `in` scan per pattern would read the
text about 1,500 times; an Aho-Corasick automaton over all patterns reads it once.

Escapes can be mixed freely, byte by byte (`%43a%6E`, `\\u0043a\\u006E`, `&#67;a&#x6e;`), so
they are not patterns (a value of n bytes would need 2^n of them): the text is also read
unescaped (`_unescape`: percent-encoding, JSON/JavaScript/Python backslash escapes, HTML
character references), near its escapes only, and the plain value and every pattern are
looked for there too. Base64, base32 and hex wrapped into lines (MIME at 76, PEM at 64,
xxd at 60, or any width, indented or not) are looked for in a reading with the line breaks
removed (`_unwrap`), of the unescaped text when it has escapes (a JSON string holding a PEM
body, a form-encoded certificate). Only one layer of escapes is undone, and a value split
across several calls or several fields of one call is not found.

Hex digits, base32 and escapes mean the same in either case, so the automaton runs over an
ASCII-lowercased copy of each reading and every hit is then checked against the reading
itself: exactly for the plain value and base64 (where case is data), ignoring case for hex
and base32. `Password` does not match `password`. The copy also reads `+` as a space, so
that a form-encoded value (`a+b` for `a b`) is found through its plain pattern.
"""

import base64
import bisect
import codecs
import functools
import html.entities
import re
import string
from collections.abc import Iterable, Iterator

from ahocorasick_rs import AhoCorasick, Implementation

# An encoded form shorter than this is not a pattern. A 3-byte value's hex ("616263") or
# the 2-character base64 core of a short value at an awkward alignment would match
# innocent text (hashes, ids, any base64 blob) often enough to refuse ordinary messages.
# 8 characters carry at least 32 bits (hex), 40 (base32) or 48 (base64) of the value:
# chance matches become rare, while any value of 7 bytes or more keeps every one of its
# forms (its shortest, base64 at offset 1 mod 3, is 8 characters). The plain value is
# always a pattern, whatever its length, in every reading; reading `+` as a space counts
# as an encoding, so it is done only for values of MIN_ENCODED_VALUE_BYTES or more.
MIN_ENCODED_LEN = 8
MIN_ENCODED_VALUE_BYTES = 7

# A DFA scanned 64 KiB with 100 secrets in scope about 2.5x faster than the contiguous
# NFA here, for a few MB of memory and ~10 ms of building, which scanner_for caches. But
# its building grows with the square of a pattern's length when the pattern repeats
# itself: one 8,000-character "kkk..." value took seconds, a 64 KiB one would take
# minutes. So a DFA only for patterns this short and this many in total (at worst ~0.15 s
# of building here), the NFA (linear to build) otherwise. The library's own default picks
# a DFA for few patterns whatever their length, so it is never left to choose.
DFA_MAX_PATTERN_LEN = 256
DFA_MAX_PATTERN_CHARS = 64 * 1024

# How many characters of text one character of a reading can stand for: 12 for the longest
# escape of one character (%F0%9F%98%80, \ud83d\ude00, a named reference), plus a removed
# line break with its indentation before it. A file is scanned in chunks that overlap by
# this many times the longest pattern, so an escaped or wrapped value across a chunk
# boundary is found too.
MAX_CHARS_PER_READ_CHAR = 24

# The Rust library puts a prefilter in front of a small set of patterns, which text full of
# letters and digits keeps waking: with one secret in scope a 64 KiB scan cost four times
# what it cost with 100. Patterns with an uppercase letter never match the folded text, so
# these only make every set large enough to be scanned by the automaton alone.
_NEVER_FOUND = [a + b for a in string.ascii_uppercase for b in "ABC"]

_PLAIN, _EXACT, _FOLD = "plain", "exact", "fold"

# One pattern per first character, each found by the fast literal search (one pattern
# for all three tried a character class at every position: 80 ms for 64 KiB of JSON).
# Escapes of one character (\n, \", \\, \/) are not decoded: every line of a JSON text
# would be one more escape to read in Python. A value holding such characters has its
# JSON-escaped form as a pattern (_forms), and the unwrapped reading removes \n and \r.
_ESCAPES = {
    "%": re.compile(r"%(?P<percent>[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*)"),  # runs: a character's bytes
    "\\": re.compile(
        r"\\(?:x(?P<xbytes>[0-9A-Fa-f]{2}(?:\\x[0-9A-Fa-f]{2})*)"
        r"|u(?P<utf16>[0-9A-Fa-f]{4}(?:\\u[0-9A-Fa-f]{4})*)"  # runs: surrogate pairs
        r"|U(?P<codepoint>[0-9A-Fa-f]{8}))"
    ),
    "&": re.compile(
        r"&(?:#[xX](?P<hexref>[0-9A-Fa-f]{1,6});?|#(?P<decref>[0-9]{1,7});?|(?P<named>[A-Za-z][A-Za-z0-9]{1,9};))"
    ),
}
# HTML5's named references (&amp; &lt; &gt; &quot; &apos; &nbsp; &eacute; ...; a few name
# two characters), the ones of up to 10 letters, which the pattern above reads.
_NAMED = html.entities.html5
_LINE_BREAK = re.compile(r"\r\n?|\n")
_INDENTED_LINE_BREAK = re.compile(r"(?:\r\n?|\n)[ \t]{0,8}")
_INDENTED = re.compile(r"\n[ \t]")
# Line breaks as a JSON string writes them (a PEM body in a JSON string).
_ESCAPED_LINE_BREAK = re.compile(r"\\(?:r(?:\\n)?|n)")
# A plain form that the unwrapped reading cannot hold (when only real line breaks are removed).
_BROKEN_BY_UNWRAPPING = re.compile(r"[\r\n]|^[ \t]")
_TO_URLSAFE = str.maketrans("+/", "-_")
_JSON_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _fold(text: str) -> str:
    """ASCII letters lowercased and `+` read as a space, every index kept.

    Not str.lower(): it lowercases non-ASCII letters too, some into two characters
    (shifting every index after them) and Greek sigma depending on its neighbours (so a
    value could fold differently alone than inside the text). UTF-8 bytes of non-ASCII
    characters are all >= 0x80, which bytes.lower() leaves alone. A lone surrogate (JSON
    can carry one) becomes "?", one character for one, because the automaton only takes
    valid UTF-8; hits are checked against the original text anyway.
    """
    if text.isascii():
        folded = text.lower()
    else:
        folded = text.encode("utf-8", "replace").lower().decode("utf-8")
    return folded.replace("+", " ") if "+" in folded else folded


def _cores(data: bytes, encode, bits: int) -> list[str]:
    """The characters of encode(...) fixed by `data` alone, for each offset it can sit at.

    Base64 turns each 3 bytes into 4 characters of 6 bits, base32 each 5 bytes into 8 of
    5. Inside a larger blob, the characters straddling the value's first and last bytes
    also depend on the neighbouring bytes, and which characters straddle depends on the
    value's offset (mod 3 or mod 5); the characters between them (the stable core) are the
    same wherever the value sits at that alignment, padded or not, at the end or not.
    """
    group = 3 if bits == 6 else 5
    cores = []
    for k in range(group):
        encoded = encode(b"\0" * k + data).decode("ascii")
        first = -(-8 * k // bits)  # the first character whose bits all come from `data`
        end = 8 * (k + len(data)) // bits  # past the last such character
        cores.append(encoded[first:end])
    return cores


def _forms(value: str) -> list[tuple[str, str]]:
    """(kind, pattern) for the value and each encoding of it that differs from it."""
    data = value.encode("utf-8", "surrogatepass")
    base64_cores = _cores(data, base64.b64encode, 6)
    encoded = [(_EXACT, core) for core in base64_cores]
    encoded += [(_EXACT, core.translate(_TO_URLSAFE)) for core in base64_cores]
    encoded += [(_FOLD, data.hex()), (_FOLD, data.hex().upper())]
    encoded += [(_FOLD, core) for core in _cores(data, base64.b32encode, 5)]
    # As a JSON string holds it once its \\u escapes are read: quotes, backslashes and line
    # breaks escaped (`\\"`, `\\\\`, `\\n`), perhaps `\\/` too.
    json_escaped = "".join(_JSON_SHORT_ESCAPES.get(char, char) for char in value)
    forms = [(_PLAIN, value)]
    seen = {value}
    for form in (json_escaped, json_escaped.replace("/", "\\/")):
        if form not in seen:
            seen.add(form)
            forms.append((_PLAIN, form))
    for kind, form in encoded:
        if len(form) >= MIN_ENCODED_LEN and form not in seen:
            seen.add(form)
            forms.append((kind, form))
    return forms


def encoded_forms(value: str) -> list[str]:
    """The patterns that betray `value`: itself first, then its encodings (no duplicates).

    base64 and base64url stable cores at the three byte alignments, hex in lower and upper
    case, base32 stable cores at the five byte alignments (found in either case).
    Encodings shorter than MIN_ENCODED_LEN are left out; see there for why. Escaped and
    line-wrapped forms have no patterns of their own: the scanner reads the text unescaped
    and unwrapped.
    """
    return [form for _, form in _forms(value)]


def _is_form(kind: str, found: str, form: str) -> bool:
    """Is `found` (of the same length, equal once folded) really this form of a value?"""
    if kind == _FOLD or found == form:
        return True
    # `+` for a space (form encoding), in a value long enough for encodings to count.
    return (
        kind == _PLAIN
        and len(form.encode("utf-8", "surrogatepass")) >= MIN_ENCODED_VALUE_BYTES
        and all(f == v or (f == "+" and v == " ") for f, v in zip(found, form, strict=True))
    )


def _decode_escape(match: re.Match) -> tuple[str, int] | None:
    """What an escape (or a run of them) stands for, and how many characters of the text
    each of its bytes (3 or 4) or UTF-16 units (-6) took; 0 for a single escape."""
    group = match.lastgroup
    digits = match.group(group)
    if group == "percent":
        return bytes.fromhex(digits.replace("%", "")).decode("utf-8", "surrogateescape"), 3
    if group == "xbytes":
        return bytes.fromhex(digits.replace("\\x", "")).decode("utf-8", "surrogateescape"), 4
    if group == "utf16":
        return bytes.fromhex(digits.replace("\\u", "")).decode("utf-16-be", "surrogatepass"), -6
    if group == "named":
        value = _NAMED.get(digits)
        return (value, 0) if value else None
    number = int(digits, 10 if group == "decref" else 16)
    return (chr(number), 0) if number <= 0x10FFFF else None


class _Unescaped:
    """The text with its escapes decoded, each escape's place, and the way back."""

    def __init__(self, text: str, tokens: list[tuple[int, int, int, int, str, int]]):
        self.text = text
        self.tokens = tokens  # (start, end) here, (start, end) in the original, decoded, unit
        self._starts = [token[0] for token in tokens]

    def original(self, at: int, is_end: bool = False) -> int:
        """The original index of this reading's index `at` (a start, or an end if is_end)."""
        i = bisect.bisect_right(self._starts, at) - 1
        if i < 0:
            return at
        start, end, original_start, original_end, decoded, unit = self.tokens[i]
        if at >= end:
            return original_end + at - end
        inside = at - start
        if inside == 0:
            return original_start
        if unit > 0:
            return original_start + unit * len(decoded[:inside].encode("utf-8", "surrogateescape"))
        if unit < 0:
            return original_start - unit * (len(decoded[:inside].encode("utf-16-be", "surrogatepass")) // 2)
        return original_end if is_end else original_start  # inside one reference: all of it


def _unescape(text: str) -> _Unescaped | None:
    """The text with every escape decoded once, or None if it has none."""
    pieces, tokens, at, shift = [], [], 0, 0
    matches = [match for first, escape in _ESCAPES.items() if first in text for match in escape.finditer(text)]
    # The three kinds never overlap (none holds another's first character): in text order,
    # they are what one pattern for all would have found.
    matches.sort(key=lambda match: match.start())
    for match in matches:
        decoded = _decode_escape(match)
        if decoded is None:
            continue
        start, end = match.span()
        pieces += [text[at:start], decoded[0]]
        tokens.append((start + shift, start + shift + len(decoded[0]), start, end, *decoded))
        shift += len(decoded[0]) - (end - start)
        at = end
    if not tokens:
        return None
    pieces.append(text[at:])
    return _Unescaped("".join(pieces), tokens)


class _Unwrapped:
    """The text with its line breaks (and the indentation after them) removed, and the way back.

    In two stages, each one C-level pass: the escaped breaks (`\\n`, `\\r`), then the real
    ones. Each stage's removals are found again only once something was found: most texts
    hold nothing.
    """

    def __init__(self, text: str):
        self.source = text
        self._stages: list[tuple[re.Pattern, str]] = []  # (what was removed, from which text)
        if "\\" in text:
            joined, count = _ESCAPED_LINE_BREAK.subn("", text)
            if count:
                self._stages.append((_ESCAPED_LINE_BREAK, text))
                text = joined
        if _INDENTED.search(text):
            joined = _INDENTED_LINE_BREAK.sub("", text)
            breaks = _INDENTED_LINE_BREAK
        else:  # the same as _LINE_BREAK.sub, faster
            joined = text.replace("\r", "").replace("\n", "")
            breaks = _LINE_BREAK
        if len(joined) != len(text):
            self._stages.append((breaks, text))
        self.text = joined
        self.changed = bool(self._stages)
        # Removing `\n` takes characters that are not line breaks (a value may begin with
        # n after a backslash): the text before this stage must then be read as well.
        self.escapes_removed = bool(self._stages) and self._stages[0][0] is _ESCAPED_LINE_BREAK
        self._removals: list[tuple[list[int], list[int]]] | None = None

    def _source_index(self, at: int) -> int:
        """The source's index of this reading's character `at`."""
        if self._removals is None:
            self._removals = []
            for breaks, text in self._stages:
                places, totals, total = [], [], 0
                for match in breaks.finditer(text):
                    places.append(match.start() - total)
                    total += match.end() - match.start()
                    totals.append(total)
                self._removals.append((places, totals))
        for places, totals in reversed(self._removals):
            i = bisect.bisect_right(places, at) - 1
            at += totals[i] if i >= 0 else 0
        return at

    def joins_lines(self, start: int, end: int) -> bool:
        """Was a line break removed inside [start, end)? (If not, the source has it as is.)"""
        return self._source_index(end - 1) - self._source_index(start) != end - 1 - start

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        return self._source_index(start), self._source_index(end - 1) + 1


class _Patterns:
    """An automaton over folded patterns, and what each stands for."""

    def __init__(self, table: dict[str, list[tuple[str, str, str]]]):
        self.entries = list(table.values())
        self.longest = max(map(len, table))
        small = sum(map(len, table)) <= DFA_MAX_PATTERN_CHARS and self.longest <= DFA_MAX_PATTERN_LEN
        implementation = Implementation.DFA if small else Implementation.ContiguousNFA
        self._automaton = AhoCorasick([*table, *_NEVER_FOUND], implementation=implementation)

    def hits(self, reading: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, str, str]]:
        """(start, end, name, kind) of each verified hit in reading[start:end], indexes of `reading`."""
        piece = reading[start:end]
        for index, hit_start, hit_end in self._automaton.find_matches_as_indexes(_fold(piece), overlapping=True):
            found = piece[hit_start:hit_end]
            for name, kind, form in self.entries[index]:
                if _is_form(kind, found, form):
                    yield start + hit_start, start + hit_end, name, kind
                    break


class SecretScanner:
    """Finds which secret, if any, a text holds, plain, encoded or escaped, in one pass per reading."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        # Folded pattern -> the secrets and exact forms it stands for. Several can share
        # one folded pattern (a value's hex in two cases, two secrets with one value).
        table: dict[str, list[tuple[str, str, str]]] = {}
        for name, value in pairs:
            if not value:
                continue
            for kind, form in _forms(value):
                entries = table.setdefault(_fold(form), [])
                if (name, kind, form) not in entries:
                    entries.append((name, kind, form))
        self._patterns = _Patterns(table) if table else None
        # Values that the unwrapped reading cannot hold: with a line break (a key file), or
        # with a space or tab first, which reads as indentation after a break.
        broken = {
            key: entries
            for key, entries in table.items()
            if any(kind == _PLAIN and _BROKEN_BY_UNWRAPPING.search(form) for _, kind, form in entries)
        }
        self._broken = _Patterns(broken) if broken else None

    def _windows(self, text: str, unescaped: _Unescaped) -> Iterator[tuple[int, int]]:
        """Merged stretches of the text around its escapes, so that any match holding part of
        an escape lies wholly inside one (unescaping could have cut such a match apart)."""
        reach, size = self._patterns.longest - 1, len(text)
        current = None
        for *_, original_start, original_end, _decoded, _unit in unescaped.tokens:
            start, end = max(0, original_start - reach), min(size, original_end + reach)
            if current and start <= current[1]:
                current[1] = end
                continue
            if current:
                yield tuple(current)
            current = [start, end]
        yield tuple(current)

    def spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        """(start, end, secret name) of each occurrence, as spans of `text`.

        One scan of the text read unescaped and unwrapped (only as far as it has escapes
        and line breaks), where a plain value must not join lines. Then the text as it is
        around its escapes (decoding one could cut a value next to it), and the unescaped
        text before its line breaks were removed: all of it if escaped breaks were (they
        take letters with them), else for the values a removal would cut.
        """
        if self._patterns is None or not text:
            return
        unescaped = _unescape(text) if ("%" in text or "\\" in text or "&" in text) else None
        source = unescaped.text if unescaped is not None else text
        unwrapped = _Unwrapped(source) if ("\n" in source or "\r" in source or "\\" in source) else None
        if unwrapped is not None and not unwrapped.changed:
            unwrapped = None

        def original(start: int, end: int) -> tuple[int, int]:
            if unescaped is None:
                return start, end
            return unescaped.original(start), unescaped.original(end, is_end=True)

        for start, end, name, kind in self._patterns.hits(unwrapped.text if unwrapped else source):
            if unwrapped is not None:
                if kind == _PLAIN and unwrapped.joins_lines(start, end):
                    continue  # a plain value broken across lines is not that value
                start, end = unwrapped.source_span(start, end)
            yield *original(start, end), name
        if unescaped is not None:
            for window_start, window_end in self._windows(text, unescaped):
                for start, end, name, _kind in self._patterns.hits(text, window_start, window_end):
                    yield start, end, name
        if unwrapped is not None:
            before_unwrapping = self._patterns if unwrapped.escapes_removed else self._broken
            for start, end, name, _kind in before_unwrapping.hits(source) if before_unwrapping else ():
                yield *original(start, end), name

    def find(self, text: str) -> str | None:
        """The name of the first secret found in `text`, or None if it holds none."""
        for _start, _end, name in self.spans(text):
            return name
        return None

    def redact(self, text: str, mark: str = "[redacted]") -> str:
        """The text with every occurrence of a value or an encoded form replaced by `mark`."""
        cuts: list[list[int]] = []
        for start, end, _name in sorted(self.spans(text)):
            if cuts and start <= cuts[-1][1]:
                cuts[-1][1] = max(cuts[-1][1], end)
            else:
                cuts.append([start, end])
        if not cuts:
            return text
        pieces, at = [], 0
        for start, end in cuts:
            pieces += [text[at:start], mark]
            at = end
        return "".join([*pieces, text[at:]])

    def find_in_file(self, handle, chunk_size: int = 1024 * 1024) -> str | None:
        """The name of the first secret found in a binary file's bytes, or None.

        Read in chunks, decoded as UTF-8 incrementally (a character split across chunks
        is kept whole; bytes that are not UTF-8 become U+FFFD, which no value's forms
        contain), each chunk scanned with the end of the previous one, so a value across
        a chunk boundary is found too, escaped or wrapped (MAX_CHARS_PER_READ_CHAR).
        """
        if self._patterns is None:
            return None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        overlap, tail = self._patterns.longest * MAX_CHARS_PER_READ_CHAR, ""
        while True:
            data = handle.read(chunk_size)
            window = tail + decoder.decode(data, final=not data)
            name = self.find(window)
            if name is not None or not data:
                return name
            tail = window[-overlap:]

    def find_in(self, texts: Iterable[str]) -> str | None:
        """The name of the first secret found in any of `texts`, or None."""
        for text in texts:
            name = self.find(text)
            if name is not None:
                return name
        return None


_NOTHING = SecretScanner(())


@functools.lru_cache(maxsize=64)
def _scanner(pairs: tuple[tuple[str, str], ...]) -> SecretScanner:
    return SecretScanner(pairs)


def scanner_for(pairs: Iterable[tuple[str, str]]) -> SecretScanner:
    """A scanner for these (name, value) pairs, built once per process for the same pairs.

    Safe per process: keyed by the values themselves, which every caller reads from the
    vault first, so a changed secret is a different key, never a stale scanner.

    A session makes many outbound calls with the same secrets in scope; building the
    automaton costs far more than one scan (see bench/secret_check.py).
    """
    key = tuple((name, value) for name, value in pairs)
    return _scanner(key) if key else _NOTHING
