"""What a task is made or changed with: one pydantic model each, the API's schema and ncl's flags."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from calvin.schedules.models import ScheduledTask

NAME = r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$"
MAX_PROMPT = 16_000
MAX_SCRIPT = 64 * 1024
MAX_GRACE = 7 * 86400


def _no_nul(value):
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


class TaskChange(BaseModel):
    """The fields a task's owner may change; absent fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | None = Field(None, min_length=1, max_length=MAX_PROMPT, description="What the agent is told to do.")
    process_after: datetime | None = Field(
        None, description="A one-off run at this time (ISO 8601; without an offset, read in the task's time zone)."
    )
    recurrence: str | None = Field(None, max_length=100, description='Five-field cron, e.g. "0 9 * * 1-5".')
    timezone: str | None = Field(None, max_length=64, description="IANA time zone (default: the workspace's).")
    recurrence_policy: ScheduledTask.Policy | None = Field(None, description="What happens to runs missed in downtime.")
    grace_window_seconds: int | None = Field(None, ge=0, le=MAX_GRACE, description="skip-if-missed: how late is late.")
    script: str | None = Field(
        None,
        max_length=MAX_SCRIPT,
        description='Runs first in the sandbox; the agent wakes only if it prints {"wakeAgent": true}.',
    )

    _checked = field_validator("*")(classmethod(lambda cls, value: _no_nul(value)))


class TaskCreate(TaskChange):
    name: str = Field(min_length=1, max_length=64, pattern=NAME, description="Lowercase letters, digits and hyphens.")
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT, description="What the agent is told to do.")
    agent: int | None = Field(None, ge=1, le=2**63 - 1, description="Whose task (default: the calling agent).")
