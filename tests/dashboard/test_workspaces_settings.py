"""A workspace's settings page: owners and admins rename it (never its slug), members read it;
Slack: "Add to Slack" into this workspace, the team it is tied to, Uninstall with a confirmation,
and exactly which settings to set when Slack is not configured. Each with a second workspace."""

import html
import re

import pytest
from django.test import Client

from calvin.audit.models import AuditEvent
from calvin.chat.models import SlackInstallation, SlackOAuthState
from calvin.chat.slack.installations import installation_save
from calvin.workspaces.models import Member, Workspace
from sessions.models import Message, Thread
from sessions.services import session_start

pytestmark = pytest.mark.django_db

CLIENT_ID = "1111.2222"


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


@pytest.fixture
def member_client(plain_member):
    client = Client()
    client.force_login(plain_member.user)
    return client


@pytest.fixture
def oauth_configured(settings, vault):
    settings.SLACK_CLIENT_ID = CLIENT_ID
    settings.SLACK_CLIENT_SECRET = "client-secret-standin-0123"
    settings.SLACK_SIGNING_SECRET = "signing-secret-standin-0123"
    settings.SLACK_BOT_TOKEN = ""


@pytest.fixture
def slack_unconfigured(settings):
    settings.SLACK_CLIENT_ID = settings.SLACK_CLIENT_SECRET = settings.SLACK_SIGNING_SECRET = ""
    settings.SLACK_BOT_TOKEN = ""


def install(workspace, team_id: str, team_name: str, **fields) -> SlackInstallation:
    return installation_save(
        workspace=workspace, team_id=team_id, bot_token=f"xoxb-{team_id}-standin-0001", team_name=team_name, **fields
    )


# -- the name


def test_an_owner_renames_the_workspace_and_one_audit_row_says_from_what(owner_client, owner_member, workspace):
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert 'name="name" value="Acme"' in page and "<code>acme</code>" in page
    response = owner_client.post("/w/acme/settings/", {"name": " Acme Platform ", "slug": "taken-over"})
    assert response.status_code == 302 and response["Location"] == "/w/acme/settings/"
    workspace.refresh_from_db()
    assert (workspace.name, workspace.slug) == ("Acme Platform", "acme")  # the slug never changes
    event = AuditEvent.objects.get(verb="workspace.rename")
    assert event.changes == {"name": ["Acme", "Acme Platform"]} and event.actor_user_id == owner_member.user_id
    assert event.workspace_id == workspace.id
    owner_client.post("/w/acme/settings/", {"name": "Acme Platform"})  # unchanged: nothing recorded
    assert AuditEvent.objects.filter(verb="workspace.rename").count() == 1


def test_an_admin_renames_too(client, plain_member, workspace):
    plain_member.role = Member.Role.ADMIN
    plain_member.save()
    client.force_login(plain_member.user)
    assert client.post("/w/acme/settings/", {"name": "Acme by its admin"}).status_code == 302
    workspace.refresh_from_db()
    assert workspace.name == "Acme by its admin"


@pytest.mark.parametrize(
    ("name", "says"), [("", "This field is required."), ("Ac\u202eme", "RIGHT-TO-LEFT OVERRIDE"), ("N" * 300, "200")]
)
def test_a_bad_name_is_refused_with_the_reason(owner_client, workspace, name, says):
    response = owner_client.post("/w/acme/settings/", {"name": name})
    assert response.status_code == 400 and says in response.content.decode()
    workspace.refresh_from_db()
    assert workspace.name == "Acme" and not AuditEvent.objects.filter(verb="workspace.rename").exists()


def test_a_member_reads_the_settings_and_a_post_of_theirs_is_403(member_client, workspace, oauth_configured):
    page = member_client.get("/w/acme/settings/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Only the workspace&#x27;s owners and admins change its settings. You see them read-only." in text
    assert 'name="name"' not in text and 'id="add-to-slack"' not in text and "<strong>Name</strong> Acme" in text
    response = member_client.post("/w/acme/settings/", {"name": "Renamed by a member"})
    assert response.status_code == 403
    assert response.content.decode() == "Only the workspace's owners and admins change its settings."
    workspace.refresh_from_db()
    assert workspace.name == "Acme"


def test_a_role_lowered_after_the_page_loaded_renames_nothing(owner_member, workspace):
    from calvin.workspaces.services import WorkspaceRefused, workspace_rename

    Member.objects.filter(pk=owner_member.pk).update(role=Member.Role.MEMBER)  # owner_member still says owner
    with pytest.raises(WorkspaceRefused, match="only the workspace's owners and admins"):
        workspace_rename(member=owner_member, name="Too late")
    workspace.refresh_from_db()
    assert workspace.name == "Acme"


def test_renaming_needs_the_csrf_token(owner_member, workspace):
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(owner_member.user)
    assert forged.post("/w/acme/settings/", {"name": "Forged"}).status_code == 403
    workspace.refresh_from_db()
    assert workspace.name == "Acme"


# -- who approves an agent's changes to itself


APPROVALS = "/w/acme/settings/approvals/"


def deciders_of(workspace) -> str:
    return Workspace.objects.values_list("self_modification_deciders", flat=True).get(id=workspace.id)


def test_an_owner_chooses_who_approves_an_agents_changes_to_itself_and_it_is_audited(
    owner_client, owner_member, workspace, other_workspace
):
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert 'value="admins" id="id_self_modification_deciders_0" required checked' in page
    assert f'action="{APPROVALS}"' in page
    response = owner_client.post(APPROVALS, {"self_modification_deciders": "admins-and-owner"})
    assert response.status_code == 302 and response["Location"] == "/w/acme/settings/"
    assert deciders_of(workspace) == "admins-and-owner"
    assert deciders_of(other_workspace) == "admins"  # another workspace's setting stays
    event = AuditEvent.objects.get(verb="workspace.change")
    assert event.changes == {"self_modification_deciders": ["admins", "admins-and-owner"]}
    assert (event.actor_user_id, event.workspace_id, event.target_id) == (
        owner_member.user_id,
        workspace.id,
        str(workspace.id),
    )
    owner_client.post(APPROVALS, {"self_modification_deciders": "admins-and-owner"})  # unchanged: nothing recorded
    assert AuditEvent.objects.filter(verb="workspace.change").count() == 1
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert 'value="admins-and-owner" id="id_self_modification_deciders_1" required checked' in page


def test_a_choice_that_is_not_one_is_refused(owner_client, workspace):
    response = owner_client.post(APPROVALS, {"self_modification_deciders": "anyone"})
    assert response.status_code == 400 and "Select a valid choice." in response.content.decode()
    assert deciders_of(workspace) == "admins" and not AuditEvent.objects.filter(verb="workspace.change").exists()


def test_a_member_reads_who_approves_and_may_not_change_it(member_client, workspace):
    page = member_client.get("/w/acme/settings/").content.decode()
    assert "The workspace&#x27;s owners and admins" in page and f'action="{APPROVALS}"' not in page
    response = member_client.post(APPROVALS, {"self_modification_deciders": "admins-and-owner"})
    assert response.status_code == 403
    assert deciders_of(workspace) == "admins" and not AuditEvent.objects.filter(verb="workspace.change").exists()


def test_a_role_lowered_after_the_page_loaded_changes_nothing(owner_member, workspace):
    from calvin.workspaces.services import WorkspaceRefused, workspace_self_modification_deciders_set

    Member.objects.filter(pk=owner_member.pk).update(role=Member.Role.MEMBER)
    with pytest.raises(WorkspaceRefused, match="only the workspace's owners and admins"):
        workspace_self_modification_deciders_set(member=owner_member, deciders="admins-and-owner")
    assert deciders_of(workspace) == "admins"


def admin_change_data(page) -> dict:
    """What the admin's change form posts back unchanged: its fields and its inlines' forms."""
    data = {}

    def add(form):
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value

    add(page.context["adminform"].form)
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        data.update({management.add_prefix(name): value for name, value in management.initial.items()})
        for form in formset.forms:
            add(form)
    return data


def test_the_admins_workspace_form_sets_who_approves_and_is_audited(owner_client, owner_member, workspace):
    url = f"/admin/workspaces/workspace/{workspace.id}/change/"
    page = owner_client.get(url)
    assert page.status_code == 200
    data = admin_change_data(page)
    assert data["self_modification_deciders"] == "admins"
    response = owner_client.post(url, {**data, "self_modification_deciders": "admins-and-owner"})
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert deciders_of(workspace) == "admins-and-owner"
    event = AuditEvent.objects.get(verb="workspace.change")
    assert event.changes == {"self_modification_deciders": ["admins", "admins-and-owner"]}
    assert (event.actor_user_id, event.workspace_id) == (owner_member.user_id, workspace.id)
    owner_client.post(url, {**data, "self_modification_deciders": "admins-and-owner"})  # unchanged
    assert AuditEvent.objects.filter(verb="workspace.change").count() == 1


# -- Slack


def shown_text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split()).replace(" ,", ",")


@pytest.mark.parametrize(
    ("signing_secret", "names"),
    [
        ("", "SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and SLACK_SIGNING_SECRET"),
        ("set", "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"),
    ],
)
def test_without_slack_configured_the_page_names_the_settings_to_set(
    owner_client, workspace, slack_unconfigured, settings, signing_secret, names
):
    settings.SLACK_SIGNING_SECRET = signing_secret
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert (
        f'Slack is not configured on this gateway. To offer "Add to Slack", its operator sets {names} (from the'
        " Slack app's Basic Information page) in the gateway's environment and restarts it."
    ) in shown_text(page)
    assert 'id="add-to-slack"' not in page


def test_a_missing_signing_secret_is_named_even_with_oauth(owner_client, workspace, oauth_configured, settings):
    settings.SLACK_SIGNING_SECRET = ""
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert "Still missing: SLACK_SIGNING_SECRET — Slack's requests are refused until it is set." in shown_text(page)


def test_with_slack_configured_add_to_slack_installs_into_this_workspace(
    owner_member, other_workspace, oauth_configured, client
):
    # Acme's owner also owns Globex: the link of each page names its own workspace.
    Member.objects.create(workspace=other_workspace, user=owner_member.user, role=Member.Role.OWNER)
    client.force_login(owner_member.user)
    for slug in ("acme", "globex"):
        page = client.get(f"/w/{slug}/settings/").content.decode()
        assert f'id="add-to-slack" href="/slack/install?workspace={slug}"' in page
        assert "Not connected to Slack." in page
    install_page = client.get("/slack/install?workspace=globex")
    assert install_page.status_code == 200
    assert SlackOAuthState.objects.get().workspace_id == other_workspace.id  # carried through the OAuth state


def test_a_plain_member_cannot_start_an_install_into_their_workspace(member_client, oauth_configured):
    response = member_client.get("/slack/install?workspace=acme")
    assert response.status_code == 403 and not SlackOAuthState.objects.exists()


def test_the_page_shows_the_team_this_workspace_is_tied_to_and_no_other(
    owner_client, owner_member, member_client, workspace, other_workspace, oauth_configured
):
    install(workspace, "T0ACME", "Acme Slack", installed_by=owner_member.user)
    install(other_workspace, "T0GLOBEX", "Globex Slack")
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert (
        "Connected to the Slack team <strong>Acme Slack</strong>\n    (<code>T0ACME</code>), installed by owner" in page
    )
    assert 'id="slack-uninstall" href="/w/acme/settings/slack/uninstall/"' in page and 'id="add-to-slack"' not in page
    assert "T0GLOBEX" not in page and "Globex Slack" not in page
    member_page = member_client.get("/w/acme/settings/").content.decode()
    assert "Acme Slack" in member_page and 'id="slack-uninstall"' not in member_page


def test_uninstall_asks_first_then_forgets_this_workspaces_team_only(
    owner_client, owner_member, workspace, other_workspace, oauth_configured
):
    install(workspace, "T0ACME", "Acme Slack")
    install(other_workspace, "T0GLOBEX", "Globex Slack")
    slack_session = session_start(
        workspace=workspace, owner=owner_member, channel_kind=Thread.ChannelKind.SLACK, channel_id="C1", prompt="hi"
    )
    confirm = owner_client.get("/w/acme/settings/slack/uninstall/").content.decode()
    assert "Uninstall Calvin from Slack?" in confirm and 'name="team_id" value="T0ACME"' in confirm
    assert SlackInstallation.objects.count() == 2  # asking changed nothing

    response = owner_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ACME"})
    assert response.status_code == 302 and response["Location"] == "/w/acme/settings/"
    assert list(SlackInstallation.objects.values_list("team_id", flat=True)) == ["T0GLOBEX"]
    assert Workspace.objects.get(id=workspace.id).slack_team_id == ""
    assert Workspace.objects.get(id=other_workspace.id).slack_team_id == "T0GLOBEX"
    notice = "Calvin was uninstalled from this Slack workspace: this session was stopped."
    assert Message.objects.filter(thread_id=slack_session.thread_id, text=notice).exists()
    event = AuditEvent.objects.get(verb="slack.uninstall")
    assert (event.workspace_id, event.actor_user_id) == (workspace.id, owner_member.user_id)
    assert event.changes == {"slack_team_id": ["T0ACME", ""]}
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert "Calvin is no longer connected to the Slack team Acme Slack." in page and 'id="add-to-slack"' in page


def test_a_second_uninstall_or_another_teams_id_changes_nothing(owner_client, workspace, other_workspace, vault):
    install(workspace, "T0ACME", "Acme Slack")
    install(other_workspace, "T0GLOBEX", "Globex Slack")
    response = owner_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0GLOBEX"}, follow=True)
    assert "this workspace is not connected to that Slack team (any more): nothing changed" in response.content.decode()
    assert SlackInstallation.objects.count() == 2
    owner_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ACME"})
    owner_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ACME"})  # a second click
    assert list(SlackInstallation.objects.values_list("team_id", flat=True)) == ["T0GLOBEX"]
    assert AuditEvent.objects.filter(verb="slack.uninstall").count() == 1


def test_a_member_may_not_uninstall(member_client, workspace, vault):
    install(workspace, "T0ACME", "Acme Slack")
    for response in (
        member_client.get("/w/acme/settings/slack/uninstall/"),
        member_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ACME"}),
    ):
        assert response.status_code == 403
        assert response.content.decode() == "Only the workspace's owners and admins change its settings."
    assert SlackInstallation.objects.filter(team_id="T0ACME").exists()
    assert not AuditEvent.objects.filter(verb="slack.uninstall").exists()


def test_a_connection_from_slack_bot_token_is_not_uninstalled_here(owner_client, workspace, vault):
    install(workspace, "T0ENV", "From the environment", from_environment=True)
    page = owner_client.get("/w/acme/settings/").content.decode()
    assert "comes from the gateway's SLACK_BOT_TOKEN" in page and 'id="slack-uninstall"' not in page
    response = owner_client.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ENV"}, follow=True)
    assert "remove SLACK_BOT_TOKEN from the gateway" in response.content.decode()
    assert SlackInstallation.objects.filter(team_id="T0ENV").exists()


def test_uninstalling_needs_the_csrf_token(owner_member, workspace, vault):
    install(workspace, "T0ACME", "Acme Slack")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(owner_member.user)
    assert forged.post("/w/acme/settings/slack/uninstall/", {"team_id": "T0ACME"}).status_code == 403
    assert SlackInstallation.objects.filter(team_id="T0ACME").exists()
