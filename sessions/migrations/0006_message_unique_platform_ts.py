"""One Calvin message per platform message in a thread.

Slack delivers one mention twice (an `app_mention` and a `message` event, different event
ids); the inbound worker records the Slack ts on Message.platform_ts, and this index makes
the pair, or two workers taking it at once, insert one row.

Database only, on purpose: the constraint is not (yet) declared in Message.Meta, and a
state operation here would make `makemigrations` generate its removal. To declare it there,
add the same UniqueConstraint to Message.Meta.constraints and a state-only migration."""

from django.db import migrations, models
from django.db.models import Q

CONSTRAINT = models.UniqueConstraint(
    fields=["thread", "platform_ts"], condition=~Q(platform_ts=""), name="message_unique_platform_ts"
)


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0005_hosts"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AddConstraint(model_name="message", constraint=CONSTRAINT)],
            state_operations=[],
        )
    ]
