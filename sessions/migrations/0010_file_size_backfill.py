"""Message.file_size for files stored before it existed, and each workspace's stored bytes
(StorageUsage) from them, so the storage quota counts what is already there."""

from django.core.files.storage import default_storage
from django.db import migrations
from django.db.models import Sum


def backfill(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    StorageUsage = apps.get_model("workspaces", "StorageUsage")
    for message in Message.objects.filter(kind="file", file_size=0).exclude(file="").iterator():
        try:
            size = default_storage.size(message.file.name)
        except OSError:
            continue  # gone from storage: nothing stored to count
        Message.objects.filter(id=message.id).update(file_size=size)
    totals = Message.objects.filter(kind="file").values("thread__workspace_id").annotate(total=Sum("file_size"))
    for row in totals:
        StorageUsage.objects.update_or_create(
            workspace_id=row["thread__workspace_id"], defaults={"bytes": row["total"] or 0}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0009_usage_spend_storage"),
        ("workspaces", "0008_usage_spend_storage"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
