"""Who gets into the admin and what the role lets them do there (the registry walk is test_admin_scope.py)."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser, Permission
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils.html import escape

from approvals.models import PendingApproval
from calvin.admin_site import NO_WORKSPACE
from calvin.audit.models import AuditEvent
from calvin.chat.models import SlackEvent, SlackPost
from calvin.workspaces.models import DailyUsage, Destination, Member, Repository, Workspace
from sessions.models import Host, Message, Reaction, Runner, RunnerCount, Session, Thread, Turn
from tests.test_admin_scope import ACME, GLOBEX, build_world, pks, url_of
from tools.models import CardChoice, Question, ToolCall

pytestmark = pytest.mark.django_db

# The brief's audit records: no add, change or delete in the admin, for anyone.
RECORDS = [ToolCall, Message, Turn, SlackEvent, SlackPost, PendingApproval, Runner, RunnerCount]
RECORDS += [Question, CardChoice, Reaction, DailyUsage, AuditEvent]
INTERNAL_NAMES = ["Periodic tasks", "Crontabs", "Access attempts", "Access logs", "Users", "Groups"]


@pytest.fixture
def world(django_user_model, vault):
    return build_world(django_user_model)


def request_as(user):
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def log_in(client, username: str, password: str):
    return client.post(reverse("admin:login"), {"username": username, "password": password, "next": "/admin/"})


def test_an_owner_who_is_not_staff_logs_in_and_sees_their_workspace(client, world):
    assert not world.acme_owner.is_staff
    response = log_in(client, "acme-owner", "pw-acme-123")
    assert response.status_code == 302 and response.url == "/admin/"
    index = client.get("/admin/").content.decode()
    assert "Repositories" in index and "Sessions" in index
    for name in INTERNAL_NAMES:
        assert f">{name}<" not in index, name


def test_a_staff_owner_with_every_django_permission_sees_no_internal_table(client, world):
    world.acme_owner.is_staff = True
    world.acme_owner.save()
    world.acme_owner.user_permissions.set(Permission.objects.all())
    client.force_login(world.acme_owner)
    index = client.get("/admin/").content.decode()
    for name in INTERNAL_NAMES:
        assert f">{name}<" not in index, name
    assert client.get(reverse("admin:django_celery_beat_periodictask_changelist")).status_code == 403
    assert client.get(reverse("admin:auth_user_changelist")).status_code == 403


@pytest.mark.parametrize("role", [Member.Role.MEMBER, None], ids=["plain-member", "no-workspace"])
def test_a_person_who_administers_no_workspace_is_told_so(client, django_user_model, world, role):
    person = django_user_model.objects.create_user("mo", password="pw-mo-12345", is_staff=True)
    if role:
        Member.objects.create(workspace=world.acme[Workspace][0], user=person, role=role)
    refused = log_in(client, "mo", "pw-mo-12345")
    assert refused.status_code == 200 and escape(NO_WORKSPACE) in refused.content.decode()
    client.force_login(person)  # logged in elsewhere (the dashboard): the admin still says why
    response = client.get("/admin/", follow=True)
    assert response.redirect_chain[-1][0].startswith(reverse("admin:login"))
    assert escape(NO_WORKSPACE) in response.content.decode()


def test_an_inactive_owner_or_superuser_or_anonymous_person_is_not_let_in(world, admin_user):
    for person in (world.acme_owner, admin_user):
        assert admin.site.has_permission(request_as(person))
        person.is_active = False
        person.save()
        assert not admin.site.has_permission(request_as(person)), person
    assert not admin.site.has_permission(request_as(AnonymousUser()))


@pytest.mark.parametrize("model", RECORDS, ids=lambda m: m.__name__)
def test_audit_records_are_read_only_for_superusers_too(admin_client, admin_user, world, model):
    model_admin = admin.site._registry[model]
    request = request_as(admin_user)
    row = world.globex[model][0]
    assert model_admin.has_view_permission(request, row)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, row)
    assert not model_admin.has_delete_permission(request, row)
    assert "delete_selected" not in model_admin.get_actions(request)
    assert admin_client.get(url_of(model, "add")).status_code == 403
    assert admin_client.post(url_of(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert model._default_manager.filter(pk=row.pk).exists()


def test_search_and_object_permissions_are_scoped_on_their_own(world):
    """Beyond get_queryset: get_search_results given every row, and has_*_permission given one."""
    request = request_as(world.acme_owner)
    repositories = admin.site._registry[Repository]
    found, _ = repositories.get_search_results(request, Repository.objects.all(), "")
    assert pks(found) == pks(world.acme[Repository])
    for model, model_admin in admin.site._registry.items():
        for row in world.globex.get(model, []):
            assert not model_admin.has_view_permission(request, row), (model.__name__, row.pk)
            assert not model_admin.has_change_permission(request, row), (model.__name__, row.pk)
            assert not model_admin.has_delete_permission(request, row), (model.__name__, row.pk)
    assert repositories.has_change_permission(request, world.acme[Repository][0])


def _form_values(form) -> dict:
    data = {}
    for name, field in form.fields.items():
        value = field.prepare_value(form[name].value())
        if value is True:
            data[form.add_prefix(name)] = "on"
        elif value not in (None, False):
            data[form.add_prefix(name)] = value
    return data


def _change_form_data(response) -> dict:
    """The change form's current values as a browser would post them, inline forms included."""
    data = _form_values(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update(_form_values(formset.management_form))
        for form in formset.initial_forms:
            data.update(_form_values(form))
    return data


def test_a_tenant_renames_their_workspace_but_not_its_egress_or_slug(client, world, admin_client):
    acme = world.acme[Workspace][0]
    client.force_login(world.acme_owner)
    url = url_of(Workspace, "change", acme.pk)
    data = _change_form_data(client.get(url))
    data.update(name="Acme Renamed", slug="stolen-slug", egress_policy="none", egress_allowlist="10.0.0.1:22")
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    acme.refresh_from_db()
    assert acme.name == "Acme Renamed" and acme.slug == ACME.lower()
    assert acme.egress_policy == Workspace.Egress.OPEN and acme.egress_allowlist == ""
    # A superuser sets the egress policy.
    data = _change_form_data(admin_client.get(url))
    data.update(egress_policy="none")
    assert admin_client.post(url, data).status_code == 302
    acme.refresh_from_db()
    assert acme.egress_policy == Workspace.Egress.NONE


def test_a_tenants_host_always_belongs_to_their_workspace(client, world):
    client.force_login(world.acme_owner)
    add = url_of(Host, "add")
    missing = client.post(add, {"name": "nowhere-host"})
    assert missing.status_code == 200 and "This field is required" in missing.content.decode()
    foreign = client.post(add, {"name": "their-host", "workspace": world.globex[Workspace][0].pk})
    assert foreign.status_code == 200 and "Select a valid choice" in foreign.content.decode()
    assert not Host.objects.filter(name__in=["nowhere-host", "their-host"]).exists()
    made = client.post(add, {"name": "our-host", "workspace": world.acme[Workspace][0].pk})
    # Made: its token is shown on a page of its own (no redirect to a notice).
    assert made.status_code == 200 and "Host our-host made" in made.content.decode()
    assert Host.objects.get(name="our-host").workspace == world.acme[Workspace][0]


def test_a_session_links_to_its_thread_page_and_records(client, world):
    session = world.acme[Session][0]
    client.force_login(world.acme_owner)
    page = client.get(url_of(Session, "change", session.pk)).content.decode()
    assert f'href="/threads/{session.thread_id}/"' in page
    for model in (Turn, ToolCall, PendingApproval, Runner):
        link = f"{url_of(model, 'changelist')}?session__id__exact={session.pk}"
        assert f'href="{link}"' in page, model.__name__
        listed = {obj.pk for obj in client.get(link).context["cl"].result_list}
        assert listed == pks(model.objects.filter(session=session)) and listed, model.__name__
    call = world.acme[ToolCall][0]
    page = client.get(url_of(ToolCall, "change", call.pk)).content.decode()
    assert url_of(PendingApproval, "change", call.approval.pk) in page and url_of(Session, "change", session.pk) in page


def test_hostile_queries_get_a_clear_answer(client, world):
    client.force_login(world.acme_owner)
    listing = url_of(Repository, "changelist")
    assert client.get(listing, {"q": "api\x00"}).status_code == 400
    assert client.get(listing, {"name": "\x00"}).status_code == 400
    assert client.get(reverse("admin:autocomplete"), {
        "app_label": "workspaces", "model_name": "repository", "field_name": "workspace", "term": "\x00",
    }).status_code == 400  # fmt: skip
    long = client.get(listing, {"q": "ａｐｉ" + "x" * 5000})  # full-width look-alikes, very long
    assert long.status_code == 200 and list(long.context["cl"].result_list) == []
    # Another workspace's id in a filter: nothing of it listed, its name nowhere.
    other = client.get(listing, {"workspace__id__exact": world.globex[Workspace][0].pk})
    assert pks(other.context["cl"].result_list) <= pks(world.acme[Repository])
    assert GLOBEX not in other.content.decode()


def test_an_action_without_the_csrf_token_is_refused(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.acme_owner)
    session = world.acme[Session][0]
    before = Session.objects.filter(pk=session.pk).values().get()
    response = client.post(
        url_of(Session, "changelist"), {"action": "stop_sessions", "_selected_action": [session.pk], "post": "yes"}
    )
    assert response.status_code == 403
    assert Session.objects.filter(pk=session.pk).values().get() == before


def test_a_tenant_changes_no_role_in_the_admin(client, world):
    """Roles change on the People page (its rules: the last owner, admins make no owners), never here:
    neither the Member form nor the workspace's inline of members takes an edit from a tenant."""
    member = next(m for m in world.acme[Member] if m.role == Member.Role.MEMBER)
    client.force_login(world.acme_owner)
    assert client.post(url_of(Member, "change", member.pk), {"role": "owner"}).status_code == 403
    url = url_of(Workspace, "change", world.acme[Workspace][0].pk)
    page = client.get(url)
    data = _change_form_data(page)
    # Each shown person's role posted as "owner", as a crafted form would (the page shows it as text).
    (people,) = page.context["inline_admin_formsets"]
    role_fields = [form.add_prefix("role") for form in people.formset.initial_forms]
    assert len(role_fields) >= 2  # the plain member's row is in the inline: the edit is really tried
    data.update({key: Member.Role.OWNER for key in role_fields})
    response = client.post(url, data)
    assert response.status_code == 302
    member.refresh_from_db()
    assert member.role == Member.Role.MEMBER
    assert client.get(url_of(Member, "add")).status_code == 403


def test_a_typed_raw_id_of_another_workspace_is_refused(client, world):
    """DestinationAdmin's agent, thread and target agent are typed ids: each checked against the
    person's own rows (the same choices a select would offer)."""
    client.force_login(world.acme_owner)
    acme_agent, globex = world.acme[Destination][0].agent, world.globex
    for field, value in (
        ("agent", globex[Destination][0].agent_id),
        ("thread", globex[Thread][0].pk),
        ("target_agent", globex[Destination][0].agent_id),
    ):
        data = {"name": "planted", "agent": acme_agent.pk, field: value}
        response = client.post(url_of(Destination, "add"), data)
        assert response.status_code == 200 and "Select a valid choice" in response.content.decode(), field
    assert not Destination.objects.filter(name="planted").exists()


def test_the_index_names_the_workspaces_shown(client, admin_client, world):
    client.force_login(world.acme_owner)
    page = client.get("/admin/").content.decode()
    assert f"Workspaces you administer: {ACME} Corp" in page and GLOBEX not in page
    assert "Every workspace" in admin_client.get("/admin/").content.decode()


def test_a_superusers_member_edit_keeps_an_owner_and_is_audited(admin_client, world):
    owner = next(m for m in world.acme[Member] if m.role == Member.Role.OWNER)
    plain = next(m for m in world.acme[Member] if m.role == Member.Role.MEMBER)
    change = url_of(Member, "change", owner.pk)
    data = {"role": "member", "slack_user_id": "", "display_name": "", "user": owner.user_id}
    refused = admin_client.post(change, data)
    assert refused.status_code == 200 and "is the last owner" in refused.content.decode()
    assert admin_client.get(url_of(Member, "delete", owner.pk)).status_code == 403
    owner.refresh_from_db()
    assert owner.role == Member.Role.OWNER
    # With a second owner, the first may step down; the change is one audit row with before/after.
    Member.objects.filter(pk=plain.pk).update(role=Member.Role.OWNER)
    assert admin_client.post(change, data).status_code == 302
    owner.refresh_from_db()
    assert owner.role == Member.Role.MEMBER
    event = AuditEvent.objects.get(verb="member.change", target_id=str(owner.pk))
    assert event.changes == {"role": ["owner", "member"]} and event.workspace_id == owner.workspace_id
    # The workspace's inline of people is only shown, to superusers too (no unaudited path).
    page = admin_client.get(url_of(Workspace, "change", owner.workspace_id))
    inlines = page.context["inline_admin_formsets"]
    assert inlines and not any(i.has_add_permission or i.has_change_permission for i in inlines)
    assert 'name="members-0-role"' not in page.content.decode()


def test_a_tenant_sees_logins_as_text_not_links_to_the_users_admin(client, admin_client, world):
    """The users' admin is superusers' only: a link to it from a Member would be a 403."""
    owner = next(m for m in world.acme[Member] if m.role == Member.Role.OWNER)
    client.force_login(world.acme_owner)
    users = reverse("admin:auth_user_changelist")
    for url in (url_of(Member, "change", owner.pk), url_of(Workspace, "change", owner.workspace_id)):
        page = client.get(url).content.decode()
        assert "acme-owner" in page and users not in page, url
    assert admin_client.get(url_of(Member, "change", owner.pk)).context["adminform"].form.fields["user"]
