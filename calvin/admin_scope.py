"""The Django admin as each tenant's operator console: who may see and do what, by membership role.

A superuser (active) sees and may do everything a ModelAdmin allows. Everyone else gets only
what their Member roles give: in the workspaces they own or administer, the permissions a
ModelAdmin names in `tenant_permissions`; never Django's model permissions or the staff flag.
Every queryset, choice, autocomplete, inline, list filter, search and action goes through
`scoped(...)`, so another tenant's rows are neither shown nor reachable by a typed id.
"""

from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.admin.utils import get_fields_from_path
from django.core.exceptions import BadRequest, FieldDoesNotExist, ValidationError
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

PERMISSIONS = frozenset({"view", "add", "change", "delete"})


def is_platform_operator(request) -> bool:
    """Superusers run the platform: every workspace, every internal table."""
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_superuser)


def administered_workspace_ids(user) -> list[int]:
    """The workspaces a (logged-in, active) person owns or administers."""
    from calvin.workspaces.models import Member  # the AdminConfig imports this module before models load

    if user is None or not user.is_authenticated or not user.is_active:
        return []
    managers = Member.objects.filter(user_id=user.pk, role__in=[Member.Role.OWNER, Member.Role.ADMIN])
    return sorted(managers.values_list("workspace_id", flat=True))


def admin_workspace_ids(request) -> list[int]:
    """The workspaces the person owns or administers, computed once per request (and person:
    the login page asks before and after the person is known)."""
    user = getattr(request, "user", None)
    cached = getattr(request, "_admin_workspace_ids", None)
    if cached is None or cached[0] != getattr(user, "pk", None):
        request._admin_workspace_ids = (getattr(user, "pk", None), administered_workspace_ids(user))
    return request._admin_workspace_ids[1]


def workspace_path_of(model, admin_site) -> str | None:
    """How a model reaches its Workspace, as its scoped admin says; None: not a tenant's model."""
    from calvin.workspaces.models import Workspace

    if model is Workspace:
        return "id"
    model_admin = admin_site._registry.get(model)
    if isinstance(model_admin, WorkspaceScopedAdmin):
        return model_admin.workspace_path
    return None


def scoped(request, queryset, workspace_path: str | None):
    """The rows of the person's workspaces (all for superusers; none when there is no path)."""
    if is_platform_operator(request):
        return queryset
    if workspace_path is None:
        return queryset.none()
    ids = admin_workspace_ids(request)
    # A subquery rather than a join: paths through to-many relations would repeat rows.
    inside = queryset.model._default_manager.filter(**{f"{workspace_path}__in": ids}).values("pk")
    return queryset.filter(pk__in=inside)


class WorkspaceScopedAdmin:
    """Mixin before admin.ModelAdmin (or an InlineModelAdmin): rows, choices and permissions by role."""

    workspace_path = "workspace"  # ORM path from the model to its Workspace, e.g. "session__workspace"
    tenant_permissions = {"view"}  # what a workspace's owners/admins may do: subset of view/add/change/delete

    def _is_inline(self) -> bool:
        return isinstance(self, InlineModelAdmin)

    def _in_scope(self, request, obj) -> bool:
        if obj is None or not isinstance(obj, self.model):
            return True  # an inline is asked about its parent, which its own admin checked
        return scoped(request, self.model._default_manager.filter(pk=obj.pk), self.workspace_path).exists()

    def _tenant_may(self, request, permission: str, obj=None) -> bool:
        assert set(self.tenant_permissions) <= PERMISSIONS, f"unknown permissions {self.tenant_permissions}"
        if permission not in self.tenant_permissions or not admin_workspace_ids(request):
            return False
        return self._in_scope(request, obj)

    def get_queryset(self, request):
        queryset = scoped(request, super().get_queryset(request), self.workspace_path)
        # Autocomplete pages through this queryset: an unordered one pages inconsistently.
        return queryset if queryset.ordered else queryset.order_by("pk")

    def changelist_view(self, request, extra_context=None):
        # PostgreSQL takes no NUL in a text value: a filter or search holding one would be a 500.
        if any("\x00" in key or "\x00" in value for key, values in request.GET.lists() for value in values):
            raise BadRequest("A list filter or search cannot hold a NUL character.")
        return super().changelist_view(request, extra_context)

    def response_action(self, request, queryset):
        """A selected id that is no id of this model ("abc", a NUL, too large) is refused with a
        message, for every action: Django's own filter by it would be a 500."""
        from django.contrib import messages
        from django.contrib.admin import helpers

        pk = self.model._meta.pk
        try:
            for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
                pk.run_validators(pk.to_python(value))
        except ValidationError:
            self.message_user(request, "The selection holds an id that is not one; nothing changed.", messages.ERROR)
            return None
        return super().response_action(request, queryset)

    def get_search_results(self, request, queryset, search_term):
        if "\x00" in search_term:
            raise BadRequest("A search cannot hold a NUL character.")  # the autocomplete's too
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        return scoped(request, queryset, self.workspace_path), may_have_duplicates

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        kwargs["queryset"] = self._related_choices(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        kwargs["queryset"] = self._related_choices(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def _related_choices(self, db_field, request, queryset):
        related = db_field.remote_field.model
        if queryset is None:
            # What Django would offer (the related admin's ordering), then scoped.
            queryset = self.get_field_queryset(None, db_field, request)
            if queryset is None:
                queryset = related._default_manager.all()
        return scoped(request, queryset, workspace_path_of(related, self.admin_site))

    def get_formset(self, request, obj=None, **kwargs):
        """An inline's rows are named by a hidden pk field whose choices Django takes from every
        row of the model: scoped too, so a POSTed pk of another tenant's row is refused."""
        formset = super().get_formset(request, obj, **kwargs)
        workspace_path = self.workspace_path

        class ScopedFormSet(formset):
            def add_fields(self, form, index):
                super().add_fields(form, index)
                field = form.fields.get(self.model._meta.pk.name)
                if getattr(field, "queryset", None) is not None:
                    field.queryset = scoped(request, field.queryset, workspace_path)

        return ScopedFormSet

    def get_list_filter(self, request):
        """Filters on a relation list only the related rows of the person's own rows, never
        every tenant's names (RelatedOnlyFieldListFilter reads them from get_queryset)."""
        filters = []
        for entry in super().get_list_filter(request):
            if isinstance(entry, str) and self._is_relation_path(entry):
                entry = (entry, admin.RelatedOnlyFieldListFilter)
            filters.append(entry)
        return filters

    def _is_relation_path(self, path: str) -> bool:
        try:
            return bool(get_fields_from_path(self.model, path)[-1].is_relation)
        except FieldDoesNotExist:
            return False

    def get_deleted_objects(self, objs, request):
        """Records go with the row that holds them (a workspace, session or agent deleted by
        someone allowed to): a cascade is not an edit of a record, so the records' read-only
        admins do not block it. Audit events outlive it (their workspace is set to none)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        records = {
            str(model._meta.verbose_name)
            for model, model_admin in self.admin_site._registry.items()
            if isinstance(model_admin, (ReadOnlyRecordAdmin, SuperuserOnlyRecordAdmin))
        }
        return deleted, counts, perms_needed - records, protected

    def has_module_permission(self, request):
        if is_platform_operator(request):
            return super().has_module_permission(request)
        return bool(self.tenant_permissions) and bool(admin_workspace_ids(request))

    def has_view_permission(self, request, obj=None):
        if is_platform_operator(request):
            return super().has_view_permission(request, obj)
        return self._tenant_may(request, "view", obj) or self._tenant_may(request, "change", obj)

    def has_add_permission(self, request, obj=None):
        if is_platform_operator(request):
            return (
                super().has_add_permission(request, obj) if self._is_inline() else super().has_add_permission(request)
            )
        return self._tenant_may(request, "add")

    def has_change_permission(self, request, obj=None):
        if is_platform_operator(request):
            return super().has_change_permission(request, obj)
        return self._tenant_may(request, "change", obj)

    def has_delete_permission(self, request, obj=None):
        if is_platform_operator(request):
            return super().has_delete_permission(request, obj)
        return self._tenant_may(request, "delete", obj)


class ReadOnlyRecordAdmin(WorkspaceScopedAdmin):
    """Audit records: looked at, never added, changed or deleted here, by anyone (superusers too).
    Decisions on them happen through actions that call the services."""

    tenant_permissions = {"view"}

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class SuperuserOnlyAdmin:
    """Internal tables (the scheduler's, the login throttle's, people and groups): superusers only."""

    def has_module_permission(self, request):
        return is_platform_operator(request) and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return is_platform_operator(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request, *args):
        return is_platform_operator(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None):
        return is_platform_operator(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return is_platform_operator(request) and super().has_delete_permission(request, obj)

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if is_platform_operator(request) else queryset.none()


class SuperuserOnlyRecordAdmin(SuperuserOnlyAdmin):
    """Internal delivery records: superusers only, and read-only for them too."""

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def changelist_link(model, label: str, **filters) -> str:
    """A link to a model's change list, filtered (which the list itself scopes to the person)."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), label)


def change_link(obj, label: str | None = None) -> str:
    """A link to one row's change page, or "-" when there is none."""
    if obj is None:
        return "-"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or str(obj))


def links(*items) -> str:
    """Links side by side, as one read-only field shows them."""
    return format_html_join(" · ", "{}", ((item,) for item in items if item))
