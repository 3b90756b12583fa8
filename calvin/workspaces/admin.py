from django.contrib import admin

from calvin.workspaces.models import Agent, DailyUsage, Destination, Member, Quota, Repository, Workspace
from calvin.workspaces.quotas import quotas_with_usage


class MemberInline(admin.TabularInline):
    model = Member
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "slack_team_id", "created_at"]
    search_fields = ["name", "slug", "slack_team_id"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MemberInline]


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ["__str__", "workspace", "role", "user", "slack_user_id", "created_at"]
    list_filter = ["role", "workspace"]
    search_fields = ["display_name", "slack_user_id", "user__username", "user__email"]
    autocomplete_fields = ["user", "workspace"]


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ["full_name", "name", "workspace", "default_branch", "published"]
    list_filter = ["published", "workspace"]
    search_fields = ["name", "full_name", "clone_url"]


def _managed_workspace_ids(request) -> list[int]:
    """The workspaces the person owns or administers, computed once per request."""
    if not hasattr(request, "_managed_workspace_ids"):
        managers = Member.objects.filter(user_id=request.user.pk, role__in=[Member.Role.OWNER, Member.Role.ADMIN])
        request._managed_workspace_ids = list(managers.values_list("workspace_id", flat=True))
    return request._managed_workspace_ids


class UsageScopedAdmin:
    """Every workspace for people with the model's Django permission (superusers, the
    platform's operators). Other staff see only the workspaces they own or administer, and
    only to look: a tenant must neither raise its own quota nor see another tenant's use,
    as secrets_vault/admin.py scopes secrets by the same Member roles."""

    def _platform_wide(self, request) -> bool:
        return super().has_view_permission(request)

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if self._platform_wide(request):
            return queryset
        return queryset.filter(workspace_id__in=_managed_workspace_ids(request))

    def has_module_permission(self, request):
        return super().has_module_permission(request) or bool(_managed_workspace_ids(request))

    def has_view_permission(self, request, obj=None):
        if self._platform_wide(request):
            return True
        managed = _managed_workspace_ids(request)
        return bool(managed) if obj is None else obj.workspace_id in managed


@admin.register(Quota)
class QuotaAdmin(UsageScopedAdmin, admin.ModelAdmin):
    list_display = [
        "workspace",
        "concurrent_sessions",
        "turns_today",
        "tool_calls_today",
        "agent_minutes_this_month",
        "storage_mib",
    ]
    list_select_related = ["workspace"]
    search_fields = ["workspace__name"]
    limits = ["concurrent_sessions", "turns_per_day", "agent_minutes_per_month", "tool_calls_per_day", "storage_mib"]
    usage = ["turns_today", "tool_calls_today", "agent_minutes_this_month"]

    def get_queryset(self, request):
        # Use is read in the same query as the quotas: one query for the list, however long.
        return quotas_with_usage(queryset=super().get_queryset(request))

    def get_fields(self, request, obj=None):
        return ["workspace", *self.limits] if obj is None else ["workspace", *self.limits, *self.usage]

    def get_readonly_fields(self, request, obj=None):
        # One quota per workspace, made with it: a quota is not moved to another workspace.
        return [] if obj is None else ["workspace", *self.usage]

    @admin.display(description="turns today (UTC)")
    def turns_today(self, obj):
        return f"{obj.today_turns} of {obj.turns_per_day}"

    @admin.display(description="tool calls today (UTC)")
    def tool_calls_today(self, obj):
        return f"{obj.today_tool_calls} of {obj.tool_calls_per_day}"

    @admin.display(description="agent minutes this month (UTC)")
    def agent_minutes_this_month(self, obj):
        return f"{obj.month_agent_seconds / 60:.1f} of {obj.agent_minutes_per_month}"


@admin.register(DailyUsage)
class DailyUsageAdmin(UsageScopedAdmin, admin.ModelAdmin):
    """What was counted against the quotas: written only by the counting services."""

    list_display = ["day", "workspace", "turns", "tool_calls", "agent_minutes"]
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

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class DestinationInline(admin.TabularInline):
    """The agent's destination map: its permission list for send_message and send_file."""

    model = Destination
    fk_name = "agent"
    extra = 1
    fields = ["name", "thread", "target_agent"]
    raw_id_fields = ["thread", "target_agent"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    inlines = [DestinationInline]
    list_display = ["name", "workspace", "cli_scope", "model", "environment_version", "created_at"]
    list_filter = ["cli_scope", "model", "workspace"]
    search_fields = ["name", "instructions"]


@admin.register(Destination)
class DestinationAdmin(admin.ModelAdmin):
    list_display = ["name", "agent", "thread", "target_agent", "created_at"]
    list_filter = ["agent__workspace"]
    search_fields = ["name", "agent__name"]
    raw_id_fields = ["agent", "thread", "target_agent"]
