"""A runner's host is the Host row that started it, no longer a name (a host of another
workspace named "localhost" revoked every issued runner). The names cannot be attributed to
host rows (a name says nothing about which row made the runner), so existing runners get
none: a host's next turn for such a session starts a new generation there."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0006_message_unique_platform_ts"),
    ]

    operations = [
        migrations.RemoveField(model_name="runner", name="host"),
        migrations.AddField(
            model_name="runner",
            name="host",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="runners",
                to="agent_sessions.host",
            ),
        ),
    ]
