"""Scheduled tasks in the admin: every task with its next run and failures, its runs with their
outcome and turn; pause, resume, cancel or run now; edit through the same checks as ncl's."""

from django import forms
from django.contrib import admin
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html

from calvin.admin_actions import operator_action
from calvin.admin_scope import WorkspaceScopedAdmin
from calvin.operators import OperatorRefused, operator_check, operator_for
from calvin.schedules import services
from calvin.schedules.models import ScheduledTask, TaskRun
from calvin.schedules.selectors import with_last_run
from calvin.schedules.specs import TaskChange

EDITABLE = ("prompt", "process_after", "recurrence", "time_zone", "recurrence_policy", "grace_window_seconds", "script")


def _action(verb: str, perform, plan, description: str):
    def run(request, task: ScheduledTask) -> str:
        actor = operator_for(request.user, task.workspace_id)
        operator_check(actor, task.workspace_id)
        outcome = perform(task_id=task.id, actor=actor)
        return f"run {outcome.id} queued" if isinstance(outcome, TaskRun) else outcome.status

    return operator_action(
        name=verb, description=description, verb=verb.capitalize(), plan=plan, perform=run,
        refusals=(OperatorRefused, services.TaskRefused),
    )  # fmt: skip


pause = _action("pause", services.task_pause, lambda t: f"{t.name} stops firing until resumed", "Pause the selected")
resume = _action("resume", services.task_resume, lambda t: f"{t.name} fires again from now on", "Resume the selected")
cancel = _action("cancel", services.task_cancel, lambda t: f"{t.name} never runs again", "Cancel the selected")
run_now = _action("run", services.task_run_now, lambda t: f"{t.name} runs once now", "Run the selected now")


class TaskForm(forms.ModelForm):
    class Meta:
        model = ScheduledTask
        fields = EDITABLE

    def clean(self):
        """The change as the service makes it, tried and rolled back: its refusal is the form's error."""
        cleaned = super().clean()
        changed = {("timezone" if name == "time_zone" else name): cleaned.get(name) for name in self.changed_data}
        try:
            self.change = TaskChange(**{k: v for k, v in changed.items() if v not in (None, "") or k == "script"})
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        try:
            with transaction.atomic():
                services.task_update(task_id=self.instance.id, change=self.change)
                transaction.set_rollback(True)
        except services.TaskRefused as exc:
            raise forms.ValidationError(str(exc)) from None
        return cleaned


@admin.register(ScheduledTask)
class ScheduledTaskAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    tenant_permissions = {"view", "change"}
    form = TaskForm
    list_display = ("name", "agent", "workspace", "status", "recurrence", "process_after", "next_run_at",
                    "consecutive_failures", "last_run")  # fmt: skip
    list_select_related = ("agent", "workspace")
    list_filter = ("status", "recurrence_policy", "workspace")
    search_fields = ("name", "prompt")
    readonly_fields = ("workspace", "agent", "name", "status", "next_run_at", "consecutive_failures", "paused_reason",
                       "session", "created_by", "created_by_session", "created_at", "updated_at")  # fmt: skip
    fields = ("workspace", "agent", "name", "status", *EDITABLE, "next_run_at", "consecutive_failures",
              "paused_reason", "session", "created_by", "created_by_session", "created_at", "updated_at")  # fmt: skip
    actions = [pause, resume, cancel, run_now]

    def get_queryset(self, request):
        return with_last_run(super().get_queryset(request))

    @admin.display(description="last run")
    def last_run(self, task: ScheduledTask) -> str:
        at = getattr(task, "last_run_at", None)
        return f"{task.last_run_status} {at:%Y-%m-%d %H:%M}" if at else "-"

    def has_add_permission(self, request):
        return False  # made with ncl or the API, by a person or (approved) by its agent

    def save_model(self, request, obj, form, change):
        actor = operator_for(request.user, obj.workspace_id)
        operator_check(actor, obj.workspace_id)
        services.task_update(task_id=obj.id, change=form.change, actor=actor)


@admin.register(TaskRun)
class TaskRunAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    workspace_path = "task__workspace"
    list_display = ("task", "scheduled_for", "trigger", "status", "turn_link", "error", "finished_at")
    list_select_related = ("task",)
    list_filter = ("status", "trigger")
    search_fields = ("task__name", "error")
    readonly_fields = ("task", "scheduled_for", "trigger", "status", "turn_link", "error", "created_at", "finished_at")
    exclude = ("turn",)

    @admin.display(description="turn")
    def turn_link(self, run: TaskRun):
        if not run.turn_id:
            return "-"
        return format_html('<a href="{}">turn {}</a>', reverse("admin:agent_sessions_turn_change", args=[run.turn_id]),
                           run.turn_id)  # fmt: skip

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
