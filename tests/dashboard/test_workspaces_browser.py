"""Workspaces in real Chromium under the content security policy: the header's switcher between
two workspaces, the settings page with and without Slack, Uninstall's confirmation, and the
create page's error for a look-alike slug. Screenshots go to $CALVIN_SCREENSHOTS (else tmp)."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from calvin.chat.slack.installations import installation_save
from calvin.workspaces.models import Member, Workspace
from sessions.services import session_start
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shots(tmp_path):
    folder = Path(os.environ.get("CALVIN_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> None:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0

    return take


@pytest.fixture
def csp_violations(page):
    seen = []
    page.on("console", lambda message: seen.append(message.text) if "Content Security" in message.text else None)
    return seen


@pytest.fixture
def in_both(owner_member, other_workspace, stranger_member):
    """Acme's owner is a plain member of Globex too; each workspace has a thread of its own."""
    session_start(workspace=owner_member.workspace, owner=owner_member, prompt="Acme nightly build")
    session_start(workspace=other_workspace, owner=stranger_member, prompt="Globex quarterly report")
    return Member.objects.create(workspace=other_workspace, user=owner_member.user, role=Member.Role.MEMBER)


def test_the_switcher_moves_between_ones_two_workspaces(gateway, in_both, page, shots, csp_violations):
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    expect(page).to_have_url(f"{gateway}/w/acme/")
    expect(page.locator("#current-workspace")).to_have_text("Acme")
    expect(page.locator("main")).to_contain_text("Acme nightly build")
    expect(page.locator("main")).not_to_contain_text("Globex quarterly report")

    page.click("#current-workspace")
    choices = page.locator("#workspace-switcher li a")
    expect(choices).to_have_text(["Acme", "Globex", "New workspace…"])
    shots(page, "home-switcher")
    page.click("#workspace-switcher a:text-is('Globex')")
    expect(page).to_have_url(f"{gateway}/w/globex/")
    expect(page.locator("#current-workspace")).to_have_text("Globex")
    expect(page.locator("main")).to_contain_text("Globex quarterly report")
    expect(page.locator("main")).not_to_contain_text("Acme nightly build")
    expect(page.locator("#secrets-link")).to_have_count(0)  # a plain member there
    shots(page, "home-globex")

    page.click("text=Globex quarterly report")
    expect(page.locator("#thread-workspace")).to_have_text("In Globex")
    page.goto(f"{gateway}/")
    expect(page).to_have_url(f"{gateway}/w/globex/")  # the workspace used last
    assert csp_violations == []


def test_the_settings_page_without_and_with_slack(gateway, workspace, settings, vault, page, shots, csp_violations):
    settings.SLACK_CLIENT_ID = settings.SLACK_CLIENT_SECRET = settings.SLACK_SIGNING_SECRET = ""
    settings.SLACK_BOT_TOKEN = ""
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.click("header nav a:text-is('Settings')")
    expect(page).to_have_url(f"{gateway}/w/acme/settings/")
    expect(page.locator("#slack-unconfigured")).to_contain_text(
        "SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and SLACK_SIGNING_SECRET"
    )
    page.fill("#id_name", "Acme Platform")
    page.click("button:text-is('Save')")
    expect(page.locator("ul.notices")).to_have_text("Name saved.")
    expect(page.locator("#current-workspace")).to_have_text("Acme Platform")
    shots(page, "settings-slack-unconfigured")

    settings.SLACK_CLIENT_ID = "1111.2222"
    settings.SLACK_CLIENT_SECRET = "client-secret-standin-0123"
    settings.SLACK_SIGNING_SECRET = "signing-secret-standin-0123"
    page.reload()
    expect(page.locator("#add-to-slack")).to_have_attribute("href", "/slack/install?workspace=acme")
    shots(page, "settings-slack-configured")

    installation_save(workspace=workspace, team_id="T0ACME", bot_token="xoxb-T0ACME-standin-1", team_name="Acme Slack")
    page.reload()
    expect(page.locator("#slack-team")).to_contain_text("Connected to the Slack team Acme Slack (T0ACME)")
    shots(page, "settings-slack-installed")
    page.click("#slack-uninstall")
    expect(page.locator("h1")).to_have_text("Uninstall Calvin from Slack?")
    shots(page, "settings-slack-uninstall-confirm")
    page.click("#confirm-uninstall")
    expect(page).to_have_url(f"{gateway}/w/acme/settings/")
    expect(page.locator("ul.notices")).to_have_text("Calvin is no longer connected to the Slack team Acme Slack.")
    expect(page.locator("#add-to-slack")).to_be_visible()
    assert Workspace.objects.get(id=workspace.id).slack_team_id == ""
    assert csp_violations == []


def test_the_create_page_refuses_a_look_alike_slug_then_creates(
    gateway, django_user_model, page, shots, csp_violations
):
    django_user_model.objects.create_user("newcomer", password="pw-newcomer-123")
    browser_login(page, gateway, "newcomer", "pw-newcomer-123")
    expect(page).to_have_url(f"{gateway}/workspaces/new/")
    page.locator("#id_name").press_sequentially("Acme Platform 2")
    expect(page.locator("#id_slug")).to_have_value("acme-platform-2")  # suggested from the name
    page.fill("#id_name", "Acme")
    page.fill("#id_slug", "асme")  # Cyrillic а and с
    page.click("button:text-is('Create')")
    expect(page.locator("#slug-error")).to_contain_text("'а' (CYRILLIC SMALL LETTER A) is not one of them")
    expect(page.locator("#id_slug")).to_have_value("асme")  # shown as typed, not rewritten
    shots(page, "create-error")
    assert not Workspace.objects.exists()

    page.fill("#id_slug", "acme")
    page.click("button:text-is('Create')")
    expect(page).to_have_url(f"{gateway}/w/acme/")
    expect(page.locator("ul.notices")).to_have_text("Workspace Acme created: you are its owner.")
    expect(page.locator("#current-workspace")).to_have_text("Acme")
    page.click("#current-workspace")
    expect(page.locator("#workspace-switcher li").first).to_have_text("Acme owner")
    assert csp_violations == []
