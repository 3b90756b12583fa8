"""Invitations in the operator console: looked at, never made or changed here. Inviting, resending
and revoking happen on the workspace's People page, through the services that send the email,
keep one open invitation per address and write the audit log."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from calvin.accounts.models import Invitation
from calvin.admin_scope import ReadOnlyRecordAdmin


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    list_display = ("email", "role", "workspace", "invited_by", "sent_at", "expires_at", "state", "people_page")
    list_filter = ("role",)
    search_fields = ("email",)
    # The digest opens nothing, but nobody needs to see it either.
    exclude = ("token_digest",)
    ordering = ("-created_at",)

    @admin.display(description="state")
    def state(self, invitation: Invitation) -> str:
        if invitation.accepted_at:
            return "accepted"
        if invitation.revoked_at:
            return "revoked"
        return "expired" if invitation.is_expired else "open"

    @admin.display(description="change on")
    def people_page(self, invitation: Invitation) -> str:
        url = reverse("dashboard:people", kwargs={"slug": invitation.workspace.slug})
        return format_html('<a href="{}">the People page</a>', url)
