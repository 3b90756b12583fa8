from django.contrib import admin

from calvin.workspaces.models import Agent, Destination, Member, Quota, Repository, Workspace


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


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["workspace", "concurrent_sessions", "tool_calls_per_day", "storage_mib"]
    search_fields = ["workspace__name"]


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
