"""API tokens in the admin: every person's, with when each was used; revoke. Scoped to the
workspaces a person owns or administers (the token itself is never stored, so never shown)."""

from django.contrib import admin

from calvin.admin_actions import operator_action
from calvin.admin_scope import WorkspaceScopedAdmin
from calvin.api.models import ApiToken
from calvin.api.tokens import api_token_revoke
from calvin.operators import operator_check, operator_for


def _revoke_plan(token: ApiToken) -> str:
    if not token.is_live():
        return "nothing: it is revoked or expired already"
    return f"{token.member}'s token “{token.name}” stops working at once"


def _revoke(request, token: ApiToken) -> str:
    actor = operator_for(request.user, token.member.workspace_id)
    operator_check(actor, token.member.workspace_id)
    return "revoked" if api_token_revoke(token_id=token.id, member=actor) else "nothing to do: not live"


revoke = operator_action(
    name="revoke",
    description="Revoke the selected tokens",
    verb="Revoke",
    plan=_revoke_plan,
    perform=_revoke,
    warning="A revoked token is refused at once; its person can make a new one on the dashboard.",
)


@admin.register(ApiToken)
class ApiTokenAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    workspace_path = "member__workspace"
    list_display = ("name", "member", "workspace", "hint", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_select_related = ("member__user", "member__workspace")
    list_filter = ("revoked_at",)
    search_fields = ("name", "hint")
    readonly_fields = ("member", "name", "hint", "created_at", "expires_at", "last_used_at", "revoked_at")
    exclude = ("digest",)
    actions = [revoke]

    @admin.display(description="workspace")
    def workspace(self, token: ApiToken) -> str:
        return str(token.member.workspace)

    def has_add_permission(self, request):
        return False  # made by their person on the dashboard, who alone ever sees the token
