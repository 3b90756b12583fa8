from django import forms
from django.contrib import admin, messages

from approvals.admin_actions import approve_selected, deny_selected, expire_selected, revoke_rules
from approvals.models import ApprovalRule, PendingApproval
from approvals.rule_services import approval_rule_revoke
from approvals.services import ApprovalRefused
from calvin.admin_scope import ReadOnlyRecordAdmin, WorkspaceScopedAdmin, change_link, links


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


class RuleStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("live", "live"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "live":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


def _state(rule: ApprovalRule) -> str:
    return "revoked" if rule.revoked_at else "live"


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Allow rules people made on permission prompts' cards: listed with what they matched, and
    revoked (Revoke selected, audited), never edited: a rule that answered prompts stays as it was."""

    list_display = [
        "id",
        "rule",
        "scope",
        "agent",
        "session",
        "created_by",
        "created_at",
        "match_count",
        "last_matched_at",
        "state",
        "revoked_at",
    ]
    list_filter = [RuleStateFilter, "scope", "tool_name", "agent"]
    search_fields = ["tool_name", "command_prefix"]
    list_select_related = ["agent", "session", "created_by__user"]
    ordering = ["-created_at", "-id"]
    actions = [revoke_rules]  # approvals/admin_actions.py

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields] + ["rule", "state"]

    @admin.display(description="rule")
    def rule(self, obj):
        return obj.label

    @admin.display(description="state")
    def state(self, obj):
        return _state(obj)


class RuleRevokeForm(forms.ModelForm):
    revoke = forms.BooleanField(required=False, label="revoke")

    class Meta:
        model = ApprovalRule
        fields = []


class ApprovalRuleInline(WorkspaceScopedAdmin, admin.TabularInline):
    """An agent's allow rules on its page (calvin/workspaces/admin.py AgentAdmin): its own, and its
    sessions'. Tick "revoke" and save to revoke one (approval_rule_revoke, audited); nothing else
    of a rule changes here."""

    model = ApprovalRule
    fk_name = "agent"
    form = RuleRevokeForm
    tenant_permissions = {"view", "change"}
    extra = 0
    can_delete = False
    verbose_name_plural = "allow rules (made on permission prompts' cards)"
    fields = readonly_fields = [
        "rule",
        "scope",
        "session_link",
        "created_by",
        "created_at",
        "match_count",
        "last_matched_at",
        "state",
    ]
    ordering = ["revoked_at", "-created_at"]

    def get_fields(self, request, obj=None):
        return [*self.readonly_fields, "revoke"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("session", "created_by__user")

    @admin.display(description="rule")
    def rule(self, obj):
        return obj.label

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session) if obj.session_id else "every session"

    @admin.display(description="state")
    def state(self, obj):
        return f"revoked {obj.revoked_at:%Y-%m-%d %H:%M}" if obj.revoked_at else "live"

    def has_add_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)

        class RevokingFormSet(formset):
            def save(self, commit=True):
                """Revoke the ticked rules through the service; never save a rule's row from the form
                (it would write back counts read before a prompt matched it meanwhile)."""
                from calvin.operators import operator_for

                # The admin's change message reads these: nothing was added, changed or deleted here.
                self.new_objects, self.changed_objects, self.deleted_objects = [], [], []
                for form in self.forms:
                    rule = form.instance
                    if not form.cleaned_data.get("revoke") or rule.pk is None:
                        continue
                    actor = operator_for(request.user, rule.workspace_id)
                    try:
                        text = approval_rule_revoke(rule_id=rule.pk, actor=actor)
                    except ApprovalRefused as refused:
                        messages.error(request, f"Rule {rule.pk}: {refused}; nothing changed.")
                    else:
                        messages.success(request, f"Rule {rule.pk}: {text}.")
                return []

        return RevokingFormSet
