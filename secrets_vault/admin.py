"""Secrets in the admin: set, replaced and deleted through the vault's services; never a value or a ciphertext.

A superuser sees every workspace's secrets. A staff user who is not one sees and manages
only those of the workspaces where they are an owner or an admin (their Member role is the
permission; no model permission is needed or enough).
"""

from django.contrib import admin, messages
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from calvin.workspaces.models import Agent, Workspace
from secrets_vault.forms import SecretAdminForm
from secrets_vault.management_services import (
    managed_workspace_ids,
    member_of,
    secret_as_file_set,
    secret_manage_put,
)
from secrets_vault.models import Secret, SecretRequest
from secrets_vault.services import secret_delete


def _sees_all(request) -> bool:
    return request.user.is_active and request.user.is_superuser


def _workspace_ids(request) -> list[int]:
    """The workspaces a non-superuser manages, computed once per request."""
    if not hasattr(request, "_secret_workspace_ids"):
        request._secret_workspace_ids = managed_workspace_ids(request.user)
    return request._secret_workspace_ids


class ScopedToManagedWorkspaces:
    """Everything for a superuser; for other staff, only rows of workspaces they own or administer."""

    workspace_path = "workspace_id"

    def _workspace_of(self, obj) -> int:
        raise NotImplementedError

    def _may(self, request, obj=None) -> bool:
        if _sees_all(request):
            return True
        ids = _workspace_ids(request)
        return bool(ids) if obj is None else self._workspace_of(obj) in ids

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if _sees_all(request):
            return queryset
        return queryset.filter(**{f"{self.workspace_path}__in": _workspace_ids(request)})

    def has_module_permission(self, request):
        return self._may(request)

    def has_view_permission(self, request, obj=None):
        return self._may(request, obj)


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        return Secret.Scope.choices

    def queryset(self, request, queryset):
        place = {
            Secret.Scope.WORKSPACE: {"agent__isnull": True, "session__isnull": True},
            Secret.Scope.AGENT: {"agent__isnull": False},
            Secret.Scope.SESSION: {"session__isnull": False},
        }.get(self.value())
        return queryset.filter(**place) if place else queryset


@admin.register(Secret)
class SecretAdmin(ScopedToManagedWorkspaces, admin.ModelAdmin):
    form = SecretAdminForm
    list_display = ["name", "scope", "place", "workspace", "as_file", "set_by", "set_at"]
    list_select_related = ["workspace", "agent", "set_by__user"]
    # RelatedOnly: a staff user's filter lists their own workspaces, not every tenant's name.
    list_filter = [ScopeFilter, "as_file", ("workspace", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name"]
    # The ciphertext is on no form and in no list; key_id (which key, not the key) may be shown.
    exclude = ["ciphertext"]
    add_fields = ["workspace", "agent", "name", "value", "as_file"]
    change_fields = ["workspace", "agent", "session", "name", "value", "as_file", "key_id", "set_by", "set_at"]
    shown_only = ["workspace", "agent", "session", "name", "key_id", "set_by", "set_at"]

    def _workspace_of(self, obj) -> int:
        return obj.workspace_id

    @admin.display(description="scope")
    def scope(self, obj):
        return obj.scope

    @admin.display(description="place")
    def place(self, obj):
        return obj.place

    def get_queryset(self, request):
        return super().get_queryset(request).defer("ciphertext")

    def get_fields(self, request, obj=None):
        if obj is None:
            return self.add_fields
        if not self.has_change_permission(request, obj):
            return [f for f in self.change_fields if f != "value"]
        return self.change_fields

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.shown_only

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "workspace":
            kwargs["queryset"] = self._scoped(request, Workspace.objects.order_by("name"), "id")
        elif db_field.name == "agent":
            agents = Agent.objects.select_related("workspace").order_by("workspace__name", "name")
            kwargs["queryset"] = self._scoped(request, agents, "workspace_id")
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "agent":
            field.label_from_instance = lambda agent: f"{agent.workspace.name}: {agent.name}"
            field.help_text = "Empty: the whole workspace (every agent's sessions)."
        return field

    def _scoped(self, request, queryset, workspace_field: str):
        return (
            queryset if _sees_all(request) else queryset.filter(**{f"{workspace_field}__in": _workspace_ids(request)})
        )

    def has_add_permission(self, request):
        return self._may(request)

    def has_change_permission(self, request, obj=None):
        # A session's own secret is set by its request_secret card, not here: shown only.
        return self._may(request, obj) and (obj is None or obj.session_id is None)

    def has_delete_permission(self, request, obj=None):
        # Any place, a session's too: deleting a session or workspace here deletes its secrets.
        return self._may(request, obj)

    @method_decorator(sensitive_post_parameters("value"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        """Through the vault's services: the form never writes a row, a ciphertext or a key id."""
        value = form.cleaned_data.get("value")
        if value:
            saved = secret_manage_put(
                workspace_id=obj.workspace_id,
                name=obj.name,
                value=value,
                agent_id=obj.agent_id,
                as_file=obj.as_file,
                member=member_of(request.user, obj.workspace_id),
            )
            obj.pk = saved.pk
            obj.refresh_from_db(fields=["key_id", "set_by", "set_at"])
        elif change and "as_file" in form.changed_data:
            secret_as_file_set(secret_id=obj.pk, workspace_id=obj.workspace_id, as_file=obj.as_file)
        elif change:
            messages.info(request, "The value was kept: type a new one to replace it.")

    def delete_model(self, request, obj):
        secret_delete(secret_id=obj.pk, workspace_id=obj.workspace_id)

    def delete_queryset(self, request, queryset):
        for secret_id, workspace_id in queryset.values_list("id", "workspace_id"):
            secret_delete(secret_id=secret_id, workspace_id=workspace_id)


@admin.register(SecretRequest)
class SecretRequestAdmin(ScopedToManagedWorkspaces, admin.ModelAdmin):
    """request_secret's requests, to look at: the value is typed into the card's private form, never here."""

    workspace_path = "session__workspace_id"
    list_display = ["name", "session", "status", "requested_at", "set_by", "set_at"]
    list_select_related = ["session", "set_by__user"]
    list_filter = ["status"]
    search_fields = ["name"]
    fields = ["session", "tool_call", "name", "reason", "as_file", "status", "requested_at", "set_by", "set_at"]
    readonly_fields = fields

    def _workspace_of(self, obj) -> int:
        return obj.session.workspace_id

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Read-only, but deleting its session (or workspace) in the admin deletes its requests.
        return self._may(request, obj)
