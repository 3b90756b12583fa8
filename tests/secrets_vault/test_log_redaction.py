"""No log line records a secret value, a Slack token or a runner token, whichever handler writes it."""

import base64
import io
import logging
import secrets
import threading
from urllib.parse import quote

import pytest

from secrets_vault import crypto, redaction
from secrets_vault.redaction import (
    REDACTED,
    RedactingFilter,
    install_log_redaction,
    redact_text,
    remember_values,
)
from secrets_vault.services import secret_set
from sessions.services import session_start
from sessions.tokens import token_new

logger = logging.getLogger("tests.redaction")


def fresh_secret() -> str:
    value = "s3cr3t-" + secrets.token_urlsafe(18)
    remember_values([value])
    return value


@pytest.fixture
def output():
    """A handler added after installation, with no filter of its own."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)


def test_the_app_installs_redaction():
    assert getattr(logging.getLogRecordFactory(), "redacts_secrets", False)


def test_a_value_in_percent_args(output):
    value = fresh_secret()
    logger.warning("the key is %s, twice: %r", value, value)
    assert value not in output.getvalue()
    assert f"the key is {REDACTED}, twice: '{REDACTED}'" in output.getvalue()


def test_a_value_in_an_f_string(output):
    value = fresh_secret()
    logger.info(f"calling the API with {value}")
    assert output.getvalue() == f"INFO calling the API with {REDACTED}\n"


def test_a_value_in_a_traceback(output):
    value = fresh_secret()
    try:
        raise ValueError(f"rejected credentials {value}")
    except ValueError:
        logger.exception("the call failed")
    text = output.getvalue()
    assert value not in text
    assert "Traceback (most recent call last)" in text and f"ValueError: rejected credentials {REDACTED}" in text


def test_a_value_in_stack_info(output):
    remember_values(["stack-literal-9f8e7d6c5b4a"])
    logger.info("where am I", stack_info=True)  # stack-literal-9f8e7d6c5b4a shows in the stack's source line
    text = output.getvalue()
    assert "Stack (most recent call last)" in text and "stack-literal-9f8e7d6c5b4a" not in text


def test_a_handler_added_after_installation(caplog):
    value = fresh_secret()
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        logger.info("value %s", value)
    assert value not in caplog.text
    assert caplog.records[0].getMessage() == f"value {REDACTED}"


def test_encoded_forms_of_a_value(output):
    value = fresh_secret()
    data = value.encode()
    forms = [
        base64.b64encode(b"ab" + data).decode(),
        base64.urlsafe_b64encode(b"a" + data + b"z").decode(),
        data.hex(),
        data.hex().upper(),
        quote("x/" + value + "/y", safe=""),
    ]
    logger.info("forms: %s", " | ".join(forms))
    text = output.getvalue()
    assert value not in text
    for form in forms:
        assert form not in text
    assert text.count(REDACTED) == len(forms)


@pytest.mark.parametrize(
    "token, shown",
    [
        ("xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUv", "xoxb-"),
        ("xoxp-1234567890-0987654321-1122334455-abcdef0123456789", "xoxp-"),
        ("xoxa-2-1234567890-abcdefABCDEF", "xoxa-"),
        ("xoxr-1234567890-abcdefABCDEF", "xoxr-"),
        ("xoxe-1-My0xLTEyMzQ1Njc4OTAtYWJjZGVm", "xoxe-"),
        ("xapp-1-A0123456789-1234567890123-0123456789abcdef", "xapp-"),
    ],
)
def test_slack_token_shapes(output, token, shown):
    logger.error("Slack answered invalid_auth for %s", token)
    text = output.getvalue()
    assert token not in text and token[len(shown) :] not in text
    assert f"invalid_auth for {shown}{REDACTED}" in text


def test_runner_tokens(output):
    token = token_new()
    logger.info("runner started with bearer %s", token)
    text = output.getvalue()
    assert token not in text and token[4:] not in text
    assert f"bearer cvn_{REDACTED}" in text


def test_ordinary_text_is_untouched(output):
    fresh_secret()
    line = "GET /threads/12/ 200 in 3.1 ms; cvn_token_digest and xoxb- are just words, base64 aGVsbG8="
    assert redact_text(line) == line
    logger.info("%s %s", "GET /threads/12/", 200)
    assert output.getvalue() == "INFO GET /threads/12/ 200\n"


def test_clean_records_keep_their_arguments(caplog):
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        logger.info("%s - %s %d", "127.0.0.1", "GET /", 200)
    assert caplog.records[0].args == ("127.0.0.1", "GET /", 200)


def test_plain_arguments_stay_arguments_once_redacted(caplog):
    # uvicorn's access formatter unpacks record.args: redact inside them, keep the tuple.
    value = fresh_secret()
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        logger.info('%s - "%s %s" %d', "127.0.0.1", "GET", f"/hook?token={value}", 200)
    record = caplog.records[0]
    assert record.args == ("127.0.0.1", "GET", f"/hook?token={REDACTED}", 200)
    assert value not in caplog.text


def test_a_value_split_across_arguments(caplog):
    value = fresh_secret()
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        logger.info("%s%s", value[:9], value[9:])
    assert caplog.records[0].getMessage() == REDACTED and caplog.records[0].args is None


def test_an_unformattable_message_neither_raises_nor_leaks(output):
    value = fresh_secret()
    logger.info("%d items", value)  # a bug in the caller: %d with a string
    assert value not in output.getvalue() and REDACTED in output.getvalue()


def test_the_filter_redacts_records_made_another_way():
    value = fresh_secret()
    try:
        raise RuntimeError(value)
    except RuntimeError as exc:
        record = logging.makeLogRecord(
            {"msg": "unpickled %s", "args": (value,), "exc_info": (type(exc), exc, exc.__traceback__)}
        )
    assert RedactingFilter().filter(record) is True
    formatted = logging.Formatter().format(record)
    assert value not in formatted and f"unpickled {REDACTED}" in formatted and "RuntimeError" in formatted


def test_installing_twice_wraps_once_and_filters_root_handlers():
    root = logging.getLogger()
    handler = logging.StreamHandler(io.StringIO())
    root.addHandler(handler)
    original = logging.getLogRecordFactory()
    try:
        logging.setLogRecordFactory(logging.LogRecord)  # as before installation
        install_log_redaction()
        wrapped = logging.getLogRecordFactory()
        install_log_redaction()
        assert logging.getLogRecordFactory() is wrapped and wrapped is not logging.LogRecord
        assert [type(f) for f in handler.filters] == [RedactingFilter]
        value = fresh_secret()
        assert wrapped("x", logging.INFO, __file__, 1, "%s", (value,), None).getMessage() == REDACTED
    finally:
        logging.setLogRecordFactory(original)
        root.removeHandler(handler)


def test_the_oldest_values_are_forgotten_past_the_bound(monkeypatch):
    monkeypatch.setattr(redaction, "MAX_REMEMBERED", 3)
    values = [fresh_secret() for _ in range(5)]
    assert redact_text(values[0]) == values[0]
    assert all(redact_text(value) == REDACTED for value in values[2:])


def test_remembering_again_keeps_a_value_from_eviction(monkeypatch):
    monkeypatch.setattr(redaction, "MAX_REMEMBERED", 3)
    kept = fresh_secret()
    others = [fresh_secret(), fresh_secret()]
    remember_values([kept])  # used again: now the newest
    fresh_secret()
    assert redact_text(kept) == REDACTED and redact_text(others[0]) == others[0]


def test_threads_remembering_and_logging_at_once(output):
    values, errors = [], []

    def work():
        try:
            value = fresh_secret()
            values.append(value)
            logger.info("thread value %s", value)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(values) == 8
    assert not any(value in output.getvalue() for value in values)


@pytest.mark.django_db
def test_a_value_the_vault_stores_is_redacted(workspace, settings, output):
    settings.SP_STORE_KEY = [crypto.new_key()]
    session = session_start(workspace=workspace, title="redaction")
    value = "vault-stored-" + secrets.token_hex(12)
    secret_set(session=session, name="STRIPE_KEY", value=value)
    logger.info("about to send %s", value)
    assert value not in output.getvalue()
