"""The outbound secret check: every encoding at every alignment, every escape in any mix,
wrapped or not, one pass for many secrets."""

import base64
import html.entities
import io
import json
import random
import re
import string
import textwrap
import time
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secrets_vault.scanner import (
    DFA_MAX_PATTERN_CHARS,
    MAX_CHARS_PER_READ_CHAR,
    MIN_ENCODED_LEN,
    SecretScanner,
    encoded_forms,
    scanner_for,
)

# pytest-django's autouse fixtures are function-scoped; these tests use none of them.
examples = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def random_case(text: str, rnd: random.Random) -> str:
    return "".join(c.upper() if rnd.random() < 0.5 else c.lower() for c in text)


def percent_mix(blob: bytes, rnd: random.Random) -> str:
    """Each byte raw (where a URL may carry it raw) or %XX in either case, spaces as + or %20."""
    out = []
    for byte in blob:
        char = chr(byte)
        if byte < 0x80 and (char.isalnum() or char in "-._~!$'()*,;:@/?") and rnd.random() < 0.5:
            out.append(char)
        elif char == " " and rnd.random() < 0.5:
            out.append("+")
        else:
            out.append("%" + random_case(f"{byte:02X}", rnd))
    return "".join(out)


def json_mix(text: str, rnd: random.Random) -> str:
    """A JSON string: each character raw or \\uXXXX (a pair beyond the BMP) in either case."""
    out = []
    for char in text:
        if char in '"\\' or ord(char) < 0x20 or rnd.random() < 0.5:
            units = char.encode("utf-16-be", "surrogatepass")
            out.append("".join("\\u" + random_case(units[i : i + 2].hex(), rnd) for i in range(0, len(units), 2)))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


NAMES = {value: name for name, value in html.entities.html5.items() if name.endswith(";") and len(name) <= 11}


def html_mix(text: str, rnd: random.Random) -> str:
    """Each character raw, &#NN;, &#xHH; (either case) or its named reference where it has one."""
    out = []
    for char in text:
        choice = rnd.random()
        if char in NAMES and choice < 0.25:
            out.append("&" + NAMES[char])
        elif choice < 0.5 or char in "&<":
            out.append(f"&#{ord(char)};")
        elif choice < 0.75:
            out.append(f"&#{rnd.choice('xX')}{random_case(f'{ord(char):x}', rnd)};")
        else:
            out.append(char)
    return "".join(out)


def backslash_x_mix(blob: bytes, rnd: random.Random) -> str:
    """C/shell-style bytes: each ASCII byte raw or \\xHH, every other byte \\xHH."""
    return "".join(
        chr(b) if 0x20 < b < 0x7F and chr(b) != "\\" and rnd.random() < 0.5 else "\\x" + random_case(f"{b:02x}", rnd)
        for b in blob
    )


def wrap(encoded: str, width: int, newline: str = "\n", indent: str = "") -> str:
    return newline.join(indent + line for line in textwrap.wrap(encoded, width))


# Each encodes a whole blob (prefix + value + suffix), as an agent would encode a file.
ENCODERS = {
    "base64": lambda blob, rnd: base64.b64encode(blob).decode(),
    "base64 unpadded": lambda blob, rnd: base64.b64encode(blob).decode().rstrip("="),
    "base64url": lambda blob, rnd: base64.urlsafe_b64encode(blob).decode(),
    "base64 MIME (76, CRLF)": lambda blob, rnd: wrap(base64.b64encode(blob).decode(), 76, "\r\n"),
    "base64 PEM (64)": lambda blob, rnd: f"-----BEGIN KEY-----\n{wrap(base64.b64encode(blob).decode(), 64)}\n-----END",
    "base64 indented in YAML": lambda blob, rnd: "key: |\n" + wrap(base64.b64encode(blob).decode(), 64, "\n", "    "),
    "base64 PEM in a JSON string": lambda blob, rnd: json.dumps(wrap(base64.b64encode(blob).decode(), 64)),
    "base64 percent-encoded": lambda blob, rnd: quote(base64.b64encode(blob).decode(), safe=""),
    "base32": lambda blob, rnd: base64.b32encode(blob).decode(),
    "base32 lowercase unpadded": lambda blob, rnd: base64.b32encode(blob).decode().lower().rstrip("="),
    "hex": lambda blob, rnd: blob.hex(),
    "HEX": lambda blob, rnd: blob.hex().upper(),
    "hex in mixed case": lambda blob, rnd: random_case(blob.hex(), rnd),
    "hex wrapped (xxd -p)": lambda blob, rnd: wrap(blob.hex(), 60),
    "percent": lambda blob, rnd: quote(blob, safe=""),
    "percent plus": lambda blob, rnd: quote_plus(blob, safe=""),
    "percent lowercase escapes": lambda blob, rnd: lower_escapes(quote(blob, safe="")),
    "percent every byte": lambda blob, rnd: "".join(f"%{b:02X}" for b in blob),
    "percent every byte, lowercase": lambda blob, rnd: "".join(f"%{b:02x}" for b in blob),
    "percent, any mix": percent_mix,
    "\\x bytes, any mix": backslash_x_mix,
}


def _units(text: str) -> list[bytes]:
    data = text.encode("utf-16-be", "surrogatepass")
    return [data[i : i + 2] for i in range(0, len(data), 2)]


# Each escapes a whole text (prefix + value + suffix).
TEXT_ENCODERS = {
    "JSON \\u, every character": lambda text, rnd: '"' + "".join(f"\\u{u.hex()}" for u in _units(text)) + '"',
    "JSON \\u, any mix and case": json_mix,
    "JSON as json.dumps writes it": lambda text, rnd: json.dumps(text),
    "HTML references, any mix": html_mix,
    "HTML decimal references": lambda text, rnd: "".join(f"&#{ord(c)};" for c in text),
}


# Values of 7 UTF-8 bytes or more keep all their encoded forms (MIN_ENCODED_LEN = 8).
values = st.text(min_size=1, max_size=40).filter(lambda v: len(v.encode()) >= 7)
surrounding = st.text(max_size=30)
# Words around an encoded blob: nothing that could join an escape or a base64 run.
words = st.text(alphabet=" .,:;!?()[]{}", max_size=10)


@examples
@given(value=values, before=surrounding, after=surrounding)
def test_the_plain_value_is_found_anywhere(value, before, after):
    assert SecretScanner([("API_KEY", value)]).find(before + value + after) == "API_KEY"


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["std", "url"])
def test_base64_at_each_alignment(offset, encode):
    # "~~~" encodes to "fn5+" in base64 and "fn5-" in base64url: each alphabet needs its own forms.
    value = "~~~~~~~~~~~"
    encoded = encode(b"x" * offset + value.encode() + b"tail").decode()
    scanner = SecretScanner([("TILDES", value)])
    assert scanner.find(f"payload: {encoded} end") == "TILDES"
    assert scanner.find(f"payload: {encode(b'x' * offset + value.encode()).decode()}") == "TILDES"


def test_base64_forms_are_the_stable_cores_of_three_alignments():
    forms = encoded_forms("hunter2-secret")
    for offset in range(3):
        blob = base64.b64encode(b"\xff" * offset + b"hunter2-secret" + b"\xff\xff").decode()
        assert any(form in blob for form in forms[1:4])
    assert forms[1:4] == ["aHVudGVyMi1zZWNyZX", "h1bnRlcjItc2VjcmV0", "odW50ZXIyLXNlY3Jld"]


def test_hex_in_any_case():
    value = "s3cr3t-token-value"
    scanner = SecretScanner([("TOKEN", value)])
    hexed = value.encode().hex()
    assert hexed.upper() in encoded_forms(value) and hexed in encoded_forms(value)
    mixed = hexed[:18].upper() + hexed[18:]  # "...742D746F" + "6b656e..."
    assert mixed not in (hexed, hexed.upper())
    for text in (hexed, hexed.upper(), mixed):
        assert scanner.find(f"dump {text} done") == "TOKEN"


def test_percent_encoding_with_reserved_characters():
    value = "p@ss/w:rd?&=+ x#é"
    scanner = SecretScanner([("DB_PASSWORD", value)])
    quoted, plus = quote(value, safe=""), quote_plus(value, safe="")
    assert "%2F" in quoted and "+" in plus and plus != quoted
    for text in (quoted, plus, lower_escapes(quoted), lower_escapes(plus), quoted.replace("%2F", "%2f")):
        assert scanner.find(f"https://example.com/?q={text}&x=1") == "DB_PASSWORD"


def test_case_is_data_outside_hex_and_escapes():
    value = "Pass/Word-Secret"
    scanner = SecretScanner([("PW", value)])
    b64 = base64.b64encode(value.encode()).decode()
    assert scanner.find(value) == "PW"
    for near_miss in (value.lower(), value.upper(), quote(value, safe="").lower(), b64.swapcase()):
        assert scanner.find(near_miss) is None, near_miss


def test_the_right_name_among_several():
    scanner = SecretScanner([("A", "alpha-secret-1"), ("B", "bravo-secret-2"), ("C", "charlie-secret-3")])
    assert scanner.find("log " + b"bravo-secret-2".hex() + " end") == "B"
    assert scanner.find("first charlie-secret-3 then alpha-secret-1") == "C"
    assert scanner.find(base64.b64encode(b"..alpha-secret-1..").decode()) == "A"


def test_clean_text_finds_nothing():
    scanner = SecretScanner([("A", "alpha-secret-1")])
    assert scanner.find("nothing to see here, alpha-secret but not the value") is None
    assert scanner.find("") is None
    assert SecretScanner([]).find("alpha-secret-1") is None


def test_short_values_make_no_short_patterns():
    assert encoded_forms("abc") == ["abc"]  # "616263" and "YWJj" would match innocent text
    scanner = SecretScanner([("PIN", "abc")])
    assert scanner.find("id 616263, blob YWJj") is None
    assert scanner.find("the pin is abc") == "PIN"


@examples
@given(value=st.text(min_size=1, max_size=20))
def test_every_encoded_form_is_long_enough_and_new(value):
    forms = encoded_forms(value)
    assert forms[0] == value
    # As a JSON string writes the value, its \\u escapes read: the value itself, whatever its length.
    escaped = re.sub(r"\\u00([01][0-9a-f])", lambda m: chr(int(m[1], 16)), json.dumps(value, ensure_ascii=False)[1:-1])
    short = {escaped, escaped.replace("/", "\\/")}
    assert all(len(form) >= MIN_ENCODED_LEN for form in forms[1:] if form not in short)
    assert len(set(forms)) == len(forms)


def test_forms_equal_to_the_value_are_left_out():
    # Only unreserved characters: percent-encoding leaves it as it is.
    assert quote("plain_value-1.2~", safe="") == "plain_value-1.2~"
    forms = encoded_forms("plain_value-1.2~")
    assert forms.count("plain_value-1.2~") == 1


def test_a_hundred_secrets_are_each_found():
    pairs = [(f"SECRET_{i}", f"value-{i:03d}-{i * 7919:08x}") for i in range(100)]
    scanner = SecretScanner(pairs)
    filler = "ordinary words of a message " * 150
    for i, (name, value) in enumerate(pairs):
        encoded = [value, value.encode().hex(), base64.b64encode(b"\x00" * (i % 3) + value.encode()).decode()]
        assert scanner.find(filler + encoded[i % 3] + filler) == name
    assert scanner.find(filler) is None


def best_of(fn, repeats=5, calls=20) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
    return best


def test_a_hundred_secrets_cost_about_as_much_as_one():
    text = ('ordinary words of a message, with numbers 12345 and json {"k": [1, 2]} ' * 1000)[: 64 * 1024]
    one = SecretScanner([("S0", "value-000-secret-token")])
    hundred = SecretScanner([(f"S{i}", f"value-{i:03d}-secret-token") for i in range(100)])
    # One scan per pattern would make this ratio about 100; one pass keeps it near 1.
    assert best_of(lambda: hundred.find(text)) < 10 * best_of(lambda: one.find(text))


def test_a_long_repetitive_value_builds_quickly_and_is_found():
    # A DFA's building grows with the square of such a pattern's length: minutes for this one.
    value = "k" * 60_000 + "-end"
    start = time.perf_counter()
    scanner = SecretScanner([("BIG", value)])
    assert time.perf_counter() - start < 2
    assert scanner.find("x" + value.encode().hex().upper() + "x") == "BIG"
    assert scanner.find("k" * 70_000) is None


def test_many_short_values_scan_the_same_past_the_dfa_limit():
    pairs = [(f"S{i}", f"secret-value-number-{i:05d}") for i in range(300)]
    assert sum(len(form) for _, value in pairs for form in encoded_forms(value)) > DFA_MAX_PATTERN_CHARS
    scanner = SecretScanner(pairs)
    assert scanner.find("x " + b"secret-value-number-00299".hex() + " x") == "S299"
    assert scanner.find("secret-value-number-") is None


def test_a_lone_surrogate_in_the_text_is_scanned_not_refused():
    scanner = SecretScanner([("A", "alpha-secret-1")])
    assert scanner.find("\ud800 alpha-secret-1") == "A"
    assert scanner.find("\ud800 clean") is None


def test_find_in_looks_at_each_text():
    scanner = SecretScanner([("A", "alpha-secret-1")])
    assert scanner.find_in(["clean", "also clean", "x alpha-secret-1"]) == "A"
    assert scanner.find_in(["clean"]) is None
    assert scanner.find_in([]) is None


def test_scanner_for_builds_once_per_set_of_pairs():
    pairs = [("A", "alpha-secret-1"), ("B", "bravo-secret-2")]
    assert scanner_for(pairs) is scanner_for(tuple(pairs))
    assert scanner_for(pairs) is not scanner_for(pairs[:1])
    assert scanner_for(pairs).find("bravo-secret-2") == "B"
    assert scanner_for([]) is scanner_for(()) and scanner_for([]).find("alpha-secret-1") is None


@pytest.mark.parametrize("offset", [0, 1, 2, 5, 9])
def test_a_file_is_scanned_across_chunk_boundaries_and_split_characters(offset):
    value = "clé-secrète-ünïcode"
    scanner = SecretScanner([("KEY", value)])
    for form in (value, encoded_forms(value)[1]):
        data = b"\xff\xfe binary " * 3 + b"x" * offset + form.encode() + b" tail"
        for chunk_size in (4, 7, 16, 1024):
            assert scanner.find_in_file(io.BytesIO(data), chunk_size=chunk_size) == "KEY", (form, chunk_size)
    clean = b"\xff\xfe binary " * 3 + value.encode()[:-3]
    assert scanner.find_in_file(io.BytesIO(clean), chunk_size=5) is None


def test_redact_replaces_every_form_and_merges_overlaps():
    value = "tok3n/with+reserved?chars"
    scanner = SecretScanner([("TOKEN", value), ("INNER", "with+reserved")])
    text = f"a {value} b {quote(value, safe='')} c {value.encode().hex().upper()} d"
    redacted = scanner.redact(text)
    assert redacted == "a [redacted] b [redacted] c [redacted] d"
    assert scanner.redact("nothing here") == "nothing here"


# One case per escape and reading, each failing when its handling is taken out.

TOKEN = "Sk-Live/Token+Value 42"  # reserved characters, both cases, a space and a plus


def escaped_bytes(value: str, template: str) -> str:
    return "".join(template.format(b) for b in value.encode())


@pytest.mark.parametrize(
    "text",
    [
        escaped_bytes(TOKEN, "%{:02X}"),
        escaped_bytes(TOKEN, "%{:02x}"),
        "Sk%2dLive%2FT%6F%6Ben%2BValue%2042",  # some bytes raw, some escaped, hex digits in both cases
        "Sk-Live/Token%2BValue+42",  # form encoding: + for the space
    ],
    ids=["every byte", "every byte lowercase", "partial mix", "plus for space"],
)
def test_percent_encoding_byte_by_byte(text):
    scanner = SecretScanner([("TOKEN", TOKEN)])
    assert scanner.find(f"GET /cb?t={text}&x=1") == "TOKEN"
    assert scanner.redact(f"GET /cb?t={text}&x=1") == "GET /cb?t=[redacted]&x=1"


def test_a_plus_is_a_space_only_where_the_value_has_a_space():
    scanner = SecretScanner([("TOKEN", TOKEN)])
    assert scanner.find("Sk-Live/Token Value 42") is None  # the value's + is not a space
    assert scanner.find("Sk-Live/Token+Value+42") == "TOKEN"
    # Too short for encodings to count (under 7 bytes): only itself.
    assert SecretScanner([("PIN", "a b c")]).find("a+b+c") is None
    assert SecretScanner([("PIN", "ab cde")]).find("ab+cde") is None
    assert SecretScanner([("PIN", "ab cdef")]).find("ab+cdef") == "PIN"
    assert SecretScanner([("PIN", "a b c")]).find("x a b c") == "PIN"


@pytest.mark.parametrize(
    "text",
    [
        '"' + "".join(f"\\u{ord(c):04x}" for c in TOKEN) + '"',
        '"' + "".join(f"\\u{ord(c):04X}" for c in TOKEN) + '"',
        '{"k": "Sk-L\\u0069ve\\/Tok\\u0065n+Value\\u002042"}',
    ],
    ids=["every character", "uppercase digits", "mix with \\/"],
)
def test_json_unicode_escapes(text):
    scanner = SecretScanner([("TOKEN", TOKEN)])
    assert scanner.find(text) == "TOKEN"


def test_json_surrogate_pairs_and_control_characters():
    value = "emoji-😀-tab\there"
    scanner = SecretScanner([("E", value)])
    assert json.dumps(value) == '"emoji-\\ud83d\\ude00-tab\\there"'
    assert scanner.find(json.dumps(value)) == "E"
    assert scanner.find(json.dumps(value).upper().replace("\\T", "\\t").replace("\\U", "\\u")) is None  # case is data
    assert scanner.find('"emoji-\\uD83D\\uDE00-tab\\u0009here"') == "E"


@pytest.mark.parametrize(
    "text",
    [
        "".join(f"&#{ord(c)};" for c in TOKEN),
        "".join(f"&#x{ord(c):x};" for c in TOKEN),
        "".join(f"&#X{ord(c):X};" for c in TOKEN),
        "&#83;k-Live&sol;Token&plus;Value&#32;42",
        "&#0083;k-Live&#47Token+Value 42",  # leading zeros, a reference without its ;
    ],
    ids=["decimal", "hex", "HEX", "named", "zeros and no semicolon"],
)
def test_html_character_references(text):
    assert SecretScanner([("TOKEN", TOKEN)]).find(f"<p title='{text}'>") == "TOKEN"


def test_html_named_references_of_markup_characters():
    value = "a<b>&\"c'd-e"
    scanner = SecretScanner([("M", value)])
    assert scanner.find("a&lt;b&gt;&amp;&quot;c&apos;d-e") == "M"
    assert scanner.find("a&LT;b&GT;&AMP;&QUOT;c&#39;d-e") == "M"  # HTML5 names these in capitals too
    assert scanner.find("a&lt;b&gt;&amp;&notaname;c&apos;d-e") is None


def test_backslash_escapes():
    scanner = SecretScanner([("TOKEN", TOKEN)])
    assert scanner.find(escaped_bytes(TOKEN, "\\x{:02x}")) == "TOKEN"
    assert scanner.find("\\U00000053k-Live/Token+Value 42") == "TOKEN"
    accented = SecretScanner([("A", "clé-secrète")])
    assert accented.find(escaped_bytes("clé-secrète", "\\x{:02X}")) == "A"  # UTF-8 bytes, as printf writes them
    assert SecretScanner([("Q", 'say "hi" \\ bye')]).find('"say \\"hi\\" \\\\ bye"') == "Q"


def test_an_escape_can_not_hide_a_value_it_is_next_to():
    # Read unescaped, "%41" takes the value's first digits: the text as it is must be read too.
    value = "41bc-secret-value"
    scanner = SecretScanner([("V", value)])
    for text in ("%41bc-secret-value", "&#x41bc-secret-value", "\\x41bc-secret-value", "\\u41bc-secret-value"):
        assert scanner.find(text) == "V", text
        assert scanner.redact(text) != text


def test_a_value_that_looks_escaped_is_found_as_it_is():
    value = "p%41ss&amp;w\\u0041rd"
    scanner = SecretScanner([("V", value)])
    assert scanner.find(f"x {value} y") == "V"
    assert scanner.redact(f"x {value} y") == "x [redacted] y"
    assert scanner.find("x pAss&wArd y") is None  # one layer: the decoded text is not the value


@pytest.mark.parametrize("width, newline", [(64, "\n"), (76, "\r\n"), (60, "\n"), (76, "\r")])
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_wrapped_base64_at_each_alignment(width, newline, offset):
    value = "wrapped-secret-value-that-is-long-enough-to-cross-lines-0123456789"
    blob = b"\x00\xff" * 40 + b"x" * offset + value.encode() + b"\x01" * 50
    text = "-----BEGIN DATA-----" + newline + wrap(base64.b64encode(blob).decode(), width, newline) + newline
    assert SecretScanner([("W", value)]).find(text) == "W"


def test_wrapped_and_indented_base64():
    value = "indented-secret-value-in-yaml-longer-than-one-line-of-base64"
    assert min(len(core) for core in encoded_forms(value)[1:4]) > 64  # every alignment crosses a line
    for offset in range(3):
        body = wrap(base64.b64encode(b"\x00" * offset + value.encode()).decode(), 64, "\n", "      ")
        assert SecretScanner([("Y", value)]).find(f"tls.key: |\n{body}\n") == "Y"


def test_an_empty_value_is_no_pattern():
    scanner = SecretScanner([("EMPTY", ""), ("A", "alpha-secret-1")])
    assert scanner.find("any text") is None
    assert scanner.find("x alpha-secret-1") == "A"


def test_wrapped_base64_in_a_json_string_and_percent_encoded():
    value = "a-secret-inside-a-pem-body"
    body = wrap(base64.b64encode(b"\x07" * 47 + value.encode() + b"\x07" * 40).decode(), 64)
    scanner = SecretScanner([("P", value)])
    assert "\\n" in json.dumps(body) and scanner.find(json.dumps({"cert": body})) == "P"
    assert "%0A" in quote(body, safe="") and scanner.find("cert=" + quote(body, safe="")) == "P"


def test_a_plain_value_broken_across_lines_is_not_that_value():
    value = "plain-secret-across-lines"
    scanner = SecretScanner([("V", value)])
    assert scanner.find("plain-secret-\nacross-lines") is None
    assert scanner.find("plain-secret-across-line\ns") is None
    assert scanner.find("p\nlain-secret-across-lines") is None
    assert scanner.find("plain-secret-across-lines\n") == "V"


def test_a_value_with_line_breaks_is_found_as_it_is_and_escaped():
    value = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END KEY-----"
    scanner = SecretScanner([("KEY", value)])
    assert scanner.find(f"file:\n{value}\n") == "KEY"
    assert scanner.find(json.dumps({"key": value})) == "KEY"
    assert scanner.find(value.replace("\n", "\r\n")) is None  # another value
    indented = SecretScanner([("SP", "  leading-spaces-value")])
    assert indented.find("line one\n  leading-spaces-value\n") == "SP"


@pytest.mark.parametrize("offset", range(5))
def test_base32_at_each_alignment_in_either_case(offset):
    value = "base32-secret-value"
    blob = b"\xaa" * offset + value.encode() + b"\xbb" * 3
    scanner = SecretScanner([("B", value)])
    encoded = base64.b32encode(blob).decode()
    for text in (encoded, encoded.lower(), encoded.rstrip("=")):
        assert scanner.find(f"otpauth://totp/x?secret={text}") == "B"


def test_base32_forms_are_the_stable_cores_of_five_alignments():
    forms = encoded_forms("hunter2-secret")
    cores = forms[-5:]
    assert all(set(core) <= set(string.ascii_uppercase + "234567") for core in cores)
    for offset in range(5):
        for fill in (b"\xff", b"\x00"):
            blob = base64.b32encode(fill * offset + b"hunter2-secret" + fill).decode()
            assert cores[offset] in blob
    assert cores == [
        "NB2W45DFOIZC243FMNZGK5",
        "UHK3TUMVZDELLTMVRXEZLU",
        "Q5LOORSXEMRNONSWG4TFO",
        "2DVNZ2GK4RSFVZWKY3SMV2",
        "IOVXHIZLSGIWXGZLDOJSX",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "%" + "%".join("ZZ"),  # not hex digits
        "%E9%80%80%FF%FE",  # not UTF-8
        "&#1114112; &#xFFFFFFF; &#x110000;",  # past the last code point
        "\\ud800 \\udfff \\U0011ffff",  # lone surrogates, past the last code point
        "&unknownname; & &; &#; &#x;",
        "\\q \\",
    ],
)
def test_broken_escapes_are_read_without_error(text):
    scanner = SecretScanner([("A", "alpha-secret-1")])
    assert scanner.find(text) is None
    assert scanner.find(text + " alpha-secret-1") == "A"
    assert scanner.find(text + " " + escaped_bytes("alpha-secret-1", "%{:02x}")) == "A"


@pytest.mark.parametrize(
    "encode",
    [
        lambda v: escaped_bytes(v, "%{:02X}"),
        lambda v: "".join(f"\\u{u.hex()}" for u in _units(v)),
        lambda v: "".join(f"&#{ord(c)};" for c in v),
        lambda v: "".join(f"&{NAMES[c]}" if c in NAMES else c for c in v),
        lambda v: escaped_bytes(v, "\\x{:02x}"),
    ],
    ids=["percent", "json", "html", "named", "backslash x"],
)
def test_redact_cuts_exactly_the_escaped_value(encode):
    value = "tøk€n-😀-<secret>"
    scanner = SecretScanner([("V", value)])
    text = f"héllo {encode('ab')}{encode(value)}{encode('cd')} bye"
    assert scanner.redact(text) == f"héllo {encode('ab')}[redacted]{encode('cd')} bye"


def test_redact_cuts_the_wrapped_lines_holding_the_value():
    value = "secret-in-wrapped-base64!"
    data = b"\x00" * 3 + value.encode() + b"\x00" * 3
    text = "data:\n" + wrap(base64.b64encode(data).decode(), 8) + "\nend"
    redacted = SecretScanner([("V", value)]).redact(text)
    assert redacted.startswith("data:\nAAAA") and redacted.endswith("\nend") and "[redacted]" in redacted
    core = encoded_forms(value)[1]
    assert core not in redacted.replace("\n", "")


def test_a_file_with_an_escaped_value_across_a_chunk_boundary():
    value = "file-secret-€-value"
    scanner = SecretScanner([("F", value)])
    longest = max(len(form) for form in encoded_forms(value))
    assert MAX_CHARS_PER_READ_CHAR >= 12
    escaped = "".join(f"%{b:02X}" for b in value.encode()).encode()
    json_escaped = "".join(f"\\u{u.hex()}" for u in _units(value)).encode()
    wrapped = wrap(base64.b64encode(b"\x00" * 100 + value.encode() + b"\x00" * 100).decode(), 4, "\n").encode()
    for form in (escaped, json_escaped, wrapped):
        data = b"x" * 1000 + form + b" tail"
        for chunk_size in (7, 100, 1003, longest * 3):
            assert scanner.find_in_file(io.BytesIO(data), chunk_size=chunk_size) == "F", (form[:20], chunk_size)


def test_redact_keeps_the_references_next_to_a_value():
    scanner = SecretScanner([("V", "raw-secret-value")])
    assert scanner.redact("&amp;raw-secret-value&lt;") == "&amp;[redacted]&lt;"
    assert scanner.redact("%41raw-secret-value%41") == "%41[redacted]%41"


def test_redact_takes_a_whole_reference_that_names_two_characters():
    # &fjlig; is "fj": a value that ends or begins between the two takes the reference whole.
    assert SecretScanner([("V", "secret-value-f")]).redact("x secret-value-&fjlig; y") == "x [redacted] y"
    assert SecretScanner([("V", "j-secret-value")]).redact("x &fjlig;-secret-value y") == "x [redacted] y"


def test_the_last_code_point_is_read():
    scanner = SecretScanner([("V", "x-\U0010ffff-secret")])
    assert scanner.find("x-&#x10FFFF;-secret") == "V"
    assert scanner.find("x-&#1114111;-secret") == "V"
    assert scanner.find("x-\\U0010ffff-secret") == "V"


def test_the_text_as_it_is_is_read_as_far_as_the_longest_pattern_from_an_escape():
    value = "escape-eaten-hex"
    hexed = value.encode().hex()
    assert max(len(form) for form in encoded_forms(value)) == len(hexed)
    # "%a6" decodes to one character: only the text as it is holds the whole hex, which begins
    # at the escape's last character and ends len(hex) - 1 past it.
    assert SecretScanner([("V", value)]).find("%a" + hexed + " and more") == "V"
    # A value at the very start whose end an escape takes.
    assert SecretScanner([("P", "secret-value-50%")]).find("secret-value-50%41") == "P"


def test_non_ascii_letters_that_lowercase_longer_keep_every_index():
    scanner = SecretScanner([("V", "after-dotted-i")])
    text = "İİİ ΣΣ after-dotted-i ẞ"
    assert "İ".lower() != "i" and len("İ".lower()) == 2
    assert scanner.find(text) == "V"
    assert scanner.redact(text) == "İİİ ΣΣ [redacted] ẞ"


def test_a_seven_byte_value_keeps_its_eight_character_forms():
    forms = encoded_forms("abcdefg")
    assert "FiY2RlZm" in forms  # base64 at offset 1 mod 3: the shortest
    assert len(forms) == 10  # itself, 3 base64 (base64url the same), hex (one case: digits), 5 base32
    assert SecretScanner([("V", "abcdefg")]).find(base64.b64encode(b"x" + b"abcdefg").decode()) == "V"


def test_redact_maps_each_removed_line_break_back():
    value = "secret-in-wrapped-base64!"
    encoded = base64.b64encode(b"\x00" * 3 + value.encode() + b"\x00" * 3).decode()
    core = encoded_forms(value)[1]
    start, end = encoded.index(core), encoded.index(core) + len(core)
    # Breaks right after the core's first character and right before its last, and outside it.
    cuts = [2, start + 1, start + 10, end - 1, end + 2]
    lines = "\n".join(encoded[a:b] for a, b in zip([0, *cuts], [*cuts, len(encoded)], strict=True))
    text = "data:\n" + lines + "\nend"
    head = "data:\n" + "\n".join(encoded[a:b] for a, b in zip([0, 2], [2, start], strict=True))
    tail = encoded[end : end + 2] + "\n" + encoded[end + 2 :] + "\nend"
    assert SecretScanner([("V", value)]).redact(text) == head + "[redacted]" + tail


def test_a_removed_escaped_line_break_can_not_hide_a_value_it_is_next_to():
    # Read unwrapped, "\n" takes the value's first letter: the text before unwrapping is read too.
    scanner = SecretScanner([("V", "n0t-a-secret-value")])
    assert scanner.find("C:\\n0t-a-secret-value") == "V"
    assert scanner.redact('{"path": "C:\\n0t-a-secret-value"}') == '{"path": "C:\\[redacted]"}'
    assert SecretScanner([("V", "ends-with-a-backslash\\")]).find("ends-with-a-backslash\\r") == "V"


def test_every_escape_far_apart_is_read_around():
    scanner = SecretScanner([("V", "41bc-secret-value")])
    assert scanner.find("%41bc-secret-value" + " words " * 100 + "%41") == "V"
    assert scanner.find("%41" + " words " * 100 + "%41bc-secret-value") == "V"


def test_json_escaped_pem_with_real_line_breaks_maps_back():
    value = "pem-secret-in-json-and-lines"
    encoded = base64.b64encode(b"\x00" * 30 + value.encode() + b"\x00" * 30).decode()
    core = encoded_forms(value)[1]
    start, end = encoded.index(core), encoded.index(core) + len(core)
    # An escaped break inside the core, a real one too, and both kinds outside it.
    body = encoded[:5] + "\\n" + encoded[5 : start + 3] + "\\n" + encoded[start + 3 : end - 4] + "\n"
    body += encoded[end - 4 : end + 2] + "\\n" + encoded[end + 2 :]
    redacted = SecretScanner([("V", value)]).redact(body)
    assert (
        redacted
        == encoded[:5] + "\\n" + encoded[5:start] + "[redacted]" + encoded[end : end + 2] + "\\n" + encoded[end + 2 :]
    )


def test_redact_merges_adjacent_occurrences():
    scanner = SecretScanner([("A", "alpha-secret-1")])
    assert scanner.redact("x alpha-secret-1alpha-secret-1 y") == "x [redacted] y"


def test_a_scanner_without_secrets_finds_nothing_in_a_file():
    assert SecretScanner([]).find_in_file(io.BytesIO(b"alpha-secret-1")) is None


# Nothing that merely resembles.


def random_token(rnd: random.Random) -> str:
    return rnd.choice(["sk_live_", "ghp_", "AKIA", ""]) + "".join(
        rnd.choices(string.ascii_letters + string.digits + "-_", k=rnd.randint(20, 40))
    )


def ordinary_text(rnd: random.Random) -> str:
    """Prose, JSON, URLs, PEM, hex, base32 and escapes of data that is not a secret."""
    other = rnd.randbytes(rnd.randint(100, 2000))
    words = " ".join(rnd.choices("the agent ran tests and found two failures in a build log".split(), k=200))
    return "\n".join(
        [
            words,
            json.dumps({"text": words[:300] + " ünïcødé 😀", "n": rnd.random()}),
            json.dumps(words[:200] + " ünïcødé 😀", ensure_ascii=True),
            "https://example.com/search?q=" + quote(words[:200] + other.decode("latin-1"), safe=""),
            "&lt;p&gt;" + words[:100].replace(" ", "&nbsp;") + "&#x2014;&amp;",
            "-----BEGIN CERTIFICATE-----\n"
            + wrap(base64.b64encode(other).decode(), 64)
            + "\n-----END CERTIFICATE-----",
            wrap(base64.b64encode(other).decode(), 76, "\r\n"),
            base64.urlsafe_b64encode(other).decode(),
            base64.b32encode(other).decode(),
            wrap(other.hex(), 60),
            "".join(f"\\x{b:02x}" for b in other[:200]),
        ]
    )


def test_a_value_that_resembles_is_not_the_value():
    scanner = SecretScanner([("TOKEN", TOKEN)])
    for text in (
        escaped_bytes(TOKEN.lower(), "%{:02X}"),  # escapes decode to other letters
        "".join(f"&#{ord(c)};" for c in TOKEN[:-1]),  # one character short
        escaped_bytes(TOKEN, "%%{:02X}"),  # two layers of escaping: one is undone
        base64.b64encode(TOKEN.swapcase().encode()).decode(),
        base64.b32encode(TOKEN.swapcase().encode()).decode(),
        "Sk-Live/Token+Value\n42",
    ):
        assert scanner.find(text) is None, text


# Property tests last: a mutant that some example test kills dies sooner.


@pytest.mark.parametrize("encoder", ENCODERS)
@examples
@given(
    value=values,
    prefix=st.binary(max_size=8),
    suffix=st.binary(max_size=8),
    before=words,
    after=words,
    rnd=st.randoms(use_true_random=False),
)
def test_every_encoding_at_every_offset_is_found(encoder, value, prefix, suffix, before, after, rnd):
    blob = prefix + value.encode() + suffix
    text = before + ENCODERS[encoder](blob, rnd) + after
    assert SecretScanner([("API_KEY", value)]).find(text) == "API_KEY"


@pytest.mark.parametrize("encoder", TEXT_ENCODERS)
@examples
@given(
    value=values,
    prefix=surrounding,
    suffix=surrounding,
    before=words,
    after=words,
    rnd=st.randoms(use_true_random=False),
)
def test_every_escape_in_any_mix_is_found(encoder, value, prefix, suffix, before, after, rnd):
    text = before + TEXT_ENCODERS[encoder](prefix + value + suffix, rnd) + after
    assert SecretScanner([("API_KEY", value)]).find(text) == "API_KEY"


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_ordinary_text_holds_no_random_secret(seed):
    rnd = random.Random(seed)
    scanner = SecretScanner([(f"S{i}", random_token(rnd)) for i in range(20)])
    text = ordinary_text(rnd)
    assert scanner.find(text) is None, [s for s in scanner.spans(text)]
