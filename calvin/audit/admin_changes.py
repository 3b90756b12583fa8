"""Audit rows for rows an admin form adds, changes or deletes (repositories, ...): a mixin for a
ModelAdmin whose saves are plain model saves, not a service's (a service records its own)."""

from django.db import transaction

from calvin.audit.services import audit_record


class AuditedChangesAdmin:
    """Mixin before admin.ModelAdmin: `<audit_noun>.create`, `.change` (the changed fields, before ->
    after) and `.delete`, in the admin's own transaction. A form saved with no change writes nothing."""

    audit_noun = ""  # "repository"
    audit_workspace_path = "workspace_id"  # the attribute of a row that names its workspace
    audit_shown = {}  # field -> what the log shows of its value, e.g. a URL without its credential

    def audit_value(self, field: str, value):
        if field in self.audit_shown and isinstance(value, str):
            return self.audit_shown[field](value)
        return value if value is None or isinstance(value, bool | int | float | str) else str(value)

    def _audit_fields(self, obj, names) -> dict:
        return {name: self.audit_value(name, getattr(obj, name, None)) for name in names}

    def save_model(self, request, obj, form, change):
        names = [name for name in form.changed_data if hasattr(obj, name)]
        before = {}
        if change:
            stored = type(obj)._default_manager.filter(pk=obj.pk).first()
            before = self._audit_fields(stored, names) if stored else {}
        super().save_model(request, obj, form, change)
        after = self._audit_fields(obj, names)
        changes = {name: (before.get(name), after[name]) for name in names if before.get(name) != after[name]}
        if change and not changes:
            return
        verb = f"{self.audit_noun}.{'change' if change else 'create'}"
        workspace = getattr(obj, self.audit_workspace_path, None)
        audit_record(verb=verb, workspace=workspace, actor=request.user, target=obj, changes=changes)

    def delete_model(self, request, obj):
        self._deleted_audit(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():  # the delete_selected action runs outside the admin's transaction
            for obj in queryset:
                self._deleted_audit(request, obj)
            super().delete_queryset(request, queryset)

    def _deleted_audit(self, request, obj) -> None:
        workspace = getattr(obj, self.audit_workspace_path, None)
        audit_record(verb=f"{self.audit_noun}.delete", workspace=workspace, actor=request.user, target=obj)
