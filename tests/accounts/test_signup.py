"""Sign-up, email verification and `next`, through the real views with pytest-django's client."""

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils.http import urlsafe_base64_encode

from calvin.accounts.signup import signup_url
from calvin.accounts.verification import verification_tokens
from calvin.audit.models import AuditEvent
from tests.accounts.signup_steps import (
    STRONG_PASSWORD,
    last_email_to,
    link_in,
    logged_in_user_id,
    resend_limits_forget,
    sign_up,
)

pytestmark = pytest.mark.django_db

User = get_user_model()


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    resend_limits_forget()
    yield
    resend_limits_forget()


def uid_and_token(link: str) -> tuple[str, str]:
    _, _, _, uid, token, _ = link.split("?")[0].split("/")
    return uid, token


def test_sign_up_emails_a_link_that_activates_and_logs_in(client, django_capture_on_commit_callbacks):
    response = sign_up(client, django_capture_on_commit_callbacks, "Ann@Example.com")
    assert response.status_code == 302 and response.url == "/accounts/signup/done/"
    user = User.objects.get()
    assert (user.username, user.email, user.is_active) == ("ann@example.com", "ann@example.com", False)
    assert AuditEvent.objects.filter(verb="account.signup", target_id=str(user.pk)).exists()
    assert "Check your inbox" in client.get(response.url).text

    link = link_in(last_email_to("ann@example.com"))
    assert logged_in_user_id(client) is None  # not logged in by signing up
    page = client.get(link)
    assert page.status_code == 200 and "Verify and log in" in page.text
    user.refresh_from_db()
    assert not user.is_active  # opening the link (a mail scanner) changes nothing

    response = client.post(link)
    assert response.status_code == 302 and response.url == "/"
    user.refresh_from_db()
    assert user.is_active
    assert logged_in_user_id(client) == user.pk
    assert AuditEvent.objects.filter(verb="account.verify", target_id=str(user.pk)).exists()


def test_the_link_works_once(client, django_capture_on_commit_callbacks):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    link = link_in(last_email_to("ann@example.com"))
    assert client.post(link).status_code == 302
    other = Client()
    assert other.get(link).status_code == 400
    response = other.post(link)
    assert response.status_code == 400 and "This link does not work" in response.text
    assert logged_in_user_id(other) is None  # the second use logged nobody in


def test_an_expired_link_is_refused(client, django_capture_on_commit_callbacks, settings):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    user = User.objects.get()
    four_days_ago = verification_tokens._num_seconds(verification_tokens._now()) - 4 * 24 * 3600
    token = verification_tokens._make_token_with_timestamp(user, four_days_ago, verification_tokens.secret)
    uid = urlsafe_base64_encode(str(user.pk).encode())
    assert client.post(f"/accounts/verify/{uid}/{token}/").status_code == 400
    settings.PASSWORD_RESET_TIMEOUT = 5 * 24 * 3600  # the same token within a longer limit
    assert client.post(f"/accounts/verify/{uid}/{token}/").status_code == 302
    user.refresh_from_db()
    assert user.is_active


@pytest.mark.parametrize(
    "mangle",
    [
        lambda uid, token: (uid, token[:-1] + ("a" if token[-1] != "a" else "b")),
        lambda uid, token: (uid, "garbage"),
        lambda uid, token: ("Zm9v", token),  # "foo": no such user id
        lambda uid, token: (urlsafe_base64_encode(b"999999"), token),
        lambda uid, token: ("%00", token),
    ],
    ids=["changed", "garbage", "bad-uid", "other-uid", "nul"],
)
def test_a_wrong_token_is_refused(client, django_capture_on_commit_callbacks, mangle):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    uid, token = uid_and_token(link_in(last_email_to("ann@example.com")))
    uid, token = mangle(uid, token)
    assert client.post(f"/accounts/verify/{uid}/{token}/").status_code in (400, 404)
    assert not User.objects.get().is_active


def test_another_accounts_token_does_not_verify_this_one(client, django_capture_on_commit_callbacks):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    sign_up(Client(), django_capture_on_commit_callbacks, "bob@example.com")
    ann_uid, _ = uid_and_token(link_in(last_email_to("ann@example.com")))
    _, bob_token = uid_and_token(link_in(last_email_to("bob@example.com")))
    assert client.post(f"/accounts/verify/{ann_uid}/{bob_token}/").status_code == 400
    assert not User.objects.filter(is_active=True).exists()


def test_a_taken_email_in_any_case_shows_the_same_page_and_emails_the_owner(
    client, django_capture_on_commit_callbacks, django_user_model
):
    ann = django_user_model.objects.create_user("ann@example.com", email="ann@example.com", password="x")
    legacy = django_user_model.objects.create_user("bob", email="Bob@Example.com", password="x")
    for taken in ("ANN@example.COM", "bob@example.com", "ann@example.com"):
        mail.outbox.clear()
        resend_limits_forget()  # one email per address a minute
        response = sign_up(Client(), django_capture_on_commit_callbacks, taken)
        assert response.status_code == 302 and response.url == "/accounts/signup/done/"
        (message,) = mail.outbox
        assert message.to == [taken.lower()]
        assert "already have an account" in message.body and "/accounts/password_reset/" in message.body
    assert django_user_model.objects.count() == 2
    ann.refresh_from_db()
    legacy.refresh_from_db()
    assert ann.check_password("x") and legacy.check_password("x")  # nobody's password was replaced


def test_weak_passwords_are_refused_with_djangos_messages(client, django_capture_on_commit_callbacks):
    cases = {
        "short1": "This password is too short.",
        "password123": "This password is too common.",
        "83749201938475": "This password is entirely numeric.",
        "ann-example-com": "The password is too similar to the",
    }
    for password, message in cases.items():
        response = sign_up(client, django_capture_on_commit_callbacks, "ann@example.com", password)
        assert response.status_code == 200, password
        assert message in response.text, password
    response = client.post(
        "/accounts/signup/", {"email": "ann@example.com", "password1": STRONG_PASSWORD, "password2": "other-Pw-1234"}
    )
    assert "didn’t match" in response.text
    assert not User.objects.exists() and not mail.outbox


def test_a_weak_password_for_a_taken_email_is_refused_the_same_way(
    client, django_capture_on_commit_callbacks, django_user_model
):
    django_user_model.objects.create_user("ann@example.com", email="ann@example.com", password="x")
    response = sign_up(client, django_capture_on_commit_callbacks, "ann@example.com", "short1")
    assert response.status_code == 200 and "This password is too short." in response.text
    assert not mail.outbox


def test_next_is_kept_through_sign_up_the_email_and_verification(client, django_capture_on_commit_callbacks):
    url = signup_url(next="/invite/abc123/", email="ann@example.com")
    assert url == "/accounts/signup/?next=%2Finvite%2Fabc123%2F&email=ann%40example.com"
    page = client.get(url).text
    assert 'value="ann@example.com"' in page and 'value="/invite/abc123/"' in page

    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com", next_url="/invite/abc123/")
    link = link_in(last_email_to("ann@example.com"))
    assert "next=%2Finvite%2Fabc123%2F" in link
    response = client.post(link)
    assert response.status_code == 302 and response.url == "/invite/abc123/"


@pytest.mark.parametrize(
    "off_site", ["https://evil.example/", "//evil.example/x", "http://testserver.evil.example/", "javascript:alert(1)"]
)
def test_an_off_site_next_is_dropped(client, django_capture_on_commit_callbacks, off_site):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com", next_url=off_site)
    link = link_in(last_email_to("ann@example.com"))
    assert "evil" not in link and "javascript" not in link
    response = client.post(link)
    assert response.status_code == 302 and response.url == "/"


def test_an_off_site_next_added_to_the_link_is_refused(client, django_capture_on_commit_callbacks):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    link = link_in(last_email_to("ann@example.com"))
    response = client.post(link + "?next=https://evil.example/")
    assert response.status_code == 302 and response.url == "/"


def test_links_use_calvin_public_url_when_set(client, django_capture_on_commit_callbacks, settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com/"
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    assert "https://calvin.example.com/accounts/verify/" in last_email_to("ann@example.com").body


def test_links_use_the_requests_host_otherwise(django_capture_on_commit_callbacks, settings):
    settings.ALLOWED_HOSTS = ["calvin.internal"]
    sign_up(Client(HTTP_HOST="calvin.internal"), django_capture_on_commit_callbacks, "ann@example.com")
    assert "http://calvin.internal/accounts/verify/" in last_email_to("ann@example.com").body


def test_sign_up_refuses_csrf_less_posts():
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/accounts/signup/", {"email": "ann@example.com", "password1": STRONG_PASSWORD, "password2": STRONG_PASSWORD}
    )
    assert response.status_code == 403
    assert not User.objects.exists()


def test_the_verify_button_refuses_csrf_less_posts(django_capture_on_commit_callbacks):
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/signup/")
    token = client.cookies["csrftoken"].value
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            "/accounts/signup/",
            {"email": "ann@example.com", "password1": STRONG_PASSWORD, "password2": STRONG_PASSWORD},
            HTTP_X_CSRFTOKEN=token,
        )
    link = link_in(last_email_to("ann@example.com"))
    assert Client(enforce_csrf_checks=True).post(link).status_code == 403  # another site's form
    assert not User.objects.get().is_active


def test_a_concurrent_sign_up_of_the_same_address_makes_one_account(
    client, django_capture_on_commit_callbacks, django_user_model, monkeypatch
):
    """The other sign-up committed between our check and our insert: the unique username decides."""
    django_user_model.objects.create_user("ann@example.com", email="ann@example.com", password="x")
    from calvin.accounts import signup

    monkeypatch.setattr(signup, "users_with_email", lambda email: django_user_model.objects.none())
    response = sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    assert response.status_code == 302 and response.url == "/accounts/signup/done/"
    assert django_user_model.objects.count() == 1
    assert "already have an account" in last_email_to("ann@example.com").body
    assert not AuditEvent.objects.filter(verb="account.signup").exists()


def test_sign_up_emails_are_rate_limited_the_same_for_taken_and_new_addresses(
    client, django_capture_on_commit_callbacks, django_user_model
):
    django_user_model.objects.create_user("ann@example.com", email="ann@example.com", password="x")
    for address in ("ann@example.com", "new@example.com"):
        assert sign_up(client, django_capture_on_commit_callbacks, address).status_code == 302
        again = sign_up(client, django_capture_on_commit_callbacks, address)
        assert again.status_code == 200 and "wait, then try again" in again.content.decode()
    assert sorted(m.to[0] for m in mail.outbox) == ["ann@example.com", "new@example.com"]
    assert django_user_model.objects.count() == 2
