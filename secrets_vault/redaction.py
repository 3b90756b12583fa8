"""Nothing records a secret value in logs: every log record is redacted as it is made.

The vault calls remember_values() with each value it encrypts or decrypts in this process;
redact_text() replaces those values, plain or encoded (see scanner.encoded_forms), with
"[redacted]", and also anything shaped like a Slack token or a Calvin runner token, known
or not: those leaked into logs and error texts elsewhere.

install_log_redaction() wraps logging's record factory, so a record is redacted when it
is created, before any handler sees it, including handlers that uvicorn, Celery or Django
add later. A filter on a handler would only cover the handlers present when it was added.

The remembered values are per process on purpose: a process can log a value only after it
held it in the clear, and every place that does (encryption, decryption, the Slack modal)
remembers it there first; a value shared through Redis would sit in one more store.
"""

import logging
import re
import threading
from collections.abc import Iterable

from secrets_vault.scanner import SecretScanner

REDACTED = "[redacted]"

# The remembered values are bounded: every new value rebuilds the automaton (about 1 ms
# per 100 values here) and each costs memory for 11 to 15 patterns. The oldest go first.
MAX_REMEMBERED = 1000
MAX_REMEMBERED_CHARS = 1024 * 1024

# Slack bot/user/app-config/refresh tokens (xoxb-, xoxp-, xoxa-, xoxr-, xoxe-) and Slack
# app-level tokens (xapp-): digits, letters and dashes, 8 or more after the prefix. Calvin
# runner tokens (sessions.tokens): "cvn_" and 43 urlsafe base64 characters; 32 or more
# after the prefix, so that identifiers such as "cvn_token_digest" stay readable. The
# prefix is kept so a reader knows what kind of token was there.
TOKEN_SHAPE = re.compile(r"(xox[abpre]-|xapp-)[A-Za-z0-9-]{8,}|(cvn_)[A-Za-z0-9_-]{32,}")

_lock = threading.RLock()
_values: dict[str, None] = {}  # insertion-ordered: the oldest first
_chars = 0
_version = 0
_scanner: tuple[int, SecretScanner] = (0, SecretScanner(()))


def remember_values(values: Iterable[str]) -> None:
    """Redact these values (and their encodings) from now on, in every log of this process."""
    global _chars, _version
    with _lock:
        for value in values:
            if not isinstance(value, str) or not value:
                continue
            if value in _values:
                _values[value] = _values.pop(value)  # recently used: evicted last
                continue
            _values[value] = None
            _chars += len(value)
            _version += 1
        while len(_values) > 1 and (len(_values) > MAX_REMEMBERED or _chars > MAX_REMEMBERED_CHARS):
            oldest = next(iter(_values))
            del _values[oldest]
            _chars -= len(oldest)
            _version += 1


def _current_scanner() -> SecretScanner:
    global _scanner
    version, scanner = _scanner
    if version == _version:
        return scanner
    with _lock:
        if _scanner[0] != _version:
            _scanner = (_version, SecretScanner(("", value) for value in _values))
        return _scanner[1]


def redact_text(text: str) -> str:
    """`text` with every remembered value, its encodings and token shapes redacted."""
    if not text:
        return text
    spans = sorted((start, end) for start, end, _ in _current_scanner().spans(text))
    if spans:
        parts, kept = [], 0
        for start, end in spans:
            if end <= kept:
                continue  # inside a span already redacted
            if start >= kept:
                parts.append(text[kept:start])
                parts.append(REDACTED)
            kept = end
        parts.append(text[kept:])
        text = "".join(parts)
    return TOKEN_SHAPE.sub(lambda m: (m.group(1) or m.group(2)) + REDACTED, text)


_traceback_formatter = logging.Formatter()


def _redact_args(record: logging.LogRecord) -> bool:
    """Redact a tuple of plain arguments in place, if that leaves the message clean.

    Some formatters read record.args themselves (uvicorn's access log unpacks them), so
    keeping their shape keeps those lines; anything else collapses into the message.
    """
    args = record.args
    if not isinstance(record.msg, str) or not isinstance(args, tuple) or not args:
        return False
    if not all(arg is None or isinstance(arg, str | int | float) for arg in args):
        return False
    msg = redact_text(record.msg)
    args = tuple(redact_text(arg) if isinstance(arg, str) else arg for arg in args)
    try:
        rendered = msg % args
    except (TypeError, ValueError):
        return False
    if redact_text(rendered) != rendered:
        return False  # a value split across arguments
    record.msg, record.args = msg, args
    return True


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite the record so that no handler or formatter can render a secret from it."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: never raise in the caller's log call
        try:
            message = f"{record.msg} {record.args!r}"
        except Exception:
            message = "(a log message that could not be rendered)"
        record.msg, record.args = redact_text(message), None
    else:
        clean = redact_text(message)
        if clean != message and not _redact_args(record):
            record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        # logging.Formatter uses an exc_text already there instead of rendering exc_info.
        record.exc_text = _traceback_formatter.formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)


class RedactingFilter(logging.Filter):
    """Redacts each record a handler emits; never drops one.

    The record factory already redacts records as they are made; this covers records
    made another way (logging.makeLogRecord, records unpickled from a socket) or after
    another library replaced the factory without wrapping ours.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install_log_redaction() -> None:
    """Redact every log record from now on, whichever handler emits it. Idempotent."""
    with _lock:
        factory = logging.getLogRecordFactory()
        if not getattr(factory, "redacts_secrets", False):

            def redacting_factory(*args, **kwargs):
                record = factory(*args, **kwargs)
                redact_record(record)
                return record

            redacting_factory.redacts_secrets = True
            logging.setLogRecordFactory(redacting_factory)
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
