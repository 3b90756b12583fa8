"""The outbound secret check: every encoding at every alignment, one pass for many secrets."""

import base64
import io
import re
import time
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secrets_vault.scanner import (
    DFA_MAX_PATTERN_CHARS,
    MIN_ENCODED_LEN,
    SecretScanner,
    encoded_forms,
    scanner_for,
)

# pytest-django's autouse fixtures are function-scoped; these tests use none of them.
examples = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


# Each encodes a whole blob (prefix + value + suffix), as an agent would encode a file.
ENCODERS = {
    "base64": lambda blob: base64.b64encode(blob).decode(),
    "base64 unpadded": lambda blob: base64.b64encode(blob).decode().rstrip("="),
    "base64url": lambda blob: base64.urlsafe_b64encode(blob).decode(),
    "hex": lambda blob: blob.hex(),
    "HEX": lambda blob: blob.hex().upper(),
    "percent": lambda blob: quote(blob, safe=""),
    "percent plus": lambda blob: quote_plus(blob, safe=""),
    "percent lowercase escapes": lambda blob: lower_escapes(quote(blob, safe="")),
}

# Values of 7 UTF-8 bytes or more keep all their encoded forms (MIN_ENCODED_LEN = 8).
values = st.text(min_size=1, max_size=40).filter(lambda v: len(v.encode()) >= 7)
surrounding = st.text(max_size=30)


@pytest.mark.parametrize("encoder", ENCODERS)
@examples
@given(value=values, prefix=st.binary(max_size=8), suffix=st.binary(max_size=8), before=surrounding, after=surrounding)
def test_every_encoding_at_every_offset_is_found(encoder, value, prefix, suffix, before, after):
    blob = prefix + value.encode() + suffix
    text = before + ENCODERS[encoder](blob) + after
    assert SecretScanner([("API_KEY", value)]).find(text) == "API_KEY"


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
    assert all(len(form) >= MIN_ENCODED_LEN for form in forms[1:])
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
