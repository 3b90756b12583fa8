from django.contrib import admin

from approvals.models import PendingApproval


@admin.register(PendingApproval)
class PendingApprovalAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "session", "status", "requested_at", "expires_at", "decided_by", "decided_via"]
    list_filter = ["status", "kind", "decided_via"]
    search_fields = ["kind", "summary"]
    raw_id_fields = ["session", "tool_call", "decided_by"]
    # Decisions go through the approvals services (compare-and-swap), never a free edit.
    readonly_fields = ["status", "decided_by", "decided_via", "decided_at", "finished_at"]
