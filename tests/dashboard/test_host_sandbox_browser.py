"""The admin's Host list in real Chromium: a host without a sandbox reads "no sandbox", in red,
under the admin's content security policy (no inline styles)."""

import pytest

from sessions.hosts import host_create
from sessions.models import Host

pytestmark = pytest.mark.django_db(transaction=True)

RED = "rgb(186, 33, 33)"  # #ba2121, the admin's own colour for errors


def test_the_host_list_shows_no_sandbox_in_red(gateway, django_user_model, page, tmp_path):
    bare, _ = host_create(name="bare-host")
    sandboxed, _ = host_create(name="sandboxed-host")
    Host.objects.filter(id=bare.id).update(sandbox="none")
    Host.objects.filter(id=sandboxed.id).update(sandbox="bwrap")
    django_user_model.objects.create_superuser("root", password="pw-admin-123")
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")

    page.goto(f"{gateway}/admin/agent_sessions/host/")
    warning = page.locator("tr:has-text('bare-host') .no-sandbox")
    assert warning.inner_text() == "no sandbox"
    assert warning.evaluate("element => getComputedStyle(element).color") == RED
    plain = page.locator("tr:has-text('sandboxed-host') td.field-sandbox_shown")
    assert plain.inner_text() == "bwrap" and plain.evaluate("element => getComputedStyle(element).color") != RED
    shot = tmp_path / "hosts.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0

    page.goto(f"{gateway}/admin/agent_sessions/host/{bare.id}/change/")
    assert page.locator(".no-sandbox").evaluate("element => getComputedStyle(element).color") == RED
