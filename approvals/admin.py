from django.contrib import admin

from approvals.admin_actions import approve_selected, deny_selected, expire_selected
from approvals.models import PendingApproval
from calvin.admin_scope import ReadOnlyRecordAdmin, change_link, links


@admin.register(PendingApproval)
class PendingApprovalAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "session__workspace"
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
    actions = [approve_selected, deny_selected, expire_selected]  # approvals/admin_actions.py

    # Decisions go through the approvals services (compare-and-swap, who may decide), as the
    # actions do, never a free edit: a record, not added, changed or deleted here.
    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields] + ["records"]

    @admin.display(description="its session and tool call")
    def records(self, obj):
        return links(change_link(obj.session), change_link(obj.tool_call))
