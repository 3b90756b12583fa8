"""Log in by email or username, the unverified-account message and its resend button, password
reset end to end and password change, through the real views."""

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from calvin.accounts.verification import EMAILS_PER_CLIENT_HOUR
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
NEW_PASSWORD = "Another-long-phrase-42"


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    resend_limits_forget()
    yield
    resend_limits_forget()


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user("ann@example.com", email="ann@example.com", password=STRONG_PASSWORD)


def log_in(client, username: str, password: str = STRONG_PASSWORD, **extra):
    return client.post("/accounts/login/", {"username": username, "password": password, **extra})


@pytest.mark.parametrize("typed", ["ann@example.com", "ANN@Example.COM", "ａｎｎ@example.com"])
def test_log_in_by_email_in_any_case(client, ann, typed):
    response = log_in(client, typed)
    assert response.status_code == 302, response.content.decode()
    assert logged_in_user_id(client) == ann.pk


def test_log_in_by_username_and_by_a_legacy_accounts_email(client, django_user_model):
    admin = django_user_model.objects.create_user("admin", email="Ops@Example.com", password=STRONG_PASSWORD)
    assert log_in(client, "admin").status_code == 302 and logged_in_user_id(client) == admin.pk
    other = Client()
    assert log_in(other, "ops@example.com").status_code == 302 and logged_in_user_id(other) == admin.pk


def test_an_email_two_accounts_share_logs_into_neither(client, django_user_model):
    django_user_model.objects.create_user("one", email="team@example.com", password=STRONG_PASSWORD)
    django_user_model.objects.create_user("two", email="TEAM@example.com", password=STRONG_PASSWORD)
    response = log_in(client, "team@example.com")
    assert response.status_code == 200 and "Please enter a correct" in response.content.decode()


@pytest.mark.parametrize("look_alike", ["аnn@example.com", "ann@exаmple.com"])  # Cyrillic а
def test_a_unicode_look_alike_does_not_log_into_the_account(client, ann, look_alike):
    response = log_in(client, look_alike)
    assert response.status_code == 200 and "Please enter a correct" in response.content.decode()
    assert logged_in_user_id(client) is None


@pytest.mark.parametrize("look_alike", ["аnn@example.com", "ann@exаmple.com"])  # Cyrillic а
def test_a_unicode_look_alike_cannot_sign_up(client, django_capture_on_commit_callbacks, ann, look_alike):
    response = sign_up(client, django_capture_on_commit_callbacks, look_alike)
    assert response.status_code == 200
    assert "plain ASCII letters" in response.content.decode() or "valid email" in response.content.decode()
    assert User.objects.count() == 1 and not mail.outbox


def test_a_full_width_variant_of_a_taken_address_is_the_same_account(client, django_capture_on_commit_callbacks, ann):
    response = sign_up(client, django_capture_on_commit_callbacks, "ＡＮＮ@example.com")
    assert response.status_code == 302
    assert User.objects.count() == 1
    assert "already have an account" in last_email_to("ann@example.com").body


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("username", "ann\x00@example.com", "Null characters are not allowed."),
        ("username", "a" * 10_000, "at most 254 characters"),
        ("password", "x\x00y", "Null characters are not allowed."),
    ],
)
def test_hostile_login_input_gets_a_clear_error(client, ann, field, value, message):
    data = {"username": "ann@example.com", "password": STRONG_PASSWORD, field: value}
    response = client.post("/accounts/login/", data)
    assert response.status_code == 200 and message in response.content.decode()
    assert logged_in_user_id(client) is None


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("email", "ann\x00@example.com", "Null characters are not allowed."),
        ("email", "a" * 10_000 + "@example.com", "at most 150 characters"),
        ("password1", "x" * 10_000 + "\x00", "Null characters are not allowed."),
        ("next", "/x" * 5_000, "at most 2000 characters"),
    ],
)
def test_hostile_sign_up_input_gets_a_clear_error(client, field, value, message):
    data = {"email": "ann@example.com", "password1": STRONG_PASSWORD, "password2": STRONG_PASSWORD, field: value}
    response = client.post("/accounts/signup/", data)
    assert response.status_code == 200 and message in response.content.decode()
    assert not User.objects.exists()


def test_an_unverified_account_is_told_to_verify_only_with_its_right_password(
    client, django_capture_on_commit_callbacks
):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    wrong = log_in(Client(), "ann@example.com", "not-the-password").content.decode()
    assert "Verify your email first" not in wrong and "Send the link again" not in wrong
    assert "Please enter a correct" in wrong

    page = log_in(client, "ann@example.com").content.decode()
    assert "Verify your email first" in page and "Send the link again" in page
    assert logged_in_user_id(client) is None


def test_send_the_link_again_sends_a_working_link_and_is_rate_limited(client, django_capture_on_commit_callbacks):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com", next_url="/invite/abc/")
    mail.outbox.clear()
    resend_limits_forget()  # a minute later
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/accounts/verify/resend/", {"email": "ann@example.com", "next": "/invite/abc/"})
    assert response.status_code == 302 and response.url == "/accounts/signup/done/"
    link = link_in(last_email_to("ann@example.com"))

    with django_capture_on_commit_callbacks(execute=True):
        again = client.post("/accounts/verify/resend/", {"email": "ann@example.com"}, follow=True)
    assert "wait a minute" in again.content.decode()
    assert len(mail.outbox) == 1

    assert client.post(link).url == "/invite/abc/"


def test_resend_says_the_same_for_any_address_and_sends_only_to_unverified_accounts(
    client, django_capture_on_commit_callbacks, ann
):
    for address in ("ann@example.com", "nobody@example.com"):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/accounts/verify/resend/", {"email": address})
        assert response.status_code == 302 and response.url == "/accounts/signup/done/"
    assert not mail.outbox  # ann is verified already, nobody has no account


def test_resend_from_one_address_is_capped_across_emails(client, django_capture_on_commit_callbacks):
    for number in range(EMAILS_PER_CLIENT_HOUR):
        client.post("/accounts/verify/resend/", {"email": f"p{number}@example.com"})
    response = client.post("/accounts/verify/resend/", {"email": "last@example.com"}, follow=True)
    assert "wait a minute" in response.content.decode()


def test_a_deactivated_account_is_not_told_to_verify_and_gets_no_new_link(
    client, django_capture_on_commit_callbacks, ann
):
    assert log_in(Client(), "ann@example.com").status_code == 302  # used once: last_login is set
    User.objects.filter(pk=ann.pk).update(is_active=False)
    page = log_in(client, "ann@example.com").content.decode()
    assert "Verify your email first" not in page and "Please enter a correct" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/accounts/verify/resend/", {"email": "ann@example.com"})
    assert not mail.outbox


def test_an_inactive_accounts_old_session_stops_working(client, ann):
    log_in(client, "ann@example.com")
    User.objects.filter(pk=ann.pk).update(is_active=False)
    assert client.get("/").url.startswith("/accounts/login/")


def test_the_login_page_links_to_sign_up_with_next_and_to_reset(client):
    page = client.get("/accounts/login/?next=/invite/abc/").content.decode()
    assert 'href="/accounts/signup/?next=%2Finvite%2Fabc%2F"' in page
    assert 'href="/accounts/password_reset/"' in page


def test_log_in_refuses_csrf_less_posts(ann):
    client = Client(enforce_csrf_checks=True)
    assert log_in(client, "ann@example.com").status_code == 403
    assert logged_in_user_id(client) is None


def test_password_reset_end_to_end(client, ann):
    response = client.post("/accounts/password_reset/", {"email": "ANN@example.com"})
    assert response.status_code == 302 and response.url == "/accounts/password_reset/done/"
    message = last_email_to("ann@example.com")
    assert message.subject == "Reset your Calvin password"
    link = link_in(message)
    assert link.startswith("/accounts/reset/")

    form_page = client.get(link, follow=True)
    assert "Choose a new password" in form_page.content.decode()
    set_url = form_page.redirect_chain[-1][0]
    weak = client.post(set_url, {"new_password1": "short1", "new_password2": "short1"})
    assert "This password is too short." in weak.content.decode()
    done = client.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done.url == "/accounts/reset/done/"
    assert AuditEvent.objects.filter(verb="account.password_reset", target_id=str(ann.pk)).exists()

    assert log_in(Client(), "ann@example.com", STRONG_PASSWORD).status_code == 200  # the old one is gone
    assert log_in(Client(), "ann@example.com", NEW_PASSWORD).status_code == 302
    assert "does not work" in Client().get(link, follow=True).content.decode()  # single use


def test_password_reset_for_an_unknown_address_looks_the_same_and_sends_nothing(client):
    response = client.post("/accounts/password_reset/", {"email": "nobody@example.com"})
    assert response.status_code == 302 and response.url == "/accounts/password_reset/done/"
    assert not mail.outbox


def test_password_reset_links_use_calvin_public_url(client, ann, settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    client.post("/accounts/password_reset/", {"email": "ann@example.com"})
    assert "https://calvin.example.com/accounts/reset/" in last_email_to("ann@example.com").body


def test_password_change(client, ann):
    assert client.get("/accounts/password_change/").url.startswith("/accounts/login/")
    log_in(client, "ann@example.com")
    form_page = client.get("/accounts/password_change/").content.decode()
    assert 'href="/accounts/password_change/" id="password-change"' in form_page  # the header's link
    other_session = Client()
    log_in(other_session, "ann@example.com")
    response = client.post(
        "/accounts/password_change/",
        {"old_password": STRONG_PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302 and response.url == "/accounts/password_change/done/"
    assert "Your password is changed" in client.get(response.url).content.decode()
    assert AuditEvent.objects.filter(verb="account.password_change", target_id=str(ann.pk)).exists()
    assert logged_in_user_id(client) == ann.pk
    assert other_session.get("/accounts/password_change/").status_code == 302  # logged out elsewhere


def test_log_out_is_a_post(client, ann):
    log_in(client, "ann@example.com")
    assert client.get("/accounts/logout/").status_code == 405
    assert client.post("/accounts/logout/").status_code == 302
    assert logged_in_user_id(client) is None


def test_failures_in_any_case_count_against_one_username(client, ann, settings):
    """django-axes counts the typed username's normal form: changing its case gains no attempts."""
    variants = ["ann@example.com", "ANN@example.com", "Ann@Example.com", "aNN@example.COM", "ａnn@example.com"]
    for typed in variants[: settings.AXES_FAILURE_LIMIT]:
        response = log_in(client, typed, "wrong-password")
    assert response.status_code == 429
    assert log_in(Client(), "ann@EXAMPLE.com").status_code == 429  # the right password, refused unchecked


def test_a_reset_before_verifying_sets_the_password_and_verifies(client, django_capture_on_commit_callbacks):
    sign_up(client, django_capture_on_commit_callbacks, "ann@example.com")
    mail.outbox.clear()
    client.post("/accounts/password_reset/", {"email": "ann@example.com"})
    form_page = client.get(link_in(last_email_to("ann@example.com")), follow=True)
    set_url = form_page.redirect_chain[-1][0]
    client.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    ann = User.objects.get()
    assert ann.is_active and ann.check_password(NEW_PASSWORD)
    assert AuditEvent.objects.filter(verb="account.verify", target_id=str(ann.pk)).exists()


def test_a_deactivated_account_gets_no_reset_link(client, ann):
    assert log_in(Client(), "ann@example.com").status_code == 302
    User.objects.filter(pk=ann.pk).update(is_active=False)
    client.post("/accounts/password_reset/", {"email": "ann@example.com"})
    assert not mail.outbox
