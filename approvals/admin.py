from django.contrib import admin, messages

from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide
from calvin.workspaces.models import Member


def _decide_selected(modeladmin, request, queryset, *, approve: bool) -> None:
    """Each selected approval decided as the admin user's Member in its workspace, under the
    rule every channel follows (the session's owner, or a workspace owner or admin)."""
    for approval in queryset.select_related("session__workspace"):
        workspace = approval.session.workspace
        member = Member.objects.filter(workspace=workspace, user=request.user).first()
        try:
            if member is None:
                raise ApprovalRefused(f"you are not a member of {workspace}")
            text = approval_decide(approval_id=approval.id, member=member, approve=approve, via="admin")
        except ApprovalRefused as exc:
            modeladmin.message_user(request, f"Approval {approval.id}: {exc}; nothing changed.", messages.ERROR)
        else:
            modeladmin.message_user(request, f"Approval {approval.id}: {text}", messages.SUCCESS)


@admin.action(description="Approve selected")
def approve_selected(modeladmin, request, queryset):
    _decide_selected(modeladmin, request, queryset, approve=True)


@admin.action(description="Deny selected")
def deny_selected(modeladmin, request, queryset):
    _decide_selected(modeladmin, request, queryset, approve=False)


@admin.register(PendingApproval)
class PendingApprovalAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "status",
        "kind",
        "summary",
        "session",
        "requested_at",
        "expires_at",
        "decided_by",
        "decided_via",
        "decided_at",
    ]
    list_filter = ["status", "kind", "decided_via"]
    search_fields = ["kind", "summary"]
    list_select_related = ["session", "decided_by__user"]
    actions = [approve_selected, deny_selected]

    # Decisions go through the approvals services (compare-and-swap, who may decide),
    # never a free edit: every field is read-only and no row is added here. Rows go with
    # their session (deleting one stays possible), not from this list's actions.
    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
