"""Does outbound content hold a secret? One multi-pattern pass over the text, whatever the count.

Every outbound path (messages, cards, files, tool-call records) checks its content against
the values in scope before anything is sent or stored. A value can leave encoded as well as
plain, so each value contributes the patterns that betray it (`encoded_forms`): base64 and
base64url at each of the three byte alignments, hex, percent-encoding. With 13 or so
patterns per secret and 100 secrets in scope, one `in` scan per pattern would read the text
about 1,300 times; an Aho-Corasick automaton over all patterns reads it once.

Hex digits and percent escapes mean the same in either case, so the automaton runs over an
ASCII-lowercased copy of the text and every hit is then checked against the original:
exactly for the plain value and base64 (where case is data), ignoring case for hex, and
ignoring case only inside the `%XX` escapes for percent-encoding. Mixed-case hex and
escapes are caught without a second pass, and `Password` does not match `password`.
"""

import base64
import codecs
import functools
import re
from collections.abc import Iterable, Iterator
from urllib.parse import quote, quote_plus

from ahocorasick_rs import AhoCorasick, Implementation

# An encoded form shorter than this is not a pattern. A 3-byte value's hex ("616263") or
# the 2-character base64 core of a short value at an awkward alignment would match
# innocent text (hashes, ids, any base64 blob) often enough to refuse ordinary messages.
# 8 characters carry at least 32 bits (hex) or 48 bits (base64) of the value: chance
# matches become rare, while any value of 7 bytes or more keeps every one of its forms.
# The plain value is always a pattern, whatever its length.
MIN_ENCODED_LEN = 8

# A DFA scanned 64 KiB with 100 secrets in scope about 2.5x faster than the contiguous
# NFA here, for a few MB of memory and ~10 ms of building, which scanner_for caches. But
# its building grows with the square of a pattern's length when the pattern repeats
# itself: one 8,000-character "kkk..." value took seconds, a 64 KiB one would take
# minutes. So a DFA only for patterns this short and this many in total (at worst ~0.15 s
# of building here), the NFA (linear to build) otherwise. The library's own default picks
# a DFA for few patterns whatever their length, so it is never left to choose.
DFA_MAX_PATTERN_LEN = 256
DFA_MAX_PATTERN_CHARS = 64 * 1024

_EXACT, _HEX, _PERCENT = "exact", "hex", "percent"
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_TO_URLSAFE = str.maketrans("+/", "-_")


def _upper_escapes(text: str) -> str:
    return _ESCAPE.sub(lambda m: m.group().upper(), text)


def _lower_escapes(text: str) -> str:
    return _ESCAPE.sub(lambda m: m.group().lower(), text)


def _fold(text: str) -> str:
    """ASCII letters lowercased, every other character kept, so indexes stay the same.

    Not str.lower(): it lowercases non-ASCII letters too, some into two characters
    (shifting every index after them) and Greek sigma depending on its neighbours (so a
    value could fold differently alone than inside the text). UTF-8 bytes of non-ASCII
    characters are all >= 0x80, which bytes.lower() leaves alone. A lone surrogate (JSON
    can carry one) becomes "?", one character for one, because the automaton only takes
    valid UTF-8; hits are checked against the original text anyway.
    """
    if text.isascii():
        return text.lower()
    return text.encode("utf-8", "replace").lower().decode("utf-8")


def _base64_cores(data: bytes) -> list[str]:
    """The base64 characters fixed by `data` alone, for each offset mod 3 it can sit at.

    Base64 turns each 3 bytes into 4 characters of 6 bits. Inside a larger blob, the
    characters straddling the value's first and last bytes also depend on the neighbouring
    bytes, and which characters straddle depends on the value's offset mod 3; the
    characters between them (the stable core) are the same wherever the value sits at
    that alignment, padded or not, at the end of the blob or not.
    """
    cores = []
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + data).decode("ascii")
        first = -(-8 * k // 6)  # the first character whose 6 bits all come from `data`
        end = 8 * (k + len(data)) // 6  # past the last such character
        cores.append(encoded[first:end])
    return cores


def _forms(value: str) -> list[tuple[str, str]]:
    """(kind, pattern) for the value and each encoding of it that differs from it."""
    data = value.encode("utf-8", "surrogatepass")
    cores = _base64_cores(data)
    quoted = quote(data, safe="")  # uppercase escapes, as RFC 3986 recommends
    plus = quote_plus(data, safe="")
    encoded = [(_EXACT, core) for core in cores]
    encoded += [(_EXACT, core.translate(_TO_URLSAFE)) for core in cores]
    encoded += [(_HEX, data.hex()), (_HEX, data.hex().upper())]
    for form in (quoted, plus):
        encoded += [(_PERCENT, form), (_PERCENT, _lower_escapes(form))]
    forms = [(_EXACT, value)]
    seen = {value}
    for kind, form in encoded:
        if len(form) >= MIN_ENCODED_LEN and form not in seen:
            seen.add(form)
            forms.append((kind, form))
    return forms


def encoded_forms(value: str) -> list[str]:
    """The patterns that betray `value`: itself first, then its encodings (no duplicates).

    base64 and base64url stable cores at the three byte alignments, hex in lower and
    upper case, percent-encoding (quote and quote_plus, with upper- and lowercase escapes).
    Encodings shorter than MIN_ENCODED_LEN are left out; see there for why.
    """
    return [form for _, form in _forms(value)]


class SecretScanner:
    """Finds which secret, if any, a text holds, plain or encoded, in one automaton pass."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        # Folded pattern -> the secrets and exact forms it stands for. Several can share
        # one folded pattern (a value's hex in two cases, two secrets with one value).
        table: dict[str, list[tuple[str, str, str]]] = {}
        for name, value in pairs:
            if not value:
                continue
            for kind, form in _forms(value):
                # A percent form is kept with uppercase escapes, the shape checked against.
                entry = (name, kind, _upper_escapes(form) if kind == _PERCENT else form)
                entries = table.setdefault(_fold(form), [])
                if entry not in entries:
                    entries.append(entry)
        self._entries = list(table.values())
        self._longest = max(map(len, table), default=0)
        self._automaton = None
        if table:
            small = sum(map(len, table)) <= DFA_MAX_PATTERN_CHARS and max(map(len, table)) <= DFA_MAX_PATTERN_LEN
            implementation = Implementation.DFA if small else Implementation.ContiguousNFA
            self._automaton = AhoCorasick(list(table), implementation=implementation)

    def spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        """(start, end, secret name) of each occurrence, in the order their ends appear."""
        if self._automaton is None or not text:
            return
        for index, start, end in self._automaton.find_matches_as_indexes(_fold(text), overlapping=True):
            found = text[start:end]
            for name, kind, form in self._entries[index]:
                if (
                    kind == _HEX
                    or (kind == _EXACT and found == form)
                    or (kind == _PERCENT and _upper_escapes(found) == form)
                ):
                    yield start, end, name
                    break

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
        a chunk boundary is found too.
        """
        if self._automaton is None:
            return None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        overlap, tail = self._longest - 1, ""
        while True:
            data = handle.read(chunk_size)
            window = tail + decoder.decode(data, final=not data)
            name = self.find(window)
            if name is not None or not data:
                return name
            tail = window[-overlap:] if overlap else ""

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

    A session makes many outbound calls with the same secrets in scope; building the
    automaton costs far more than one scan (see bench/secret_check.py).
    """
    key = tuple((name, value) for name, value in pairs)
    return _scanner(key) if key else _NOTHING
