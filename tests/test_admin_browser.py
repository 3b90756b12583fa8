"""In real Chromium through uvicorn: a workspace owner (neither staff nor a superuser) logs into
/admin/ and sees their workspace's console only; a plain member is told they administer no
workspace. Screenshots go to var/<test name>/screenshots/h4-*.png."""

import os
from pathlib import Path

import pytest

from calvin.workspaces.models import Member, Workspace
from sessions.models import Session
from tests.dashboard.conftest import browser, page  # noqa: F401 (fixtures)
from tests.test_admin_scope import GLOBEX, build_world, url_of

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"


def shot(tab, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"h4-{name}.png"), full_page=True)


def admin_login(tab, base: str, username: str, password: str) -> None:
    tab.goto(f"{base}/admin/login/")
    tab.fill("#id_username", username)
    tab.fill("#id_password", password)
    tab.click("input[type=submit]")


def test_an_owner_runs_their_workspace_in_the_admin_and_a_member_is_told_why_not(
    gateway,
    django_user_model,
    vault,
    page,  # noqa: F811
):
    world = build_world(django_user_model)
    member = django_user_model.objects.create_user("mo", password="pw-mo-12345")
    Member.objects.create(workspace=world.acme[Workspace][0], user=member, role=Member.Role.MEMBER)

    admin_login(page, gateway, "acme-owner", "pw-acme-123")
    page.wait_for_url(f"{gateway}/admin/")
    index = page.content()
    assert "Repositories" in index and "Sessions" in index and "Tool calls" in index
    assert "Periodic tasks" not in index and "Access attempts" not in index and ">Users<" not in index
    assert GLOBEX not in index
    shot(page, "index-owner")

    session = world.acme[Session][0]
    page.goto(f"{gateway}{url_of(Session, 'change', session.pk)}")
    records = page.inner_text(".field-records")
    assert all(word in records for word in ("thread page", "turns", "tool calls", "approvals", "runners"))
    shot(page, "session-records")
    page.click(".field-records a:text-is('tool calls')")
    page.wait_for_selector("#result_list")
    assert GLOBEX not in page.content()
    shot(page, "session-tool-calls")

    page.goto(f"{gateway}{url_of(Workspace, 'changelist')}")
    assert GLOBEX not in page.content()
    page.goto(f"{gateway}{url_of(Workspace, 'change', world.acme[Workspace][0].pk)}")
    assert page.locator("#id_name").count() == 1 and page.locator("#id_egress_policy").count() == 0
    shot(page, "workspace-owner")

    page.context.clear_cookies()
    admin_login(page, gateway, "mo", "pw-mo-12345")
    page.wait_for_selector(".errornote")
    assert "administers no workspace" in page.inner_text(".errornote")
    shot(page, "login-refused")
