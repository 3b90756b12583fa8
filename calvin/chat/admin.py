"""Slack installations in the admin: which Slack team belongs to which workspace; never the token.

Scoped by calvin.admin_scope: a superuser sees every installation, anyone else only those of
the workspaces they own or administer (who may uninstall one, not edit it). Installs are made by the OAuth flow
(/slack/install) or from SLACK_BOT_TOKEN, never typed here; deleting one here forgets it
(installation_remove) without revoking it in Slack.
"""

from django.contrib import admin

from calvin.admin_scope import SuperuserOnlyRecordAdmin, WorkspaceScopedAdmin
from calvin.chat.models import SlackEvent, SlackInstallation, SlackPost
from calvin.chat.slack.installations import installation_remove


@admin.register(SlackInstallation)
class SlackInstallationAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    tenant_permissions = {"view", "delete"}
    list_display = ["team_id", "team_name", "workspace", "installed_by", "installed_at", "from_environment"]
    list_select_related = ["workspace", "installed_by"]
    list_filter = ["from_environment"]
    search_fields = ["team_id", "team_name", "workspace__name"]
    # The sealed token is on no form and in no list.
    fields = [
        "team_id",
        "team_name",
        "workspace",
        "enterprise_id",
        "app_id",
        "bot_id",
        "bot_user_id",
        "bot_scopes",
        "installer_slack_user_id",
        "installed_by",
        "from_environment",
        "installed_at",
        "updated_at",
    ]
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).defer("bot_token_sealed")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        installation_remove(team_id=obj.team_id, actor=request.user)

    def delete_queryset(self, request, queryset):
        for team_id in queryset.values_list("team_id", flat=True):
            installation_remove(team_id=team_id, actor=request.user)


@admin.register(SlackEvent)
class SlackEventAdmin(SuperuserOnlyRecordAdmin, admin.ModelAdmin):
    """Slack's deliveries, for whoever runs the gateway: read-only, superusers only (a row names a
    Slack team and channel, not a workspace)."""

    list_display = ["event_id", "team_id", "event_type", "status", "retry_num", "note", "received_at"]
    list_filter = ["status", "event_type"]
    search_fields = ["event_id", "team_id"]
    # The payload is a person's message: the list says what happened to it, not what it said.
    exclude = ["payload"]


@admin.register(SlackPost)
class SlackPostAdmin(SuperuserOnlyRecordAdmin, admin.ModelAdmin):
    list_display = ["id", "lane", "kind", "part", "status", "attempts", "slack_ts", "error", "created_at", "sent_at"]
    list_select_related = ["lane"]
    list_filter = ["status", "kind"]
    search_fields = ["lane__team_id", "lane__channel_id", "slack_ts"]
    exclude = ["payload"]
