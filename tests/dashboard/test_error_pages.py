"""Error pages, the login pages and the favicon in Calvin's look, and a quiet log: an ordinary 403
or 404 is one line, never a traceback."""

import io
import logging

import httpx2
import pytest
from django.test import RequestFactory
from django.views import defaults
from playwright.sync_api import expect

from calvin.log_filters import ClientErrorsWithoutTraceback
from sessions.services import session_start
from tests.dashboard.conftest import STRANGER_PASSWORD, browser_login

CALVIN_DARK = "rgb(36, 41, 47)"  # the header's colour (calvin.css), also the admin's


def _no_client_errors(page):
    """Collects every answer of 400 or more the page's loads get (the page itself excepted)."""
    failures = []
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return failures


@pytest.mark.django_db(transaction=True)
def test_another_tenants_thread_is_calvins_404_with_a_way_home(gateway, workspace, owner_member, other_workspace, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Acme's plan")
    browser_login(page, gateway, "stranger", STRANGER_PASSWORD)
    failures = _no_client_errors(page)
    response = page.goto(f"{gateway}/threads/{session.thread_id}/")
    assert response.status == 404
    expect(page).to_have_title("Page not found · Calvin")
    expect(page.locator("#error-page h1")).to_have_text("Page not found")
    expect(page.locator("#error-page")).not_to_contain_text("Acme's plan")
    # Calvin's stylesheet and header, not the browser's bare page.
    assert page.locator("body > header").evaluate("(el) => getComputedStyle(el).backgroundColor") == CALVIN_DARK
    page.click("#go-home")
    expect(page).to_have_url(f"{gateway}/w/globex/")
    assert failures == [f"404 {gateway}/threads/{session.thread_id}/"]


@pytest.mark.django_db(transaction=True)
def test_a_logged_out_404_offers_the_login(gateway, page):
    response = page.goto(f"{gateway}/no-such-page/")
    assert response.status == 404
    expect(page.locator("#error-page")).to_contain_text("There is nothing at this address")
    expect(page.locator("#error-page a:text-is('Log in')")).to_have_attribute("href", "/accounts/login/")


@pytest.mark.django_db(transaction=True)
def test_a_refused_form_is_calvins_csrf_page(gateway, workspace, owner_member, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Chat")
    browser_login(page, gateway, "owner", "pw-owner-123")
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.evaluate("document.querySelector('form.stop input[name=csrfmiddlewaretoken]').value = 'stale'")
    page.click("#stop-agent")
    expect(page.locator("#error-page h1")).to_have_text("This form could not be sent")
    expect(page.locator("#error-page")).to_contain_text("reload the page and send it again. Nothing was changed.")
    expect(page.locator("#go-home")).to_be_visible()


@pytest.mark.django_db(transaction=True)
def test_the_favicon_is_served_and_pages_load_without_a_404(gateway, workspace, page):
    failures = _no_client_errors(page)
    page.goto(f"{gateway}/accounts/login/")
    expect(page.locator("#login-page h2")).to_have_text("Log in to Calvin")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon == "/static/dashboard/favicon.svg"
    answer = page.request.get(f"{gateway}{icon}")
    assert answer.status == 200 and answer.headers["content-type"] == "image/svg+xml"
    assert answer.text().startswith("<svg")
    # What browsers ask for on their own.
    with httpx2.Client(base_url=gateway) as http:
        probe = http.get("/favicon.ico")
        assert probe.status_code == 302 and probe.headers["location"] == icon
        assert http.get("/favicon.ico", follow_redirects=True).status_code == 200

    page.goto(f"{gateway}/admin/login/")
    expect(page.locator("link[rel=icon]")).to_have_attribute("href", icon)
    assert page.locator("#header").evaluate("(el) => getComputedStyle(el).backgroundColor") == CALVIN_DARK
    expect(page.locator("#site-name")).to_have_text("Calvin")
    assert failures == []


def test_500_and_400_pages_need_no_request_context_and_lead_home():
    request = RequestFactory().get("/broken/")
    for view, status, heading in [
        (defaults.server_error, 500, "Something went wrong on Calvin's side"),
        (defaults.bad_request, 400, "Calvin could not read that request"),
    ]:
        response = view(request) if view is defaults.server_error else view(request, exception=None)
        html = response.content.decode()
        assert response.status_code == status
        assert heading in html and 'id="go-home" href="/"' in html
        assert "/static/dashboard/calvin.css" in html


@pytest.fixture
def request_log():
    """What django.request writes, formatted as the console handler does (tracebacks included)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


@pytest.mark.django_db
def test_an_ordinary_403_or_404_logs_one_line_without_a_traceback(
    client, workspace, owner_member, plain_member, stranger_member, request_log
):
    session = session_start(workspace=workspace, owner=owner_member, title="Owner's")
    client.force_login(plain_member.user)
    assert client.post(f"/threads/{session.thread_id}/stop/").status_code == 403  # PermissionDenied
    client.force_login(stranger_member.user)
    assert client.get(f"/threads/{session.thread_id}/").status_code == 404  # Http404
    assert client.get("/favicon.ico").status_code == 302
    lines = request_log.getvalue().splitlines()
    assert lines == [
        f"Forbidden (Permission denied): /threads/{session.thread_id}/stop/",
        f"Not Found: /threads/{session.thread_id}/",
    ]


def test_a_server_error_keeps_its_traceback():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        exc_info = sys.exc_info()
    for status, kept in [(500, True), (403, False), (404, False)]:
        record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "x", (), exc_info)
        record.status_code = status
        assert ClientErrorsWithoutTraceback().filter(record)
        assert (record.exc_info is not None) is kept
