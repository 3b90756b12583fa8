"""Slack's OAuth v2 install over real HTTP: the install page, Slack's authorize URL with the
state and the scopes, the state cookie, the redirect with a code, oauth.v2.access at the
stand-in, and the team tied to the workspace with its bot token sealed by the vault."""

import html
import logging
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from calvin.chat.models import SlackInstallation, SlackOAuthState
from calvin.chat.slack.installations import installation_token
from calvin.workspaces.models import Member, Workspace
from calvin.workspaces.services import workspace_create
from secrets_vault.crypto import new_key, vault_keys

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "client-secret-standin-0123"
AUTHORIZE_URL = "https://slack.example/oauth/v2/authorize"
STATE_COOKIE = "slack-app-oauth-state"
OWNER_PASSWORD = "pw-owner-123"  # the `workspace` fixture's owner (tests/conftest.py)


@pytest.fixture
def oauth(settings, standin, vault):
    """The gateway configured for OAuth installs, the stand-in knowing the app's credentials."""
    settings.SLACK_CLIENT_ID = CLIENT_ID
    settings.SLACK_CLIENT_SECRET = CLIENT_SECRET
    settings.SLACK_AUTHORIZE_URL = AUTHORIZE_URL
    standin.oauth_client = (CLIENT_ID, CLIENT_SECRET)
    return standin


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


class Browser:
    """A person's browser: it keeps its cookies and sends them back, the install's Secure state
    cookie included (browsers send Secure cookies to localhost over plain HTTP; httpx does not)."""

    def __init__(self, base: str):
        self.base = base
        self.cookies: dict[str, str] = {}
        self.bodies: list[str] = []

    def get(self, path: str, params=None, *, send_cookies=True) -> httpx2.Response:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if send_cookies else {}
        response = httpx2.get(f"{self.base}{path}", params=params, headers=headers, timeout=20)
        self._keep(response)
        return response

    def post(self, path: str, data: dict) -> httpx2.Response:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        response = httpx2.post(f"{self.base}{path}", data=data, headers=headers, timeout=20)
        self._keep(response)
        return response

    def _keep(self, response) -> None:
        self.bodies.append(response.text)
        for line in response.headers.get_list("set-cookie"):
            name, _, rest = line.partition("=")
            value = rest.split(";", 1)[0]
            if "01 Jan 1970" in line or "Max-Age=0" in line:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value.strip('"')

    def log_in(self, username: str, password: str) -> None:
        page = self.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = self.post(
            "/accounts/login/", {"username": username, "password": password, "csrfmiddlewaretoken": token}
        )
        assert answer.status_code == 302, answer.text
        assert "sessionid" in self.cookies


def user_with_role(workspace, username: str, password: str, role: str):
    user = get_user_model().objects.create_user(username, password=password)
    Member.objects.create(workspace=workspace, user=user, role=role)
    return user


def start(browser: Browser, query: dict | None = None) -> tuple[str, dict]:
    """Open the install page; returns (state, the authorize URL's query)."""
    page = browser.get("/slack/install", params=query)
    assert page.status_code == 200, page.text
    url = html.unescape(re.search(r'id="add-to-slack" href="([^"]+)"', page.text).group(1))
    assert url.startswith(AUTHORIZE_URL + "?")
    asked = parse_qs(urlsplit(url).query, keep_blank_values=True)
    state = asked["state"][0]
    assert browser.cookies[STATE_COOKIE] == state  # the state cookie Bolt checks at the redirect
    return state, asked


def finish(browser: Browser, *, code: str, state: str, **kwargs) -> httpx2.Response:
    return browser.get("/slack/oauth_redirect", params={"code": code, "state": state}, **kwargs)


def result_text(response) -> str:
    found = re.search(r'id="install-result">(.*?)</p>', response.text, re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split()) if found else response.text


def no_token_anywhere(tokens, browser: Browser, logs) -> None:
    bodies = "\n".join(browser.bodies)
    lines = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in logs.records)
    for token in tokens:
        assert token not in bodies and token not in lines
        assert token.removeprefix("xoxb-") not in lines
    assert "xoxb-" not in bodies
    assert not re.search(r"xoxb-(?!\[redacted\])", lines)


def test_an_owner_connects_a_slack_team_to_their_workspace(gateway, oauth, workspace, logs, settings):
    team = oauth.add_team(team_id="T0NEW", bot_token="xoxb-new-team-secret-4242", bot_user_id="U0NB", bot_id="B0NB")
    oauth.add_oauth_code("code-1", team)
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)

    state, asked = start(browser)
    assert asked["client_id"] == [CLIENT_ID]
    assert asked["scope"] == [",".join(settings.SLACK_BOT_SCOPES)]
    row = SlackOAuthState.objects.get(state=state)
    assert (row.workspace_id, row.user.username, row.consumed_at) == (workspace.id, "owner", None)

    page = finish(browser, code="code-1", state=state)
    assert page.status_code == 200, page.text
    assert result_text(page) == (
        "The Slack workspace Stand-in team (T0NEW) is now connected to the Calvin workspace Acme."
    )
    assert STATE_COOKIE not in browser.cookies  # deleted by the answer

    installation = SlackInstallation.objects.get(team_id="T0NEW")
    assert installation.workspace_id == workspace.id
    assert installation.installed_by.username == "owner"
    assert (installation.bot_user_id, installation.bot_id, installation.from_environment) == ("U0NB", "B0NB", False)
    assert installation.installer_slack_user_id == "U0INSTALLER"
    assert b"xoxb-" not in bytes(installation.bot_token_sealed)
    assert installation_token(installation) == "xoxb-new-team-secret-4242"
    assert Workspace.objects.get(id=workspace.id).slack_team_id == "T0NEW"
    assert SlackOAuthState.objects.get(state=state).consumed_at is not None
    # The code went to SLACK_API_URL with the app's credentials; the bot was asked who it is.
    (access,) = oauth.ok_calls_of("oauth.v2.access")
    assert access.params["code"] == "code-1"
    assert oauth.ok_calls_of("auth.test")
    no_token_anywhere([team.bot_token], browser, logs)


def test_a_workspace_admin_may_install_too(gateway, oauth, workspace):
    user_with_role(workspace, "admin1", "pw-admin-123", Member.Role.ADMIN)
    oauth.add_oauth_code("code-a", oauth.add_team(team_id="T0ADM", bot_token="xoxb-admin-team-000111"))
    browser = Browser(gateway)
    browser.log_in("admin1", "pw-admin-123")
    state, _ = start(browser, {"workspace": "acme"})
    assert finish(browser, code="code-a", state=state).status_code == 200
    assert SlackInstallation.objects.get(team_id="T0ADM").installed_by.username == "admin1"


def test_a_team_connected_to_another_workspace_is_refused_and_nothing_changes(gateway, oauth, workspace, logs):
    team = oauth.add_team(team_id="T0TAKEN", bot_token="xoxb-taken-team-555666")
    oauth.add_oauth_code("code-first", team)
    owner = Browser(gateway)
    owner.log_in("owner", OWNER_PASSWORD)
    state, _ = start(owner)
    assert finish(owner, code="code-first", state=state).status_code == 200
    before = SlackInstallation.objects.values().get(team_id="T0TAKEN")

    globex = workspace_create(name="Globex", slug="globex", owner_user=None)
    user_with_role(globex, "stranger", "pw-stranger-123", Member.Role.OWNER)
    oauth.add_oauth_code("code-second", team)
    stranger = Browser(gateway)
    stranger.log_in("stranger", "pw-stranger-123")
    state, _ = start(stranger)
    page = finish(stranger, code="code-second", state=state)

    assert page.status_code == 409
    assert result_text(page) == (
        "The install was refused: this Slack workspace is already connected to another Calvin workspace."
        " Nothing was changed in Globex."
    )
    assert SlackInstallation.objects.values().get(team_id="T0TAKEN") == before
    assert SlackInstallation.objects.count() == 1
    assert Workspace.objects.get(id=globex.id).slack_team_id == ""
    no_token_anywhere([team.bot_token], stranger, logs)


def test_a_used_state_is_refused(gateway, oauth, workspace):
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0ONE", bot_token="xoxb-team-one-000001"))
    oauth.add_oauth_code("code-2", oauth.add_team(team_id="T0TWO", bot_token="xoxb-team-two-000002"))
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    state, _ = start(browser)
    cookie = browser.cookies[STATE_COOKIE]
    assert finish(browser, code="code-1", state=state).status_code == 200

    browser.cookies[STATE_COOKIE] = cookie  # the same redirect played again, cookie and all
    page = finish(browser, code="code-2", state=state)
    assert page.status_code == 401
    assert "this install link was already used" in result_text(page)
    assert list(SlackInstallation.objects.values_list("team_id", flat=True)) == ["T0ONE"]
    assert len(oauth.calls_of("oauth.v2.access")) == 1  # refused before Slack was asked


def test_an_expired_state_is_refused_before_slack_is_asked(gateway, oauth, workspace):
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0OLD", bot_token="xoxb-team-old-000003"))
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    state, _ = start(browser)
    SlackOAuthState.objects.filter(state=state).update(created_at=timezone.now() - timedelta(minutes=11))

    page = finish(browser, code="code-1", state=state)
    assert page.status_code == 401
    assert "more than 10 minutes ago and expired" in result_text(page)
    assert not SlackInstallation.objects.exists()
    assert not oauth.calls_of("oauth.v2.access")


def test_a_state_started_by_someone_else_is_refused_and_stays_theirs(gateway, oauth, workspace):
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0MINE", bot_token="xoxb-team-mine-000004"))
    globex = workspace_create(name="Globex", slug="globex", owner_user=None)
    user_with_role(globex, "stranger", "pw-stranger-123", Member.Role.OWNER)
    owner = Browser(gateway)
    owner.log_in("owner", OWNER_PASSWORD)
    state, _ = start(owner)

    # Another signed-in person (an owner elsewhere) with the owner's state and cookie.
    stranger = Browser(gateway)
    stranger.log_in("stranger", "pw-stranger-123")
    stranger.cookies[STATE_COOKIE] = state
    page = finish(stranger, code="code-1", state=state)
    assert page.status_code == 401
    assert "this install was not started by you" in result_text(page)
    assert "Acme" not in page.text  # nothing about the owner's workspace
    assert not SlackInstallation.objects.exists()
    assert not oauth.calls_of("oauth.v2.access")

    # Still the owner's to finish.
    assert finish(owner, code="code-1", state=state).status_code == 200
    assert SlackInstallation.objects.get(team_id="T0MINE").workspace_id == workspace.id


def test_a_redirect_without_the_state_cookie_is_refused(gateway, oauth, workspace):
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0NOC", bot_token="xoxb-team-nocookie-05"))
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    state, _ = start(browser)
    del browser.cookies[STATE_COOKIE]  # another browser, or the link opened elsewhere

    page = finish(browser, code="code-1", state=state)
    assert page.status_code == 400
    assert "its install cookie is missing" in result_text(page)
    assert not SlackInstallation.objects.exists()
    assert SlackOAuthState.objects.get(state=state).consumed_at is None


def test_a_code_slack_refuses_gives_a_clear_page_and_no_row(gateway, oauth, workspace, logs):
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    state, _ = start(browser)
    page = finish(browser, code="no-such-code", state=state)
    assert page.status_code == 401
    assert "Slack refused the install's code" in result_text(page)
    assert not SlackInstallation.objects.exists()
    (access,) = oauth.calls_of("oauth.v2.access")
    assert access.answer == {"ok": False, "error": "invalid_code"}


def test_a_plain_member_is_refused_and_nothing_is_stored(gateway, oauth, workspace):
    user_with_role(workspace, "member", "pw-member-123", Member.Role.MEMBER)
    browser = Browser(gateway)
    browser.log_in("member", "pw-member-123")
    expected = {
        "acme": "Slack can be installed only into a workspace you own or administer, and 'acme' is not one.",
        None: "Slack can be installed only by an owner or admin of a workspace, and you are neither anywhere.",
    }
    for slug, problem in expected.items():
        page = browser.get("/slack/install", params={"workspace": slug} if slug else None)
        assert page.status_code == 403
        shown = re.search(r'id="install-problem"><strong>(.*?)</strong>', page.text).group(1)
        assert html.unescape(shown) == problem
        assert "add-to-slack" not in page.text
    assert STATE_COOKIE not in browser.cookies
    assert not SlackOAuthState.objects.exists()


def test_a_member_demoted_before_the_redirect_is_refused(gateway, oauth, workspace):
    user = user_with_role(workspace, "admin1", "pw-admin-123", Member.Role.ADMIN)
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0DEM", bot_token="xoxb-team-demoted-0006"))
    browser = Browser(gateway)
    browser.log_in("admin1", "pw-admin-123")
    state, _ = start(browser)
    Member.objects.filter(user=user).update(role=Member.Role.MEMBER)

    page = finish(browser, code="code-1", state=state)
    assert page.status_code == 401
    assert "no longer an owner or admin of the workspace Acme" in result_text(page)
    assert not SlackInstallation.objects.exists()


def test_anonymous_people_are_sent_to_log_in_and_nothing_is_stored(gateway, oauth, workspace):
    browser = Browser(gateway)
    page = browser.get("/slack/install", params={"workspace": "acme"})
    assert page.status_code == 302
    assert page.headers["location"] == "/accounts/login/?next=/slack/install%3Fworkspace%3Dacme"
    assert not SlackOAuthState.objects.exists()

    # Coming back from Slack signed out: to the login page, then back to finish.
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0ANON", bot_token="xoxb-team-anon-000007"))
    owner = Browser(gateway)
    owner.log_in("owner", OWNER_PASSWORD)
    state, _ = start(owner)
    signed_out = Browser(gateway)
    signed_out.cookies[STATE_COOKIE] = state
    page = finish(signed_out, code="code-1", state=state)
    assert page.status_code == 302
    assert page.headers["location"].startswith("/accounts/login/?next=/slack/oauth_redirect%3F")
    assert SlackOAuthState.objects.get(state=state).consumed_at is None
    assert not SlackInstallation.objects.exists()


def test_a_person_administering_several_workspaces_chooses_one(gateway, oauth, workspace):
    globex = workspace_create(name="Globex", slug="globex", owner_user=None)
    Member.objects.create(workspace=globex, user=get_user_model().objects.get(username="owner"), role="admin")
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0GLX", bot_token="xoxb-team-globex-00008"))
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    page = browser.get("/slack/install")
    assert page.status_code == 200
    assert 'href="?workspace=acme"' in page.text and 'href="?workspace=globex"' in page.text
    assert "add-to-slack" not in page.text and not SlackOAuthState.objects.exists()

    state, _ = start(browser, {"workspace": "globex"})
    assert finish(browser, code="code-1", state=state).status_code == 200
    assert SlackInstallation.objects.get(team_id="T0GLX").workspace_id == globex.id


def test_without_client_credentials_there_is_no_install(gateway, standin, workspace, settings):
    settings.SLACK_CLIENT_ID = ""
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    assert browser.get("/slack/install").status_code == 404
    assert not SlackOAuthState.objects.exists()


def test_rotate_secrets_seals_the_bot_tokens_again(gateway, oauth, workspace, settings):
    oauth.add_oauth_code("code-1", oauth.add_team(team_id="T0ROT", bot_token="xoxb-team-rotate-00009"))
    browser = Browser(gateway)
    browser.log_in("owner", OWNER_PASSWORD)
    state, _ = start(browser)
    assert finish(browser, code="code-1", state=state).status_code == 200
    old_key = settings.SP_STORE_KEY[0]
    sealed_before = bytes(SlackInstallation.objects.get(team_id="T0ROT").bot_token_sealed)

    settings.SP_STORE_KEY = [new_key(), old_key]
    call_command("rotate_secrets", stdout=open("/dev/null", "w"))
    installation = SlackInstallation.objects.get(team_id="T0ROT")
    assert installation.bot_token_key_id == vault_keys()[0].key_id
    assert bytes(installation.bot_token_sealed) != sealed_before

    settings.SP_STORE_KEY = settings.SP_STORE_KEY[:1]  # the old key retired
    assert installation_token(installation) == "xoxb-team-rotate-00009"


def test_the_admin_lists_installations_without_the_token_scoped_to_managed_workspaces(oauth, workspace):
    from calvin.chat.slack.installations import installation_save

    installation_save(workspace=workspace, team_id="T0ADMIN", bot_token="xoxb-admin-list-000010", team_name="Acme HQ")
    globex = workspace_create(name="Globex", slug="globex", owner_user=None)
    installation_save(workspace=globex, team_id="T0GLOBEX", bot_token="xoxb-admin-list-000011", team_name="Globex HQ")
    staff = get_user_model().objects.create_user("staffer", password="pw-staff-123", is_staff=True)
    Member.objects.create(workspace=globex, user=staff, role=Member.Role.ADMIN)
    root = get_user_model().objects.create_superuser("root", password="pw-root-123")

    for user, shown, hidden in ((root, ["T0ADMIN", "T0GLOBEX"], []), (staff, ["T0GLOBEX"], ["T0ADMIN"])):
        client = Client()
        client.force_login(user)
        listing = client.get("/admin/chat/slackinstallation/")
        assert listing.status_code == 200
        text = listing.content.decode()
        assert all(team in text for team in shown) and not any(team in text for team in hidden)
        assert "xoxb-" not in text and "sealed" not in text
        row = SlackInstallation.objects.get(team_id=shown[-1])
        detail = client.get(f"/admin/chat/slackinstallation/{row.id}/change/").content.decode()
        assert "Globex HQ" in detail and "xoxb-" not in detail and "bot_token" not in detail
    foreign = SlackInstallation.objects.get(team_id="T0ADMIN")
    client = Client()
    client.force_login(staff)
    assert client.get(f"/admin/chat/slackinstallation/{foreign.id}/change/").status_code in (302, 403, 404)
