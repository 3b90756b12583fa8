"""Sign up -> verify -> logged in, in Debian's Chromium against uvicorn, the link read from the outbox."""

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from playwright.sync_api import expect

from tests.accounts.signup_steps import STRONG_PASSWORD, resend_limits_forget
from tests.dashboard.conftest import browser, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def test_sign_up_verify_and_land_logged_in(gateway, page):  # noqa: F811 (fixture)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    resend_limits_forget()
    page.goto(f"{gateway}/accounts/login/")
    page.click("text=Create an account")
    expect(page).to_have_url(f"{gateway}/accounts/signup/")
    page.fill("#id_email", "Ann@Example.com")
    page.fill("#id_password1", STRONG_PASSWORD)
    page.fill("#id_password2", STRONG_PASSWORD)
    page.screenshot(path=str(SCREENSHOTS / "h1-signup.png"), full_page=True)
    page.click("button:text-is('Create the account')")
    expect(page.locator("#check-inbox h2")).to_have_text("Check your inbox")
    page.screenshot(path=str(SCREENSHOTS / "h1-check-inbox.png"), full_page=True)

    (message,) = mail.outbox
    assert message.to == ["ann@example.com"]
    (link,) = re.findall(r"https?://\S+", message.body)
    assert link.startswith(f"{gateway}/accounts/verify/")
    page.goto(link)
    expect(page.locator("main")).to_contain_text("Verify ann@example.com and log in")
    page.screenshot(path=str(SCREENSHOTS / "h1-verify.png"), full_page=True)
    page.click("button:text-is('Verify and log in')")

    expect(page.locator("header")).to_contain_text("Log out ann@example.com")
    expect(page.locator("main")).to_contain_text("Your email is verified")
    page.screenshot(path=str(SCREENSHOTS / "h1-logged-in.png"), full_page=True)
    assert get_user_model().objects.get(username="ann@example.com").is_active

    page.goto(link)  # the link again: used up
    expect(page.locator("#link-invalid h2")).to_have_text("This link does not work")


def test_the_unverified_login_offers_to_send_the_link_again(gateway, page, django_user_model):  # noqa: F811
    resend_limits_forget()
    django_user_model.objects.create_user(
        "bob@example.com", email="bob@example.com", password=STRONG_PASSWORD, is_active=False
    )
    page.goto(f"{gateway}/accounts/login/")
    page.fill("#id_username", "BOB@example.com")
    page.fill("#id_password", STRONG_PASSWORD)
    page.click("button:text-is('Log in')")
    expect(page.locator("main")).to_contain_text("Verify your email first")
    page.screenshot(path=str(SCREENSHOTS / "h1-login-unverified.png"), full_page=True)
    page.click("button:text-is('Send the link again')")
    expect(page.locator("#check-inbox h2")).to_have_text("Check your inbox")
    (message,) = mail.outbox
    assert message.to == ["bob@example.com"] and "/accounts/verify/" in message.body


def test_forgot_password_reset_and_log_in_with_the_new_one(gateway, page, django_user_model):  # noqa: F811
    django_user_model.objects.create_user("cy@example.com", email="cy@example.com", password=STRONG_PASSWORD)
    page.goto(f"{gateway}/accounts/login/")
    page.click("text=Forgot your password?")
    page.fill("#id_email", "CY@example.com")
    page.screenshot(path=str(SCREENSHOTS / "h1-reset-form.png"), full_page=True)
    page.click("button:text-is('Send the link')")
    expect(page.locator("#check-inbox h2")).to_have_text("Check your inbox")
    (message,) = mail.outbox
    (link,) = re.findall(r"https?://\S+", message.body)
    page.goto(link)
    page.fill("#id_new_password1", "A-brand-new-phrase-77")
    page.fill("#id_new_password2", "A-brand-new-phrase-77")
    page.screenshot(path=str(SCREENSHOTS / "h1-reset-confirm.png"), full_page=True)
    page.click("button:text-is('Set the password')")
    expect(page.locator("#password-set h2")).to_have_text("Your password is set")
    page.click("#password-set a")
    page.fill("#id_username", "cy@example.com")
    page.fill("#id_password", "A-brand-new-phrase-77")
    page.click("button:text-is('Log in')")
    expect(page.locator("header")).to_contain_text("Log out cy@example.com")
