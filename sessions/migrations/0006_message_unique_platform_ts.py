"""One Calvin message per platform message in a thread: Slack delivers one mention twice (an
`app_mention` and a `message` event with different event ids), and two workers may take the
pair at once; the inbound worker records the Slack ts on Message.platform_ts."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0005_hosts"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=~Q(platform_ts=""), fields=("thread", "platform_ts"), name="message_unique_platform_ts"
            ),
        ),
    ]
