"""Secrets in the admin: set, replaced and deleted through the vault's services; never a value or a ciphertext.

A superuser sees every workspace's secrets. Anyone else sees and manages only those of the
workspaces where they are an owner or an admin (calvin.admin_scope: their Member role is the
permission; no model permission or staff flag is needed or enough).
"""

from django.contrib import admin, messages
from django.urls import path
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from calvin.admin_scope import SuperuserOnlyRecordAdmin, WorkspaceScopedAdmin
from calvin.workspaces.models import Agent, Workspace
from secrets_vault.admin_actions import vault_rotate_view
from secrets_vault.forms import SecretAdminForm
from secrets_vault.management_services import member_of, secret_as_file_set, secret_manage_put
from secrets_vault.models import Secret, SecretRequest, VaultCanary
from secrets_vault.services import secret_delete


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
class SecretAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    tenant_permissions = {"view", "add", "change", "delete"}
    form = SecretAdminForm
    list_display = ["name", "scope", "place", "workspace", "as_file", "set_by", "set_at"]
    list_select_related = ["workspace", "agent", "set_by__user"]
    # RelatedOnly: a tenant's filter lists their own workspaces, not every tenant's name.
    list_filter = [ScopeFilter, "as_file", ("workspace", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name"]
    # The ciphertext is on no form and in no list; key_id (which key, not the key) may be shown.
    exclude = ["ciphertext"]
    add_fields = ["workspace", "agent", "name", "value", "as_file"]
    change_fields = ["workspace", "agent", "session", "name", "value", "as_file", "key_id", "set_by", "set_at"]
    shown_only = ["workspace", "agent", "session", "name", "key_id", "set_by", "set_at"]

    def get_urls(self):
        """The vault key's rotation (superusers only: secrets_vault/admin_actions.py)."""
        rotate = path(
            "rotate/",
            self.admin_site.admin_view(lambda request: vault_rotate_view(self, request)),
            name="secrets_vault_secret_rotate",
        )
        return [rotate, *super().get_urls()]

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
        # Ordered here; scoped to the person's workspaces by WorkspaceScopedAdmin.
        if db_field.name == "workspace":
            kwargs["queryset"] = Workspace.objects.order_by("name")
        elif db_field.name == "agent":
            kwargs["queryset"] = Agent.objects.select_related("workspace").order_by("workspace__name", "name")
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "agent":
            field.label_from_instance = lambda agent: f"{agent.workspace.name}: {agent.name}"
            field.help_text = "Empty: the whole workspace (every agent's sessions)."
        return field

    def has_change_permission(self, request, obj=None):
        # A session's own secret is set by its request_secret card, not here: shown only.
        return super().has_change_permission(request, obj) and (obj is None or obj.session_id is None)

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
        actor = member_of(request.user, obj.workspace_id) or request.user
        secret_delete(secret_id=obj.pk, workspace_id=obj.workspace_id, actor=actor)

    def delete_queryset(self, request, queryset):
        for secret_id, workspace_id in queryset.values_list("id", "workspace_id"):
            actor = member_of(request.user, workspace_id) or request.user
            secret_delete(secret_id=secret_id, workspace_id=workspace_id, actor=actor)


@admin.register(SecretRequest)
class SecretRequestAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    """request_secret's requests, to look at: the value is typed into the card's private form, never here."""

    workspace_path = "session__workspace"
    list_display = ["name", "session", "status", "requested_at", "set_by", "set_at"]
    list_select_related = ["session", "set_by__user"]
    list_filter = ["status"]
    search_fields = ["name"]
    fields = ["session", "tool_call", "name", "reason", "as_file", "status", "requested_at", "set_by", "set_at"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(VaultCanary)
class VaultCanaryAdmin(SuperuserOnlyRecordAdmin, admin.ModelAdmin):
    """Which key sealed the vault's canary (secrets_vault/canary.py): read-only, superusers only."""

    list_display = ["id", "key_id", "created_at"]
    exclude = ["ciphertext"]
