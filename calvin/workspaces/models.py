"""Tenancy: a workspace, its people, its repositories, its quota and its agents."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Workspace(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    # Set once the Slack app is installed into a Slack workspace (team).
    slack_team_id = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["slack_team_id"],
                condition=~Q(slack_team_id=""),
                name="workspace_unique_slack_team",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Member(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="members")
    # A Slack-only person has no Django login until they sign in to the dashboard.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memberships",
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    slack_user_id = models.CharField(max_length=32, blank=True, default="")
    display_name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user"],
                condition=Q(user__isnull=False),
                name="member_unique_user_per_workspace",
            ),
            models.UniqueConstraint(
                fields=["workspace", "slack_user_id"],
                condition=~Q(slack_user_id=""),
                name="member_unique_slack_user_per_workspace",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or (self.user.get_username() if self.user else self.slack_user_id)

    @property
    def is_admin(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.ADMIN)


class Repository(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="repositories")
    name = models.CharField(max_length=100, help_text="Short name agents use in checkout_repo.")
    full_name = models.CharField(max_length=200, help_text="owner/name")
    clone_url = models.CharField(max_length=500)
    default_branch = models.CharField(max_length=200, default="main")
    # An unpublished repository is listed but checkout_repo refuses it.
    published = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "repositories"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="repository_unique_name"),
            models.UniqueConstraint(fields=["workspace", "full_name"], name="repository_unique_full_name"),
        ]

    def __str__(self) -> str:
        return self.full_name


class Quota(models.Model):
    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="quota")
    concurrent_sessions = models.PositiveIntegerField(default=10)
    tool_calls_per_day = models.PositiveIntegerField(default=10_000)
    storage_mib = models.PositiveIntegerField(default=10_240)

    def __str__(self) -> str:
        return f"Quota for {self.workspace}"


class Agent(models.Model):
    class CliScope(models.TextChoices):
        DISABLED = "disabled"
        GROUP = "group"
        GLOBAL = "global"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    instructions = models.TextField(blank=True, default="")
    # create_agent is approval-gated unless the agent's scope is global.
    cli_scope = models.CharField(max_length=10, choices=CliScope.choices, default=CliScope.GROUP)
    model = models.CharField(max_length=20, default="default")
    apt_packages = models.JSONField(default=list, blank=True)
    npm_packages = models.JSONField(default=list, blank=True)
    # {name: {"command": ..., "args": [...], "env": {...}}}
    mcp_servers = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="created_agents"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="agent_unique_name")]

    def __str__(self) -> str:
        return self.name
