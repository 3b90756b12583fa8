"""Login throttling (django-axes) through the real forms over HTTP: the dashboard's and the admin's."""

import httpx2
import pytest
from django.conf import settings

from tests.dashboard.conftest import OWNER_PASSWORD, STRANGER_PASSWORD, post_login_form

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_PASSWORD = "pw-admin-123"


def fail_until_locked_out(http, username: str, path: str) -> None:
    """AXES_FAILURE_LIMIT (5) wrong passwords: the form again four times, then the lockout page."""
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        response = post_login_form(http, username, f"wrong-{attempt}", path)
        assert response.status_code == 200, attempt  # the form again, with its error
    assert_locked_out(post_login_form(http, username, "wrong-last", path))
    assert "sessionid" not in http.cookies


def assert_locked_out(response) -> None:
    assert response.status_code == 429
    assert "Too many failed logins" in response.text and "Try again in 15 minutes" in response.text


def test_after_five_failures_even_the_right_password_is_refused(gateway, workspace, monkeypatch):
    checked = []
    user_class = workspace.members.get().user.__class__
    original = user_class.check_password
    monkeypatch.setattr(user_class, "check_password", lambda user, raw: checked.append(raw) or original(user, raw))
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "owner", "/accounts/login/")
        assert len(checked) == 5

        response = post_login_form(http, "owner", OWNER_PASSWORD)
        assert_locked_out(response)
        assert len(checked) == 5  # refused without checking the password
        assert "sessionid" not in http.cookies
        assert http.get("/").headers["location"] == "/accounts/login/?next=/"


def test_the_admin_login_is_throttled_too(gateway, django_user_model):
    django_user_model.objects.create_superuser("root", password=ADMIN_PASSWORD)
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "root", "/admin/login/")
        assert_locked_out(post_login_form(http, "root", ADMIN_PASSWORD, "/admin/login/"))
        assert "sessionid" not in http.cookies


def test_a_locked_out_username_does_not_lock_out_another_person(gateway, workspace, other_workspace):
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "owner", "/accounts/login/")
        assert_locked_out(post_login_form(http, "owner", OWNER_PASSWORD))
    with httpx2.Client(base_url=gateway, timeout=10) as http:  # same address, another username
        response = post_login_form(http, "stranger", STRANGER_PASSWORD)
        assert response.status_code == 302 and response.headers["location"] == "/"


def test_fewer_failures_than_the_limit_do_not_lock_out(gateway, workspace):
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
            assert post_login_form(http, "owner", f"wrong-{attempt}").status_code == 200
        response = post_login_form(http, "owner", OWNER_PASSWORD)
        assert response.status_code == 302 and response.headers["location"] == "/"
