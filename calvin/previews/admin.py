"""Previews in the admin: the list (every name, live or ended), "Take down", and who may open a
live one until when; scoped to the workspaces a person owns or administers."""

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from calvin.admin_actions import operator_action
from calvin.admin_scope import WorkspaceScopedAdmin, change_link
from calvin.operators import OperatorRefused, operator_check, operator_for
from calvin.previews.addresses import preview_domain, preview_url
from calvin.previews.models import Preview
from calvin.previews.services import preview_settings_change, preview_take_down


def _actor(request, workspace_id: int):
    actor = operator_for(request.user, workspace_id)
    operator_check(actor, workspace_id)
    return actor


def _take_down_plan(preview: Preview) -> str:
    if not preview.is_live():
        return f"nothing: it is {preview.state} already"
    return f"its URL {preview_url(preview.name)} stops working now (port {preview.port} keeps running)"


def _take_down(request, preview: Preview) -> str:
    return preview_take_down(preview_id=preview.id, actor=_actor(request, preview.workspace_id))


take_down = operator_action(
    name="take_down",
    description="Take down the selected previews",
    verb="Take down",
    plan=_take_down_plan,
    perform=_take_down,
    warning="A preview taken down is not served again; the agent can make a new one.",
)


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("live", "live"), ("expired", "expired, not swept yet"), ("ended", "ended")]

    def queryset(self, request, queryset):
        if self.value() == "live":
            return queryset.live()
        if self.value() == "expired":
            return queryset.expired()
        if self.value() == "ended":
            return queryset.filter(removed_at__isnull=False)
        return queryset


class PreviewForm(forms.ModelForm):
    class Meta:
        model = Preview
        fields = ["access", "expires_at"]

    def clean_expires_at(self):
        value = self.cleaned_data.get("expires_at")
        if value is not None and value <= timezone.now():
            raise forms.ValidationError("An expiry is a time to come; take the preview down to end it now.")
        return value


@admin.register(Preview)
class PreviewAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    tenant_permissions = {"view", "change"}
    form = PreviewForm

    list_display = ["name", "link", "workspace", "thread_shown", "port", "access", "expires_at", "state_shown"]
    list_display += ["created_at"]
    list_filter = [StateFilter, "access", "workspace", "removed_reason"]
    search_fields = ["name"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]
    actions = [take_down]
    fields = ["name", "link", "workspace", "thread_shown", "port", "access", "expires_at", "state_shown"]
    fields += ["created_at", "created_by", "removed_at", "removed_reason", "removed_by"]
    readonly_fields = ["name", "link", "workspace", "thread_shown", "port", "state_shown", "created_at"]
    readonly_fields += ["created_by", "removed_at", "removed_reason", "removed_by"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("workspace", "session__thread")

    @admin.display(description="URL")
    def link(self, obj):
        if not preview_domain():
            return "-"
        url = preview_url(obj.name)
        return format_html('<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', url, url)

    @admin.display(description="thread")
    def thread_shown(self, obj):
        return change_link(obj.session.thread)

    @admin.display(description="state")
    def state_shown(self, obj):
        if obj.removed_at:
            return f"ended: {obj.get_removed_reason_display()}"
        return obj.state

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and not obj.is_live():
            return [*self.readonly_fields, "access", "expires_at"]  # an ended preview is a record
        return self.readonly_fields

    def has_add_permission(self, request, obj=None):
        return False  # made by the agent's preview tool only

    def has_delete_permission(self, request, obj=None):
        return False  # taken down, and kept for the record

    def save_model(self, request, obj, form, change):
        try:
            changed = preview_settings_change(
                preview_id=obj.id,
                access=form.cleaned_data["access"],
                expires_at=form.cleaned_data["expires_at"],
                actor=_actor(request, obj.workspace_id),
            )
        except OperatorRefused as refused:
            self.message_user(request, f"Preview {obj.name}: {refused}; nothing changed.", messages.ERROR)
            return
        obj.refresh_from_db()
        if not changed:
            self.message_user(request, f"Preview {obj.name}: nothing changed.", messages.INFO)
