"""Scheduled tasks (seed 002's `ncl tasks`): a prompt for an agent, once or on a cron, and its runs.

A run is claimed by inserting its (task, scheduled_for) row: the unique constraint lets one
beat process, or one retry after a crash, fire a slot; every other insert loses."""

from django.db import models
from django.db.models import Q


class ScheduledTask(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        CANCELLED = "cancelled"
        DONE = "done"  # a one-off task that has fired

    class Policy(models.TextChoices):
        CATCH_UP_LATEST = "catch-up-latest", "catch-up-latest: after downtime, run once"
        CATCH_UP_ALL = "catch-up-all", "catch-up-all: run each missed period, oldest first (at most 24)"
        SKIP_IF_MISSED = "skip-if-missed", "skip-if-missed: drop runs later than the grace window"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="scheduled_tasks")
    agent = models.ForeignKey("workspaces.Agent", on_delete=models.CASCADE, related_name="scheduled_tasks")
    name = models.CharField(max_length=64)
    prompt = models.TextField()
    process_after = models.DateTimeField(null=True, blank=True, help_text="A one-off task: when it runs.")
    recurrence = models.CharField(max_length=100, blank=True, default="", help_text="Five-field cron, in time_zone.")
    time_zone = models.CharField(max_length=64)
    recurrence_policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.CATCH_UP_LATEST)
    grace_window_seconds = models.PositiveIntegerField(default=600)
    script = models.TextField(blank=True, default="", help_text="Runs first; the agent wakes only on wakeAgent.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    next_run_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    paused_reason = models.CharField(max_length=300, blank=True, default="")
    # Its runs' turns go to a session of its own (a web thread named after it), made at its first run.
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The agent session that asked for it (through ncl), if an agent did.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="scheduled_task_unique_name"),
            models.CheckConstraint(
                condition=(Q(process_after__isnull=False) & Q(recurrence=""))
                | (Q(process_after__isnull=True) & ~Q(recurrence="")),
                name="scheduled_task_once_or_recurring",
            ),
        ]
        indexes = [models.Index(fields=["status", "next_run_at"])]

    def __str__(self):
        return self.name

    @property
    def recurring(self) -> bool:
        return bool(self.recurrence)

    def may_be_changed_by(self, member) -> bool:
        """Its maker, or the workspace's owners and admins."""
        return member.workspace_id == self.workspace_id and (member.is_admin or self.created_by_id == member.id)


class TaskRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        SKIPPED = "skipped"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        CATCH_UP = "catch-up"
        MANUAL = "manual"

    task = models.ForeignKey(ScheduledTask, on_delete=models.CASCADE, related_name="runs")
    scheduled_for = models.DateTimeField()
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    turn = models.ForeignKey("agent_sessions.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "scheduled_for"], name="task_run_one_per_slot")]

    def __str__(self):
        return f"{self.task_id} @ {self.scheduled_for:%Y-%m-%d %H:%M}"
