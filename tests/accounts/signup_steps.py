"""Steps the sign-up and password tests share: sign up, read the link from the outbox, open it."""

import re

from django.core import mail

STRONG_PASSWORD = "Correct-horse-battery-9"


def sign_up(client, capture, email: str, password: str = STRONG_PASSWORD, *, next_url: str = "", follow=False):
    """POST the sign-up form, running the on-commit email sends."""
    with capture(execute=True):
        return client.post(
            "/accounts/signup/",
            {"email": email, "password1": password, "password2": password, "next": next_url},
            follow=follow,
        )


def link_in(message) -> str:
    """The one http(s) link of an email, as a path with its query (the test client's view of it)."""
    (url,) = re.findall(r"https?://\S+", message.body)
    return re.sub(r"^https?://[^/]+", "", url)


def last_email_to(address: str):
    sent = [message for message in mail.outbox if message.to == [address]]
    assert sent, f"no email to {address}: {[m.to for m in mail.outbox]}"
    return sent[-1]


def logged_in_user_id(client) -> int | None:
    """Whose session the client holds (the home page itself may send a person without a workspace on)."""
    value = client.session.get("_auth_user_id")
    return int(value) if value else None


def resend_limits_forget() -> None:
    """Drop this run's "send the link again" counters (the cache is shared Redis: never clear() it)."""
    from django.core.cache import cache

    client = cache._cache.get_client()
    stale = list(client.scan_iter(match=cache.make_key("verify-resend:*")))
    if stale:
        client.delete(*stale)
