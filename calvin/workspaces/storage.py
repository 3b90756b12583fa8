"""The storage quota: bytes of files a workspace keeps in Calvin's storage (Quota.storage_mib).

Counted in StorageUsage before the bytes are stored: one conditional UPDATE adds the file's
size only while the sum stays within the quota, so two uploads racing for the last MiB cannot
both pass (the second UPDATE waits for the first's row and re-checks the sum). A copy that is
refused later, or deleted, gives its bytes back.
"""

from django.db import transaction
from django.db.models import BigIntegerField, F, Subquery, Value
from django.db.models.functions import Cast, Coalesce

from calvin.workspaces.models import Quota, StorageUsage
from calvin.workspaces.quotas import PREFIX, quota_default, quota_limit

MIB = 1024 * 1024


def _limit_bytes(workspace_id: int):
    limit = Quota.objects.filter(workspace_id=workspace_id).values("storage_mib")[:1]
    mib = Coalesce(Subquery(limit), Value(quota_default("storage_mib")))
    # In bytes, as a bigint: 10,240 MiB is past a 32-bit integer.
    return Cast(mib, BigIntegerField()) * Value(MIB, output_field=BigIntegerField())


def storage_refusal(*, workspace_id: int, size: int, what: str) -> str:
    limit = quota_limit(workspace_id=workspace_id, field="storage_mib")
    used = StorageUsage.objects.filter(workspace_id=workspace_id).values_list("bytes", flat=True).first() or 0
    return (
        f"{PREFIX}{limit} MiB of stored files ({used / MIB:.1f} MiB used); {what} ({size / MIB:.1f} MiB) "
        "would pass it, so nothing was stored. Delete files or ask an owner to raise storage_mib"
    )


@transaction.atomic
def storage_take(*, workspace_id: int, size: int, what: str = "this file") -> str | None:
    """Count `size` bytes against the quota before they are stored: None when counted, else
    the refusal (nothing counted)."""
    size = max(0, int(size))
    counter = StorageUsage.objects.filter(workspace_id=workspace_id, bytes__lte=_limit_bytes(workspace_id) - size)
    if counter.update(bytes=F("bytes") + size) == 1:
        return None
    StorageUsage.objects.bulk_create([StorageUsage(workspace_id=workspace_id)], ignore_conflicts=True)
    if counter.update(bytes=F("bytes") + size) == 1:
        return None
    return storage_refusal(workspace_id=workspace_id, size=size, what=what)


@transaction.atomic
def storage_give_back(*, workspace_id: int, size: int) -> None:
    """Bytes no longer stored (a refused copy, a deleted file); never below zero."""
    size = max(0, int(size))
    if size:
        StorageUsage.objects.filter(workspace_id=workspace_id, bytes__gte=size).update(bytes=F("bytes") - size)
        StorageUsage.objects.filter(workspace_id=workspace_id, bytes__lt=size).update(bytes=0)


def storage_used(*, workspace_id: int) -> int:
    return StorageUsage.objects.filter(workspace_id=workspace_id).values_list("bytes", flat=True).first() or 0
