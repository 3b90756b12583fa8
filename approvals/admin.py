from django.contrib import admin

from approvals.admin_actions import approve_selected, deny_selected, expire_selected
from approvals.models import PendingApproval


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
    actions = [approve_selected, deny_selected, expire_selected]  # approvals/admin_actions.py

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
