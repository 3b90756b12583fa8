"""What Calvin keeps about chat platforms beyond the threads themselves: Slack installations,
the OAuth states of installs in progress, the events Slack delivered (for de-duplication), the
ordered outbox of posts waiting for Slack, and the history of the Slack threads Calvin takes
part in (read_thread serves it instead of asking Slack)."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class SlackInstallation(models.Model):
    """The Slack app installed in one Slack team, tied to one Calvin workspace.

    The bot token is sealed by the vault (bound to the workspace and the team), never stored
    in the clear; calvin.chat.slack.installations opens it."""

    workspace = models.OneToOneField(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="slack_installation"
    )
    team_id = models.CharField(max_length=32, unique=True)
    team_name = models.CharField(max_length=200, blank=True, default="")
    enterprise_id = models.CharField(max_length=32, blank=True, default="")
    app_id = models.CharField(max_length=32, blank=True, default="")
    bot_id = models.CharField(max_length=32, blank=True, default="")
    bot_user_id = models.CharField(max_length=32, blank=True, default="")
    bot_scopes = models.TextField(blank=True, default="")
    bot_token_key_id = models.CharField(max_length=16, help_text="Which SP_STORE_KEY sealed the bot token.")
    bot_token_sealed = models.BinaryField()
    installer_slack_user_id = models.CharField(max_length=32, blank=True, default="")
    installed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Made from SLACK_BOT_TOKEN at startup rather than by an OAuth install.
    from_environment = models.BooleanField(default=False)
    installed_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.team_name or self.team_id} → {self.workspace}"


class SlackOAuthState(models.Model):
    """One install in progress: who started it, for which workspace. Consumed once."""

    state = models.CharField(max_length=64, unique=True)
    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"install of {self.workspace_id} by {self.user_id} at {self.created_at:%Y-%m-%d %H:%M}"


class SlackEvent(models.Model):
    """An Events API delivery, kept by `event_id`: a retry or a second web process's copy of
    the same event finds the row and does nothing."""

    class Status(models.TextChoices):
        RECEIVED = "received"
        HANDLED = "handled"
        IGNORED = "ignored"
        FAILED = "failed"

    event_id = models.CharField(max_length=64, unique=True)
    team_id = models.CharField(max_length=32)
    event_type = models.CharField(max_length=64)
    payload = models.JSONField(help_text="The event's inner `event` object.")
    retry_num = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED)
    note = models.CharField(max_length=300, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)
    handled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "received_at"])]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} ({self.status})"


class SlackLane(models.Model):
    """One Slack channel's outbound lane: posts leave one at a time, in the order they were
    made, no faster than Slack takes them (`next_at`). A drainer holds it with a lease."""

    team_id = models.CharField(max_length=32)
    channel_id = models.CharField(max_length=32)
    next_at = models.DateTimeField(null=True, blank=True, help_text="Slack takes the next post no sooner.")
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team_id", "channel_id"], name="slacklane_unique_channel")]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.channel_id}"


class SlackPost(models.Model):
    """One Web API effect waiting in its channel's lane (the outbox). What Slack answered
    (`slack_ts`, `slack_file_id`) is stored the moment it answers, before the post counts as
    sent, so a retry finds it and never posts twice."""

    class Kind(models.TextChoices):
        MESSAGE = "message"  # chat.postMessage: text and/or blocks
        UPDATE = "update"  # chat.update of an earlier post
        REACTION = "reaction"  # reactions.add
        FILE = "file"  # files_upload_v2's three calls

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENDING = "sending"  # handed to Slack; whether it arrived is asked of Slack
        SENT = "sent"
        FAILED = "failed"

    lane = models.ForeignKey(SlackLane, on_delete=models.CASCADE, related_name="posts")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    message = models.ForeignKey(
        "agent_sessions.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="slack_posts"
    )
    tool_call = models.ForeignKey(
        "tools.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="slack_posts"
    )
    part = models.PositiveSmallIntegerField(default=0, help_text="Which piece of a message split for Slack.")
    thread_ts = models.CharField(max_length=32, blank=True, default="")
    payload = models.JSONField(default=dict, help_text="The call's arguments, without the token.")
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    slack_ts = models.CharField(max_length=32, blank=True, default="")
    slack_file_id = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["lane", "id"], name="slackpost_waiting", condition=Q(status__in=["queued", "sending"]))
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"


class SlackThreadHistory(models.Model):
    """One Slack thread as Calvin has seen it: a session's thread, one it posted into, or one
    read_thread read. Its messages are SlackHistoryMessage rows (calvin.chat.slack.history).

    Beside sessions.Message on purpose: Message is the session's transcript (a person's prompt
    without Calvin's mention, only people of the team, an agent's reply as one message however
    Slack split it); this is the thread as Slack shows it, message by message (by ts), every
    author included, for threads that are no session's too.

    Whole when Calvin holds every message from the root on: it recorded from the root
    (`recording_since` <= `thread_ts`), or what conversations.replies gave reaches the moment it
    started recording (`known_through` >= `recording_since`)."""

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    team_id = models.CharField(max_length=32)
    channel_id = models.CharField(max_length=32)
    thread_ts = models.CharField(max_length=32, help_text="The root message's ts.")
    recording_since = models.CharField(
        max_length=32, help_text="Every message of the thread from this ts on is recorded as it comes (events, posts)."
    )
    known_through = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="Every message from the root through this ts is stored (what conversations.replies gave).",
    )
    slack_reply_count = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many replies Slack counted on the root at the last call."
    )
    counted_at = models.CharField(max_length=32, blank=True, default="", help_text="When (as a ts) Slack counted them.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "team_id", "channel_id", "thread_ts"], name="slackthreadhistory_unique_thread"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.channel_id}/{self.thread_ts}"


class SlackHistoryMessage(models.Model):
    """One message of a SlackThreadHistory, as Slack has it (its text as posted, mentions included)."""

    class Source(models.TextChoices):
        EVENT = "event"  # a message event Slack delivered
        POST = "post"  # a post Calvin made (the outbox)
        SLACK = "slack"  # conversations.replies

    history = models.ForeignKey(SlackThreadHistory, on_delete=models.CASCADE, related_name="messages")
    ts = models.CharField(max_length=32)
    user_id = models.CharField(max_length=32, blank=True, default="")
    bot_id = models.CharField(max_length=32, blank=True, default="")
    bot_name = models.CharField(max_length=200, blank=True, default="", help_text="An app's name, as Slack gave it.")
    text = models.TextField(blank=True, default="")
    files = models.JSONField(default=list, blank=True, help_text="The names of the files it carries.")
    source = models.CharField(max_length=8, choices=Source.choices)
    stored_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["history", "ts"], name="slackhistorymessage_unique_ts")]
        indexes = [models.Index(fields=["ts"], name="slackhistorymessage_ts")]

    def __str__(self) -> str:
        return f"{self.history} · {self.ts}"
