"""Code channels: a Slack channel or a web space bound to one of its workspace's repositories, by
the workspace's owners and admins in the admin (audited), never to another workspace's repository,
a Slack channel in one workspace only, and every malformed channel refused with what to type."""

import html
import re

import pytest
from django.test import Client

from calvin.audit.models import AuditEvent
from calvin.workspaces import code_channel_rules
from calvin.workspaces.code_channel_selectors import code_channel_of_thread, web_spaces_of
from calvin.workspaces.code_channels import (
    CodeChannelRefused,
    code_channel_change,
    code_channel_create,
    code_channel_delete,
)
from calvin.workspaces.models import CodeChannel, Member, Repository
from calvin.workspaces.services import workspace_create
from tests.hostile import CHANNEL_BINDINGS

pytestmark = pytest.mark.django_db

ADD = "/admin/workspaces/codechannel/add/"


def _repository(workspace, name: str) -> Repository:
    return Repository.objects.create(
        workspace=workspace,
        name=name,
        full_name=f"{workspace.slug}/{name}",
        clone_url=f"https://example.com/{name}.git",
    )


@pytest.fixture
def owner(workspace):
    return Member.objects.select_related("user").get(workspace=workspace, user__username="owner")


@pytest.fixture
def web(workspace):
    return _repository(workspace, "web")


@pytest.fixture
def globex(django_user_model):
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    workspace = workspace_create(name="Globex", slug="globex", owner_user=user)
    return workspace, _repository(workspace, "secret-plans")


@pytest.fixture
def owner_client(owner):
    client = Client()
    client.force_login(owner.user)
    return client


def errors_of(response) -> str:
    """The form's error lists, as text."""
    lists = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", " ".join(lists))))


def bind(workspace, owner, repository, kind="slack", channel="C0CODE123"):
    return code_channel_create(workspace=workspace, kind=kind, channel=channel, repository=repository, actor=owner.user)


# The service


def test_a_binding_is_made_changed_and_removed_each_audited(workspace, owner, web):
    api = _repository(workspace, "api")
    binding = bind(workspace, owner, web)
    created = AuditEvent.objects.get(verb="code_channel.create")
    assert created.workspace_id == workspace.id and created.actor_label == "owner"
    assert created.changes == {
        "kind": [None, "slack"],
        "channel": [None, "C0CODE123"],
        "repository": [None, "acme/web"],
    }

    assert code_channel_change(code_channel=binding, kind="slack", channel="C0CODE123", repository=api, actor=owner)
    changed = AuditEvent.objects.get(verb="code_channel.change")
    assert changed.changes == {"repository": ["acme/web", "acme/api"]}
    # Saved again unchanged: nothing to record.
    assert not code_channel_change(code_channel=binding, kind="slack", channel="C0CODE123", repository=api, actor=owner)
    assert AuditEvent.objects.filter(verb="code_channel.change").count() == 1

    assert code_channel_delete(code_channel=binding, actor=owner.user)
    assert not CodeChannel.objects.exists()
    assert AuditEvent.objects.get(verb="code_channel.delete").changes["channel"] == ["C0CODE123", None]


def test_another_workspaces_repository_is_never_bound_by_the_service(workspace, owner, web, globex):
    _, theirs = globex
    with pytest.raises(CodeChannelRefused, match="a repository of this code channel's own workspace"):
        bind(workspace, owner, theirs)
    binding = bind(workspace, owner, web)
    with pytest.raises(CodeChannelRefused, match="a repository of this code channel's own workspace"):
        code_channel_change(code_channel=binding, kind="slack", channel="C0CODE123", repository=theirs, actor=owner)
    assert CodeChannel.objects.get().repository == web
    assert not AuditEvent.objects.filter(verb="code_channel.change").exists()


def test_the_model_says_so_too(workspace, web, globex):
    _, theirs = globex
    binding = CodeChannel(workspace=workspace, kind="web", channel="web", repository=theirs)
    with pytest.raises(Exception, match="own workspace"):
        binding.full_clean()


def test_a_slack_channel_is_bound_in_one_workspace_only(workspace, owner, web, globex):
    theirs_workspace, theirs = globex
    globex_owner = Member.objects.get(workspace=theirs_workspace, role="owner")
    bind(workspace, owner, web, channel="C0SHARED1")
    with pytest.raises(CodeChannelRefused, match="bound in one workspace only"):
        bind(theirs_workspace, globex_owner, theirs, channel="C0SHARED1")
    with pytest.raises(CodeChannelRefused, match="already a code channel of this workspace"):
        bind(workspace, owner, _repository(workspace, "api"), channel="C0SHARED1")
    # A web space's name is each workspace's own.
    bind(workspace, owner, web, kind="web", channel="web")
    bind(theirs_workspace, globex_owner, theirs, kind="web", channel="web")
    assert CodeChannel.objects.filter(kind="web", channel="web").count() == 2


def test_only_the_workspaces_owners_and_admins_bind(workspace, web, django_user_model, globex):
    user = django_user_model.objects.create_user("plain", password="pw-plain-123")
    plain = Member.objects.create(workspace=workspace, user=user, role=Member.Role.MEMBER)
    for actor in (plain, user, None, Member.objects.get(workspace=globex[0], role="owner").user):
        with pytest.raises(CodeChannelRefused, match="owners and admins"):
            code_channel_create(workspace=workspace, kind="web", channel="web", repository=web, actor=actor)
    plain.role = Member.Role.ADMIN
    plain.save()
    assert code_channel_create(workspace=workspace, kind="web", channel="web", repository=web, actor=plain)


@pytest.mark.parametrize(("kind", "channel", "words"), CHANNEL_BINDINGS, ids=repr)
def test_a_hostile_channel_is_refused_by_the_service_with_what_to_type(workspace, owner, web, kind, channel, words):
    with pytest.raises(CodeChannelRefused) as refused:
        code_channel_create(workspace=workspace, kind=kind, channel=channel, repository=web, actor=owner.user)
    assert words in str(refused.value)
    assert "\x00" not in str(refused.value) and "\n" not in str(refused.value)  # shown as repr, never raw
    assert not CodeChannel.objects.exists() and not AuditEvent.objects.filter(verb__startswith="code_channel").exists()


@pytest.mark.parametrize("channel", ["C0123ABCD", "G0123ABCD", "C1" + "2" * 30])
def test_slack_channel_ids_as_slack_shows_them_pass(channel):
    assert code_channel_rules.slack_channel_problem(channel) is None


@pytest.mark.parametrize("name", ["web", "web-app", "a", "api2", "x" * 40])
def test_plain_space_names_pass(name):
    assert code_channel_rules.space_name_problem(name) is None
    assert code_channel_rules.space_of_channel_id(code_channel_rules.space_channel_id(name)) == name


@pytest.mark.parametrize("channel_id", ["web", "space:", "space:Web", "space:../x", "space:space:web", "Space:web", ""])
def test_a_thread_channel_names_a_space_only_as_calvin_makes_it(channel_id):
    assert code_channel_rules.space_of_channel_id(channel_id) is None


# The reads


def test_a_thread_finds_only_its_own_workspaces_binding(workspace, owner, web, globex):
    theirs_workspace, theirs = globex
    bind(workspace, owner, web, channel="C0ACME0001")
    bind(workspace, owner, web, kind="web", channel="web")
    found = code_channel_of_thread(workspace_id=workspace.id, channel_kind="slack", channel_id="C0ACME0001")
    assert found.repository == web
    assert (
        code_channel_of_thread(workspace_id=workspace.id, channel_kind="web", channel_id="space:web").repository == web
    )
    # Another workspace's thread in the same places: nothing of Acme's applies.
    assert (
        code_channel_of_thread(workspace_id=theirs_workspace.id, channel_kind="slack", channel_id="C0ACME0001") is None
    )
    assert code_channel_of_thread(workspace_id=theirs_workspace.id, channel_kind="web", channel_id="space:web") is None
    # A web thread outside any space, a DM, a kind mixed up: none.
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="web", channel_id="web") is None
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="web", channel_id="C0ACME0001") is None
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="slack", channel_id="space:web") is None
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="slack", channel_id="D0ACME0001") is None


def test_a_row_naming_another_workspaces_repository_never_applies(workspace, globex):
    """Written past the service and the model (a bug, a hand-made row): the reads still ignore it."""
    _, theirs = globex
    CodeChannel.objects.create(workspace=workspace, kind="web", channel="plans", repository=theirs)
    CodeChannel.objects.create(workspace=workspace, kind="slack", channel="C0PLANS01", repository=theirs)
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="web", channel_id="space:plans") is None
    assert code_channel_of_thread(workspace_id=workspace.id, channel_kind="slack", channel_id="C0PLANS01") is None
    assert web_spaces_of(workspace_id=workspace.id) == []


# The admin


def test_an_owner_binds_in_the_admin_and_it_is_audited(owner_client, workspace, web):
    response = owner_client.post(
        ADD, {"workspace": workspace.id, "kind": "slack", "channel": "C0CODE123", "repository": web.id}
    )
    assert response.status_code == 302, errors_of(response)
    binding = CodeChannel.objects.get()
    assert (binding.workspace, binding.channel, binding.repository) == (workspace, "C0CODE123", web)
    assert AuditEvent.objects.get(verb="code_channel.create").actor_label == "owner"

    api = _repository(workspace, "api")
    change = f"/admin/workspaces/codechannel/{binding.id}/change/"
    response = owner_client.post(change, {"kind": "slack", "channel": "C0CODE123", "repository": api.id})
    assert response.status_code == 302, errors_of(response)
    assert AuditEvent.objects.get(verb="code_channel.change").changes == {"repository": ["acme/web", "acme/api"]}

    response = owner_client.post(f"/admin/workspaces/codechannel/{binding.id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not CodeChannel.objects.exists() and AuditEvent.objects.filter(verb="code_channel.delete").exists()


def test_the_admin_offers_and_takes_no_other_workspaces_repository(owner_client, workspace, web, globex):
    theirs_workspace, theirs = globex
    page = owner_client.get(ADD).content.decode()
    assert "acme/web" in page and "secret-plans" not in page and "Globex" not in page
    for data in (
        {"workspace": workspace.id, "kind": "slack", "channel": "C0CODE123", "repository": theirs.id},
        {"workspace": theirs_workspace.id, "kind": "slack", "channel": "C0CODE123", "repository": theirs.id},
    ):
        response = owner_client.post(ADD, data)
        assert response.status_code == 200 and "Select a valid choice" in errors_of(response)
    assert not CodeChannel.objects.exists()


def test_a_superuser_who_sees_every_repository_still_binds_only_the_workspaces_own(
    workspace, owner, web, globex, django_user_model
):
    root = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(root)
    _, theirs = globex
    response = client.post(ADD, {"workspace": workspace.id, "kind": "web", "channel": "web", "repository": theirs.id})
    assert response.status_code == 200
    assert "a repository of this code channel's own workspace" in errors_of(response)
    assert not CodeChannel.objects.exists()
    # Changing a binding offers only its own workspace's repositories.
    binding = bind(workspace, owner, web, kind="web", channel="web")
    form = client.get(f"/admin/workspaces/codechannel/{binding.id}/change/").context["adminform"].form
    assert set(form.fields["repository"].queryset) == {web}


@pytest.mark.parametrize(("kind", "channel", "words"), CHANNEL_BINDINGS, ids=repr)
def test_a_hostile_channel_is_refused_by_the_admin_form(owner_client, workspace, web, kind, channel, words):
    response = owner_client.post(
        ADD, {"workspace": workspace.id, "kind": kind, "channel": channel, "repository": web.id}
    )
    assert response.status_code == 200
    shown = errors_of(response)
    assert shown, response.content[:2000]
    if "\x00" in channel:
        assert "Null characters are not allowed" in shown  # Django's own field check comes first
    elif kind in ("slack", "web") and len(channel) <= code_channel_rules.MAX_CHANNEL:
        assert words in shown
    assert not CodeChannel.objects.exists()


def test_a_member_without_a_role_meets_no_code_channels_in_the_admin(workspace, web, owner, django_user_model):
    bind(workspace, owner, web)
    user = django_user_model.objects.create_user("plain", password="pw-plain-123")
    Member.objects.create(workspace=workspace, user=user, role=Member.Role.MEMBER)
    client = Client()
    client.force_login(user)
    assert client.get("/admin/workspaces/codechannel/").status_code in (302, 403)
    response = client.post(ADD, {"workspace": workspace.id, "kind": "web", "channel": "web", "repository": web.id})
    assert response.status_code in (302, 403)
    assert CodeChannel.objects.count() == 1
