"""The generated test of the admin's scoping: it walks admin.site._registry with two workspaces.

Each workspace gets at least one row of EVERY model registered in the admin (one small factory
per model; a model without one fails with "add a factory for <model>"). An owner of Acme (not
staff, not superuser) then meets, for every registered model: the change list (by pk), each
filter and the date hierarchy (no Globex name on the page), search, Globex's change, delete and
history pages, every FK/M2M choice of its forms and its inlines' forms, each action POSTed with
Globex's pks, and the autocomplete of every field that points at it. A superuser sees both.
A ModelAdmin registered without the mixin is caught: the last test proves it.
"""

import hashlib
import secrets
import sys
import types
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.test import RequestFactory
from django.urls import clear_url_caches, include, path, reverse
from django.utils import timezone

from approvals.models import ApprovalRule, PendingApproval
from calvin.accounts.models import Invitation
from calvin.api.models import ApiToken
from calvin.audit.models import AuditEvent
from calvin.chat.models import SlackEvent, SlackInstallation, SlackLane, SlackPost
from calvin.previews.models import Preview
from calvin.schedules.models import ScheduledTask, TaskRun
from calvin.workspaces.models import (
    Agent,
    CodeChannel,
    DailyUsage,
    Destination,
    Member,
    Quota,
    Repository,
    SpendNotice,
    StorageUsage,
    Workspace,
)
from calvin.workspaces.services import workspace_create
from secrets_vault.models import Secret, SecretRequest, VaultCanary
from secrets_vault.services import secret_put
from sessions.models import Host, Message, Reaction, Runner, RunnerCount, Session, Thread, Turn
from tools.models import CardChoice, InboxDelivery, InboxFile, Question, ToolCall

pytestmark = pytest.mark.django_db

ACME, GLOBEX = "Acmezq", "Globexzq"  # markers: no page an Acme owner sees may hold "Globexzq"
# Free-text values (tool names, emoji, kinds) hold the markers too: a filter listing every tenant's
# values (AllValuesFieldListFilter over the whole table) would name Globex's.


def _digest() -> str:
    return hashlib.sha256(secrets.token_bytes(16)).hexdigest()


# One factory per model registered in the admin, in the order they depend on each other. Each
# takes the workspace, its marker and the rows made so far for it, and returns the row it made.
def _thread(ws, tag, made):
    return Thread.objects.create(
        workspace=ws, channel_id=f"{tag}-channel", thread_ts="1", title=f"{tag} thread", started_by=made[Member]
    )


def _session(ws, tag, made):
    return Session.objects.create(
        workspace=ws,
        agent=made[Agent],
        thread=made[Thread],
        owner=made[Member],
        host=made[Host],
        directory=f"/srv/{tag}",
        branch=f"{tag}-branch",
    )


def _runner(ws, tag, made):
    return Runner.objects.create(
        session=made[Session], host=made[Host], generation=1, token_digest=_digest(), token_hint=tag[:8]
    )


def _tool_call(ws, tag, made):
    return ToolCall.objects.create(
        session=made[Session], runner=made[Runner], tool=f"{tag}-install", error=f"{tag} error"
    )


def _question(ws, tag, made):
    return Question.objects.create(
        tool_call=made[ToolCall],
        title=f"{tag} question",
        text=f"{tag} which?",
        options=["yes", "no"],
        expires_at=timezone.now() + timedelta(hours=1),
        answered_by=made[Member],
    )


def _approval(ws, tag, made):
    return PendingApproval.objects.create(
        session=made[Session],
        tool_call=made[ToolCall],
        kind=f"{tag}-install",
        summary=f"{tag} approval",
        expires_at=timezone.now() + timedelta(hours=1),
    )


def _secret_request(ws, tag, made):
    call = ToolCall.objects.create(session=made[Session], runner=made[Runner], tool="request_secret")
    return SecretRequest.objects.create(
        session=made[Session], tool_call=call, name=f"{tag.upper()}_ASKED", reason=f"{tag} reason"
    )


TENANT_FACTORIES = {
    Workspace: lambda ws, tag, made: ws,
    Member: lambda ws, tag, made: Member.objects.create(workspace=ws, role="member", display_name=f"{tag} person"),
    Quota: lambda ws, tag, made: Quota.objects.get(workspace=ws),
    DailyUsage: lambda ws, tag, made: DailyUsage.objects.create(workspace=ws, day=timezone.now().date(), turns=1),
    SpendNotice: lambda ws, tag, made: SpendNotice.objects.create(
        workspace=ws, month=timezone.now().date().replace(day=1), threshold=80, cap_usd=10, spent_usd=8
    ),
    StorageUsage: lambda ws, tag, made: StorageUsage.objects.update_or_create(workspace=ws, defaults={"bytes": 5})[0],
    Repository: lambda ws, tag, made: Repository.objects.create(
        workspace=ws, name=f"{tag}-api", full_name=f"{tag}/api", clone_url=f"https://example.com/{tag}/api.git"
    ),
    # A space's name is lowercase: its repository (a column) carries the marker.
    CodeChannel: lambda ws, tag, made: CodeChannel.objects.create(
        workspace=ws, kind="web", channel=f"{tag.lower()}-space", repository=made[Repository]
    ),
    Agent: lambda ws, tag, made: Agent.objects.create(workspace=ws, name=f"{tag}-agent"),
    ApiToken: lambda ws, tag, made: ApiToken.objects.create(
        member=made[Member], name=f"{tag} token", digest=_digest(), hint=tag[:8]
    ),
    Host: lambda ws, tag, made: Host.objects.create(
        name=f"{tag}-host", workspace=ws, token_digest=_digest(), token_hint=tag[:8]
    ),
    Thread: _thread,
    Destination: lambda ws, tag, made: Destination.objects.create(
        agent=made[Agent], name=f"{tag}-destination", thread=made[Thread]
    ),
    Session: _session,
    # A DNS label has no capitals: its thread's title (a column) carries the marker.
    Preview: lambda ws, tag, made: Preview.objects.create(
        workspace=ws, session=made[Session], name=f"{tag.lower()}-app", port=5173, created_by=f"{tag} agent"
    ),
    Runner: _runner,
    RunnerCount: lambda ws, tag, made: RunnerCount.objects.create(runner=made[Runner], tool=f"{tag}-card", used=1),
    Message: lambda ws, tag, made: Message.objects.create(
        thread=made[Thread], author="person", member=made[Member], text=f"{tag} hello"
    ),
    Turn: lambda ws, tag, made: Turn.objects.create(
        session=made[Session], prompt=made[Message], runner=made[Runner], host=made[Host]
    ),
    Reaction: lambda ws, tag, made: Reaction.objects.create(
        message=made[Message], emoji=f"{tag}_up", member=made[Member]
    ),
    CardChoice: lambda ws, tag, made: CardChoice.objects.create(
        message=made[Message], member=made[Member], action_index=0
    ),
    ToolCall: _tool_call,
    InboxFile: lambda ws, tag, made: InboxFile.objects.create(
        workspace=ws, agent=made[Agent], sender=f"{tag}-sender", name=f"{tag}.txt", size=1, file=f"inbox/{tag}.txt"
    ),
    InboxDelivery: lambda ws, tag, made: InboxDelivery.objects.create(file=made[InboxFile], host=made[Host]),
    Question: _question,
    PendingApproval: _approval,
    # Listed on the admin's rules and, as an inline, on its agent's page (revocable there).
    ApprovalRule: lambda ws, tag, made: ApprovalRule.objects.create(
        workspace=ws,
        scope="session",
        session=made[Session],
        agent=made[Agent],
        tool_name=f"{tag}-tool",
        created_by=made[Member],
        made_from=made[PendingApproval],
    ),
    Secret: lambda ws, tag, made: secret_put(workspace_id=ws.id, name=f"{tag.upper()}_TOKEN", value=f"{tag}-value-1"),
    SecretRequest: _secret_request,
    SlackInstallation: lambda ws, tag, made: SlackInstallation.objects.create(
        workspace=ws, team_id=f"T{tag}", team_name=f"{tag} team", bot_token_key_id="k", bot_token_sealed=b"sealed"
    ),
    Invitation: lambda ws, tag, made: Invitation.objects.create(
        workspace=ws,
        email=f"{tag.lower()}-invitee@example.com",
        role="member",
        invited_by=made[Member],
        token_digest=_digest(),
        expires_at=timezone.now() + timedelta(days=7),
    ),
    AuditEvent: lambda ws, tag, made: AuditEvent.objects.create(
        workspace=ws, verb="test.row", actor_label=f"{tag} actor", target_label=f"{tag} target"
    ),
    # A task's name is lowercase: its prompt and its agent's name carry the marker too.
    ScheduledTask: lambda ws, tag, made: ScheduledTask.objects.create(
        workspace=ws,
        agent=made[Agent],
        name=f"{tag.lower()}-task",
        prompt=f"{tag} prompt",
        recurrence="0 * * * *",
        time_zone="UTC",
        next_run_at=timezone.now() + timedelta(hours=1),
        created_by=made[Member],
    ),  # fmt: skip
    TaskRun: lambda ws, tag, made: TaskRun.objects.create(
        task=made[ScheduledTask], scheduled_for=timezone.now(), turn=made[Turn], error=f"{tag} error"
    ),
}


def _internal_rows() -> dict:
    """Rows of the tables no tenant may see (superusers only), one or more of each."""
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    interval = IntervalSchedule.objects.create(every=10, period="seconds")
    lane = SlackLane.objects.create(team_id=f"T{GLOBEX}", channel_id="C1")
    seen = {"user_agent": f"{GLOBEX} agent", "ip_address": "127.0.0.9", "username": f"{GLOBEX}-login"}
    rows = {
        Group: Group.objects.create(name=f"{GLOBEX} operators"),
        IntervalSchedule: interval,
        PeriodicTask: PeriodicTask.objects.create(name=f"{GLOBEX} task", task="calvin.nothing", interval=interval),
        CrontabSchedule: CrontabSchedule.objects.create(minute="7"),
        SolarSchedule: SolarSchedule.objects.create(event="sunrise", latitude=1, longitude=1),
        ClockedSchedule: ClockedSchedule.objects.create(clocked_time=timezone.now()),
        AccessAttempt: AccessAttempt.objects.create(**seen, get_data="", post_data="", failures_since_start=1),
        AccessLog: AccessLog.objects.create(**seen),
        AccessFailureLog: AccessFailureLog.objects.create(**seen),
        SlackEvent: SlackEvent.objects.create(
            event_id=f"Ev{GLOBEX}", team_id=f"T{GLOBEX}", event_type="message", payload={}, note=f"{GLOBEX} note"
        ),
        SlackPost: SlackPost.objects.create(lane=lane, kind="message", error=f"{GLOBEX} error"),
        VaultCanary: VaultCanary.objects.create(key_id=f"{GLOBEX}key"[:16], ciphertext=b"sealed"),
    }
    return {model: [row] for model, row in rows.items()}


def tenant_rows(owner, tag: str) -> dict:
    """A workspace owned by `owner` with one row (at least) of every tenant model."""
    workspace = workspace_create(name=f"{tag} Corp", slug=tag.lower(), owner_user=owner)
    made = {}
    for model, factory in TENANT_FACTORIES.items():
        made[model] = factory(workspace, tag, made)
    rows = {model: [row] for model, row in made.items()}
    rows[Member].append(Member.objects.get(workspace=workspace, user=owner))
    return rows


@pytest.fixture
def world(django_user_model, vault):
    return build_world(django_user_model)


def build_world(django_user_model):
    """Acme's rows, and everything an Acme owner must not see: Globex's rows and the internal tables
    (the vault fixture gives the secrets a key)."""
    acme_owner = django_user_model.objects.create_user("acme-owner", password="pw-acme-123")
    globex_owner = django_user_model.objects.create_user(f"{GLOBEX}-owner", password="pw-globex-123")
    acme, globex = tenant_rows(acme_owner, ACME), tenant_rows(globex_owner, GLOBEX)
    # Acme's owner is also a plain member of Globex: a member's role opens nothing in the admin.
    globex[Member].append(Member.objects.create(workspace=globex[Workspace][0], user=acme_owner, role="member"))
    globex.update(_internal_rows())
    globex[User] = [globex_owner]
    acme[User] = []  # users are superusers' only: even Acme's owner is not listed to a tenant
    # Not listed (superusers' only), so neither workspace's: a host serving every workspace.
    globex[Host].append(Host.objects.create(name="shared-host", token_digest=_digest(), token_hint="shared"))
    return types.SimpleNamespace(acme=acme, globex=globex, acme_owner=acme_owner, globex_owner=globex_owner)


def pks(rows) -> set:
    return {row.pk for row in rows}


def url_of(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def snapshot(rows: dict) -> dict:
    """Every field of every row given, to compare before and after an action."""
    return {
        model._meta.label: list(model._default_manager.filter(pk__in=pks(objs)).order_by("pk").values())
        for model, objs in rows.items()
    }


def _form_choice_problems(form, label: str, hidden: dict) -> list[str]:
    problems = []
    for name, field in form.fields.items():
        queryset = getattr(field, "queryset", None)
        if queryset is None:
            continue
        leaked = set(queryset.values_list("pk", flat=True)) & pks(hidden.get(queryset.model, []))
        if leaked:
            problems.append(f"{label}: field {name} offers {queryset.model.__name__} {sorted(leaked)}")
    return problems


def form_field_problems(model_admin, request, obj, hidden: dict) -> list[str]:
    """Every FK/M2M choice of the admin's form and its inlines' forms, for adding and for obj."""
    problems = []
    chances = [(obj, True)] + ([(None, False)] if model_admin.has_add_permission(request) else [])
    for instance, change in chances:
        label = f"{model_admin.model.__name__} {'change' if change else 'add'} form"
        form_class = model_admin.get_form(request, instance, change=change)
        problems += _form_choice_problems(form_class(instance=instance), label, hidden)
        for formset_class, inline in model_admin.get_formsets_with_inlines(request, instance):
            formset = formset_class(instance=instance or model_admin.model(), queryset=inline.get_queryset(request))
            for form in [*formset.forms, formset.empty_form]:
                problems += _form_choice_problems(form, f"{label}, inline {type(inline).__name__}", hidden)
    return problems


def autocomplete_problems(client, model, hidden: dict) -> list[str]:
    """The autocomplete of every field (of any registered model) that points at this model."""
    problems = []
    for source in admin.site._registry:
        for field in source._meta.get_fields():
            if not (field.is_relation and field.concrete and field.related_model is model):
                continue
            for term in ("", GLOBEX):
                query = {
                    "app_label": source._meta.app_label,
                    "model_name": source._meta.model_name,
                    "field_name": field.name,
                    "term": term,
                }
                response = client.get(reverse("admin:autocomplete"), query)
                if response.status_code != 200:
                    continue  # 403 (not theirs to see) or 404 (no search fields): nothing shown
                shown = {str(result["id"]) for result in response.json()["results"]}
                leaked = shown & {str(pk) for pk in pks(hidden.get(model, []))}
                if leaked:
                    problems.append(f"autocomplete {source.__name__}.{field.name}: {model.__name__} {sorted(leaked)}")
    return problems


def scope_problems(client, person, model, model_admin, own: dict, hidden: dict) -> list[str]:
    """What of `hidden` a person logged in with `client` can see or touch through this ModelAdmin."""
    name = model.__name__
    problems = []
    hidden_pks = pks(hidden.get(model, []))
    listing = client.get(url_of(model, "changelist"))
    if listing.status_code == 403:
        visible = False
    elif listing.status_code != 200:
        return [f"{name}: change list answered {listing.status_code}"]
    else:
        visible = True
        changelist = listing.context["cl"]
        listed = {obj.pk for obj in changelist.result_list}
        if listed & hidden_pks:
            problems.append(f"{name}: change list shows another tenant's rows {sorted(listed & hidden_pks)}")
        if own.get(model) and not pks(own[model]) <= listed:
            problems.append(f"{name}: change list misses the person's own rows (is the test still testing?)")
        if GLOBEX in listing.content.decode():
            problems.append(f"{name}: the change list page (filters, columns) names {GLOBEX}")
        for spec in changelist.filter_specs:
            for choice in spec.choices(changelist):
                if GLOBEX in str(choice.get("display", "")):
                    problems.append(f"{name}: filter {spec.title} lists {choice['display']}")
        if model_admin.get_search_fields(None):
            found = client.get(url_of(model, "changelist"), {"q": GLOBEX})
            found_pks = {obj.pk for obj in found.context["cl"].result_list} if found.status_code == 200 else set()
            if found_pks & hidden_pks:
                problems.append(f"{name}: search for {GLOBEX} finds {sorted(found_pks & hidden_pks)}")
    for row in hidden.get(model, []):
        for view in ("change", "delete", "history"):
            page = client.get(url_of(model, view, row.pk), follow=True)
            text = page.content.decode()
            refused = page.status_code in (403, 404) or (bool(page.redirect_chain) and "doesn’t exist" in text)
            if not refused or GLOBEX in text:
                problems.append(f"{name}: {view} page of another tenant's row {row.pk} answered {page.status_code}")
    before = snapshot(hidden)
    if visible and hidden_pks:
        request = RequestFactory().get("/admin/")
        request.user = person
        for action in model_admin.get_actions(request):
            selected = {"action": action, "_selected_action": sorted(hidden_pks), "index": 0}
            # "post" confirms Django's delete_selected, "confirmed" the operator actions' pages.
            response = client.post(url_of(model, "changelist"), {**selected, "post": "yes", "confirmed": "yes"})
            if response.status_code >= 500:
                problems.append(f"{name}: action {action} answered {response.status_code}")
            if snapshot(hidden) != before:
                problems.append(f"{name}: action {action} changed another tenant's rows")
                before = snapshot(hidden)
    for row in hidden.get(model, []):
        client.post(url_of(model, "change", row.pk), {})
        client.post(url_of(model, "delete", row.pk), {"post": "yes"})
    if snapshot(hidden) != before:
        problems.append(f"{name}: a POST to another tenant's change or delete page changed it")
    if visible and own.get(model):
        request = RequestFactory().get("/admin/")
        request.user = person
        problems += form_field_problems(model_admin, request, own[model][0], hidden)
    problems += autocomplete_problems(client, model, hidden)
    return problems


REGISTERED = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def test_every_registered_model_has_a_factory():
    internal = {"auth", "axes", "django_celery_beat"}
    internal |= {"chat.SlackEvent", "chat.SlackPost", "secrets_vault.VaultCanary"}
    missing = [
        model._meta.label
        for model, _ in REGISTERED
        if model not in TENANT_FACTORIES and not ({model._meta.app_label, model._meta.label} & internal)
    ]
    assert missing == [], f"add a factory for {', '.join(missing)} in tests/test_admin_scope.py"


def _with_every_django_permission(user) -> None:
    """Staff, and every model permission Django has: still only what the Member roles give."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.set(Permission.objects.all())


@pytest.mark.parametrize("staff", [False, True], ids=["owner", "staff-owner-with-every-permission"])
@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=lambda v: getattr(v, "__name__", ""))
def test_an_owner_of_one_workspace_sees_and_touches_nothing_of_another(client, world, model, model_admin, staff):
    made = world.acme.get(model) is not None or world.globex.get(model) is not None
    assert made, f"add a factory for {model._meta.label} in tests/test_admin_scope.py"
    if staff:
        _with_every_django_permission(world.acme_owner)
    assert world.acme_owner.is_staff == staff and not world.acme_owner.is_superuser
    client.force_login(world.acme_owner)
    assert scope_problems(client, world.acme_owner, model, model_admin, world.acme, world.globex) == []


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=lambda v: getattr(v, "__name__", ""))
def test_a_superuser_sees_both_workspaces(admin_client, world, model, model_admin):
    response = admin_client.get(url_of(model, "changelist"))
    assert response.status_code == 200
    listed = {obj.pk for obj in response.context["cl"].result_list}
    assert pks(world.acme.get(model, [])) | pks(world.globex.get(model, [])) <= listed


def test_a_modeladmin_registered_without_scoping_is_caught(client, world, settings):
    """The checker is no formality: Repository registered with a plain ModelAdmin (as a new
    admin.py might) shows Globex's repository to Acme's owner, and the checker says so."""

    class UnscopedRepositoryAdmin(admin.ModelAdmin):
        search_fields = ["name"]

        def has_module_permission(self, request):
            return True

        def has_view_permission(self, request, obj=None):
            return True

        def has_add_permission(self, request):
            return True

        def has_change_permission(self, request, obj=None):
            return True  # editable: its forms have fields whose choices are checked

        def has_delete_permission(self, request, obj=None):
            return True  # so delete_selected is offered, and posted with Globex's ids

    # Globex's repository is bound by a code channel, whose scoped admin rightly refuses Acme's owner
    # the cascade: unbound here, so that delete_selected reaches the repository itself.
    CodeChannel.objects.filter(repository__in=world.globex[Repository]).delete()
    scoped_admin = admin.site._registry[Repository]
    admin.site._registry[Repository] = UnscopedRepositoryAdmin(Repository, admin.site)
    try:
        # The admin's URLs are built once from the registry: a URLconf of this test's own.
        urls = types.ModuleType("tests_admin_scope_unscoped_urls")
        urls.urlpatterns = [path("admin/", admin.site.urls), path("", include("calvin.dashboard.urls"))]
        sys.modules[urls.__name__] = urls
        settings.ROOT_URLCONF = urls.__name__
        clear_url_caches()
        client.force_login(world.acme_owner)
        unscoped = admin.site._registry[Repository]
        problems = scope_problems(client, world.acme_owner, Repository, unscoped, world.acme, world.globex)
    finally:
        admin.site._registry[Repository] = scoped_admin
        sys.modules.pop("tests_admin_scope_unscoped_urls", None)
        clear_url_caches()
    assert any("change list shows another tenant's rows" in p for p in problems), problems
    assert any("search for" in p for p in problems), problems
    assert any("change page of another tenant's row" in p for p in problems), problems
    assert any("field workspace offers Workspace" in p for p in problems), problems
    assert any("action delete_selected changed another tenant's rows" in p for p in problems), problems
