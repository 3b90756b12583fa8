from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from calvin.admin_scope import ReadOnlyRecordAdmin, WorkspaceScopedAdmin, admin_workspace_ids, is_platform_operator
from calvin.audit.admin_changes import AuditedChangesAdmin

# Imported for its receivers: every process that loads the admin pushes AGENTS.md on changes.
from calvin.workspaces.admin_actions import pause_agents, resume_agents
from calvin.workspaces.admin_forms import (
    AgentForm,
    QuotaForm,
    agent_form_save,
    destination_choices_limit,
    quota_form_save,
)
from calvin.workspaces.code_channels import (
    CodeChannelRefused,
    code_channel_change,
    code_channel_create,
    code_channel_delete,
)
from calvin.workspaces.definitions import (
    FORMATS,
    MAX_BYTES,
    DefinitionInvalid,
    clone_url_shown,
    definition_export,
    definition_import,
)
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
from calvin.workspaces.quotas import quotas_with_usage


class MemberInline(WorkspaceScopedAdmin, admin.TabularInline):
    """The workspace's people, to look at (for superusers too): roles change on the People page or,
    for a superuser, on the Member form, both under the last-owner rule and audited."""

    model = Member
    tenant_permissions = {"view"}
    extra = 0
    # The login as text: a link would lead a tenant to the users' admin, which is superusers' only.
    fields = readonly_fields = ["login", "role", "slack_user_id", "display_name", "created_at"]

    @admin.display(description="login")
    def login(self, obj):
        return member_login(obj)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def member_login(member) -> str:
    return member.user.get_username() if member.user_id else "-"


class MemberAdminForm(forms.ModelForm):
    class Meta:
        model = Member
        fields = ["workspace", "user", "role", "slack_user_id", "display_name"]

    def clean(self):
        """The People page's rule, for a superuser's edit too: a workspace keeps an owner."""
        data = super().clean()
        member = self.instance
        if member.pk and member.role == Member.Role.OWNER and data.get("role") != Member.Role.OWNER:
            others = Member.objects.filter(workspace_id=member.workspace_id, role=Member.Role.OWNER)
            if not others.exclude(pk=member.pk).exists():
                self.add_error(
                    "role", f"{member} is the last owner of {member.workspace}: make someone else one first."
                )
        return data


@admin.register(Member)
class MemberAdmin(AuditedChangesAdmin, WorkspaceScopedAdmin, admin.ModelAdmin):
    """Tenants look here; they invite, change roles and remove people on the People page, whose
    services (calvin/workspaces/people.py) keep the rules: the last owner stays, admins make no owners.
    A superuser's edit here keeps the last owner too, and is audited (member.create/change/delete)."""

    tenant_permissions = {"view"}
    form = MemberAdminForm
    audit_noun = "member"
    list_display = ["__str__", "workspace", "role", "user", "slack_user_id", "created_at"]
    list_filter = ["role", "workspace"]
    search_fields = ["display_name", "slack_user_id", "user__username", "user__email"]
    autocomplete_fields = ["user", "workspace"]

    def get_readonly_fields(self, request, obj=None):
        # A person stays in their workspace: moving the row would move an owner out of it.
        fields = list(super().get_readonly_fields(request, obj))
        fields = [*fields, "workspace"] if obj else fields
        return fields if is_platform_operator(request) else [*fields, "login"]

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        # A tenant sees the login as text: the users' admin it would link to is superusers' only.
        return fields if is_platform_operator(request) else ["login" if f == "user" else f for f in fields]

    @admin.display(description="login")
    def login(self, obj):
        return member_login(obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.role == Member.Role.OWNER:
            owners = Member.objects.filter(workspace_id=obj.workspace_id, role=Member.Role.OWNER)
            if not owners.exclude(pk=obj.pk).exists():
                return False  # the last owner: the workspace would have nobody to run it
        return super().has_delete_permission(request, obj)


def _manages(request, workspace_id: int | None = None) -> bool:
    """A superuser manages every workspace's definition; others those they own or administer."""
    if is_platform_operator(request):
        return True
    managed = admin_workspace_ids(request)
    return bool(managed) if workspace_id is None else workspace_id in managed


class DefinitionImportForm(forms.Form):
    file = forms.FileField(required=False, help_text=f"A .toml or .yaml file, at most {MAX_BYTES // 1024} KiB.")
    text = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 16, "cols": 90}))
    format = forms.ChoiceField(
        choices=[(f, f.upper()) for f in FORMATS], initial="toml", help_text="Of the pasted text (a file's name says)."
    )

    def clean(self):
        data = super().clean()
        if bool(data.get("file")) == bool(data.get("text")):
            raise forms.ValidationError("Upload a file or paste the definition (one of the two).")
        return data

    def definition(self) -> tuple[bytes | str, str]:
        """The file's bytes or the pasted text, and its format."""
        upload = self.cleaned_data.get("file")
        if not upload:
            return self.cleaned_data["text"], self.cleaned_data["format"]
        suffix = upload.name.rsplit(".", 1)[-1].lower()
        fmt = {"toml": "toml", "yaml": "yaml", "yml": "yaml"}.get(suffix, self.cleaned_data["format"])
        return upload.read(MAX_BYTES + 1), fmt  # one byte more than allowed: the import says it is too big


@admin.register(Workspace)
class WorkspaceAdmin(AuditedChangesAdmin, WorkspaceScopedAdmin, admin.ModelAdmin):
    """Superusers see every workspace; a workspace's owners and admins see and rename theirs, set
    its approval timeout and who approves an agent's changes to itself, and reach its definition's
    export and import. The egress policy is edited by superusers only: an allowlist can open private
    addresses of the hosts' network. The slug and Slack team stay put. Every save that changes a
    setting is audited (workspace.change, as the dashboard's settings page records it)."""

    audit_noun = "workspace"
    audit_workspace_path = "id"
    workspace_path = "id"
    tenant_permissions = {"view", "change"}
    platform_fields = ["slug", "slack_team_id", "egress_policy", "egress_allowlist"]
    list_display = ["name", "slug", "slack_team_id", "egress_policy", "created_at"]
    search_fields = ["name", "slug", "slack_team_id"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MemberInline]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return fields if is_platform_operator(request) else [*fields, *self.platform_fields]

    def get_prepopulated_fields(self, request, obj=None):
        return super().get_prepopulated_fields(request, obj) if is_platform_operator(request) else {}

    def get_deleted_objects(self, objs, request):
        # Its people go with it: the last-owner rule guards a workspace that stays, not one deleted.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, perms_needed - {str(Member._meta.verbose_name)}, protected

    def get_urls(self):
        views = [
            path("<int:workspace_id>/definition/export/", self.admin_site.admin_view(self.definition_export_view),
                 name="workspaces_workspace_definition_export"),
            path("<int:workspace_id>/definition/import/", self.admin_site.admin_view(self.definition_import_view),
                 name="workspaces_workspace_definition_import"),
        ]  # fmt: skip
        return views + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {
            **(extra_context or {}),
            "manages_definition": object_id.isdigit() and _manages(request, int(object_id)),
        }
        return super().change_view(request, object_id, form_url, extra)

    def _managed_workspace(self, request, workspace_id: int) -> Workspace:
        # Not found and not theirs look the same: another tenant's workspace is not even confirmed.
        workspace = Workspace.objects.filter(id=workspace_id).first()
        if workspace is None or not _manages(request, workspace.id):
            raise Http404("No such workspace")
        return workspace

    def definition_export_view(self, request, workspace_id: int):
        workspace = self._managed_workspace(request, workspace_id)
        fmt = request.GET.get("format", "toml")
        if fmt not in FORMATS:
            raise Http404("Unknown format")
        response = HttpResponse(definition_export(workspace=workspace, format=fmt), content_type=f"application/{fmt}")
        response["Content-Disposition"] = f'attachment; filename="{workspace.slug}-definition.{fmt}"'
        return response

    def definition_import_view(self, request, workspace_id: int):
        workspace = self._managed_workspace(request, workspace_id)
        form = DefinitionImportForm(request.POST or None, request.FILES or None)
        problems = []
        if request.method == "POST" and form.is_valid():
            text, fmt = form.definition()
            try:
                summary = definition_import(workspace=workspace, text=text, format=fmt, actor=request.user)
            except DefinitionInvalid as refused:
                problems = refused.problems
            else:
                messages.success(request, f"Definition of {workspace.name} imported: {summary}.")
                listing = reverse("admin:workspaces_repository_changelist")
                return redirect(f"{listing}?workspace__id__exact={workspace.id}")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Import the definition of {workspace.name}",
            "workspace": workspace,
            "form": form,
            "problems": problems,
        }
        return TemplateResponse(request, "admin/workspaces/workspace/definition_import.html", context)


class RepositoryForm(forms.ModelForm):
    class Meta:
        model = Repository
        fields = ["workspace", "name", "full_name", "clone_url", "default_branch", "published"]

    def clean(self):
        """The unique constraints say this too, but only by their names."""
        data = super().clean()
        workspace = data.get("workspace")
        others = Repository.objects.filter(workspace=workspace).exclude(pk=self.instance.pk)
        for key in ("name", "full_name"):
            value = data.get(key)
            if workspace and value and others.filter(**{f"{key}__iexact": value}).exists():
                self.add_error(key, f"{workspace} already has a repository with this {key.replace('_', ' ')}.")
        return data


@admin.register(Repository)
class RepositoryAdmin(AuditedChangesAdmin, WorkspaceScopedAdmin, admin.ModelAdmin):
    """Every workspace's repositories for superusers; a workspace's owners and admins see and
    change only theirs. Clone URLs are checked by the model's validators when saved."""

    audit_noun = "repository"  # repository.create / .change / .delete
    audit_shown = {"clone_url": clone_url_shown}  # a clone URL may hold user:token@

    tenant_permissions = {"view", "add", "change", "delete"}
    form = RepositoryForm
    list_display = ["full_name", "name", "workspace", "default_branch", "published", "updated_at"]
    list_select_related = ["workspace"]
    # RelatedOnly: a workspace admin's filter lists their own workspaces, not every tenant's name.
    list_filter = ["published", ("workspace", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "full_name", "clone_url"]


class CodeChannelForm(forms.ModelForm):
    """The model's rules (CodeChannel.clean: the channel's shape by kind, a repository of the same
    workspace; its constraints: once per workspace, a Slack channel in one workspace only)."""

    # Checked as typed: "C0123ABCD\n" or " web" is refused, never quietly trimmed into another value.
    channel = forms.CharField(
        strip=False,
        max_length=CodeChannel._meta.get_field("channel").max_length,
        help_text=CodeChannel._meta.get_field("channel").help_text,
    )

    class Meta:
        model = CodeChannel
        fields = ["workspace", "kind", "channel", "repository"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields.get("repository")
        if field is not None:
            # Someone who runs two workspaces tells their repositories apart by the workspace's name.
            field.queryset = field.queryset.select_related("workspace")
            field.label_from_instance = lambda repository: f"{repository.full_name} ({repository.workspace})"


@admin.register(CodeChannel)
class CodeChannelAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    """A workspace's owners and admins bind a Slack channel (its id) or a web space (a name) to one of
    its repositories. Saved and deleted through calvin/workspaces/code_channels.py, which checks the
    rules again and audits (code_channel.create / .change / .delete)."""

    tenant_permissions = {"view", "add", "change", "delete"}
    form = CodeChannelForm
    list_display = ["channel", "kind", "repository", "workspace", "created_at"]
    list_select_related = ["workspace", "repository"]
    list_filter = ["kind", ("workspace", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["channel", "repository__name", "repository__full_name"]

    def get_readonly_fields(self, request, obj=None):
        # A binding stays in its workspace: its threads and repository are that workspace's.
        return ["workspace", "created_at"] if obj else []

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        field = form.base_fields.get("repository")
        if obj is not None and field is not None:
            field.queryset = field.queryset.filter(workspace_id=obj.workspace_id)  # only its own workspace's
        return form

    def save_model(self, request, obj, form, change):
        fields = {"kind": obj.kind, "channel": obj.channel, "repository": obj.repository, "actor": request.user}
        try:
            if change:
                code_channel_change(code_channel=obj, **fields)
            else:
                created = code_channel_create(workspace=obj.workspace, **fields)
                obj.pk = created.pk
        except CodeChannelRefused as refused:  # only a race gets here (a role taken away, the channel
            raise PermissionDenied(str(refused)) from None  # bound meanwhile): the form checked the rest

    def delete_model(self, request, obj):
        self.delete_queryset(request, [obj])

    def delete_queryset(self, request, queryset):
        try:
            with transaction.atomic():  # the delete_selected action runs outside the admin's transaction
                for binding in queryset:
                    code_channel_delete(code_channel=binding, actor=request.user)
        except CodeChannelRefused as refused:
            raise PermissionDenied(str(refused)) from None


@admin.register(Quota)
class QuotaAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    """Superusers set any limit; a workspace's owners and admins see theirs (and its use) and set
    each limit up to the platform's ceiling (calvin/workspaces/quota_changes.py)."""

    tenant_permissions = {"view", "change"}
    form = QuotaForm
    list_display = [
        "workspace",
        "concurrent_sessions",
        "turns_today",
        "tool_calls_today",
        "agent_minutes_this_month",
        "spend_this_month",
        "storage_mib",
    ]
    list_select_related = ["workspace"]
    search_fields = ["workspace__name"]
    limits = ["concurrent_sessions", "turns_per_day", "agent_minutes_per_month", "tool_calls_per_day", "storage_mib"]
    limits += ["monthly_spend_cap_usd", "session_spend_cap_usd", "spawn_depth_max", "spawn_live_descendants_max"]
    usage = ["turns_today", "tool_calls_today", "agent_minutes_this_month", "spend_this_month"]

    def get_queryset(self, request):
        # Use is read in the same query as the quotas: one query for the list, however long.
        return quotas_with_usage(queryset=super().get_queryset(request))

    def get_fields(self, request, obj=None):
        return ["workspace", *self.limits] if obj is None else ["workspace", *self.limits, *self.usage]

    def get_readonly_fields(self, request, obj=None):
        # One quota per workspace, made with it: a quota is not moved to another workspace.
        return [] if obj is None else ["workspace", *self.usage]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type(form.__name__, (form,), {"request": request})  # the ceiling depends on who edits

    def save_model(self, request, obj, form, change):
        quota_form_save(request=request, quota=obj, form=form, change=change)

    @admin.display(description="turns today (UTC)")
    def turns_today(self, obj):
        return f"{obj.today_turns} of {obj.turns_per_day}"

    @admin.display(description="tool calls today (UTC)")
    def tool_calls_today(self, obj):
        return f"{obj.today_tool_calls} of {obj.tool_calls_per_day}"

    @admin.display(description="agent minutes this month (UTC)")
    def agent_minutes_this_month(self, obj):
        return f"{obj.month_agent_seconds / 60:.1f} of {obj.agent_minutes_per_month}"

    @admin.display(description="spend this month (UTC)")
    def spend_this_month(self, obj):
        cap = obj.monthly_spend_cap_usd
        return f"${obj.month_cost_usd:,.2f}" + (f" of ${cap:,.2f}" if cap is not None else " (no cap)")


@admin.register(DailyUsage)
class DailyUsageAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """What was counted against the quotas: written only by the counting services, never here."""

    list_display = ["day", "workspace", "turns", "tool_calls", "agent_minutes", "cost_usd"]
    list_select_related = ["workspace"]
    # RelatedOnly: a workspace admin's filter lists their own workspaces, not every tenant's name.
    list_filter = [("workspace", admin.RelatedOnlyFieldListFilter)]
    date_hierarchy = "day"
    search_fields = ["workspace__name"]
    ordering = ["-day", "workspace__name"]
    fields = ["workspace", "day", "turns", "tool_calls", "agent_seconds"]
    readonly_fields = fields

    @admin.display(description="agent minutes", ordering="agent_seconds")
    def agent_minutes(self, obj):
        return f"{obj.agent_seconds / 60:.1f}"


@admin.register(SpendNotice)
class SpendNoticeAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """The 80 % / 100 % spend notices sent to owners, one per month and threshold (written by the spend service)."""

    list_display = ["month", "workspace", "threshold", "cap_usd", "spent_usd", "created_at"]
    list_select_related = ["workspace"]
    ordering = ["-month", "workspace__name"]
    fields = ["workspace", "month", "threshold", "cap_usd", "spent_usd", "created_at"]
    readonly_fields = fields


@admin.register(StorageUsage)
class StorageUsageAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Bytes of stored files counted against storage_mib (written only by the storage service)."""

    list_display = ["workspace", "bytes"]
    list_select_related = ["workspace"]
    fields = ["workspace", "bytes"]
    readonly_fields = fields


class DestinationInline(WorkspaceScopedAdmin, admin.TabularInline):
    """The agent's destination map: its permission list for send_message and send_file."""

    model = Destination
    workspace_path = "agent__workspace"
    tenant_permissions = {"view", "add", "change", "delete"}
    fk_name = "agent"
    extra = 1
    fields = ["name", "thread", "target_agent"]

    def get_formset(self, request, obj=None, **kwargs):
        """Choosers of this agent's own workspace's threads and other agents (admin_forms.py)."""
        formset = super().get_formset(request, obj, **kwargs)
        destination_choices_limit(formset.form, agent=obj)
        return formset


@admin.register(Agent)
class AgentAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    tenant_permissions = {"view", "add", "change", "delete"}
    form = AgentForm  # real widgets, the agent tools' own rules (calvin/workspaces/admin_forms.py)
    readonly_fields = ["environment_version", "directory", "paused_at", "paused_by", "created_by", "usage"]
    inlines = [DestinationInline]
    list_display = ["name", "workspace", "cli_scope", "model", "environment_version", "paused_at", "created_at"]
    actions = [pause_agents, resume_agents]  # calvin/workspaces/admin_actions.py
    list_filter = ["cli_scope", "model", "workspace"]
    search_fields = ["name", "instructions"]

    def get_readonly_fields(self, request, obj=None):
        # An agent stays in its workspace: its directory, sessions and secrets are there.
        return [*self.readonly_fields, "workspace"] if obj else self.readonly_fields

    def get_inlines(self, request, obj):
        if obj is None:
            return self.inlines
        # Its allow rules, revocable here: defined by approvals, which sits above workspaces.
        from approvals.admin import ApprovalRuleInline

        return [*self.inlines, ApprovalRuleInline]

    def save_model(self, request, obj, form, change):
        agent_form_save(request=request, agent=obj, form=form, change=change)

    @admin.display(description="usage")
    def usage(self, obj):
        if obj.pk is None:
            return "-"
        from sessions.admin_usage import usage_table
        from sessions.usage import agent_usage

        return usage_table(agent_usage(agent_id=obj.pk))


@admin.register(Destination)
class DestinationAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    workspace_path = "agent__workspace"
    tenant_permissions = {"view", "add", "change", "delete"}
    list_display = ["name", "agent", "thread", "target_agent", "created_at"]
    list_filter = ["agent__workspace"]
    search_fields = ["name", "agent__name"]
    # Choosers searched by name or title (scoped like every autocomplete), never ids to type;
    # Destination.clean keeps the thread or agent in the agent's own workspace.
    autocomplete_fields = ["agent", "thread", "target_agent"]
