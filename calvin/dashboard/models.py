"""The live-event log: what open pages are told, sequenced per stream (a thread, a workspace).

A page remembers the last seq it applied; after a reconnect, or when a pushed seq skips one,
it asks for exactly the events after it. So a push that never arrived (Redis restarted, a
worker killed between commit and push) is caught up from here, never lost.
"""

from django.db import models


class LiveStream(models.Model):
    """One counter per stream (`thread:<id>`, `workspace:<id>`): the seq of its latest event."""

    name = models.CharField(max_length=40, primary_key=True)
    last_seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} @{self.last_seq}"


class LiveEvent(models.Model):
    """An event as a page needs it: ids and statuses only (pages render from the database)."""

    stream = models.CharField(max_length=40)
    seq = models.BigIntegerField(null=True)  # None until numbered, just after its transaction commits
    kind = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stream", "seq"], name="live_event_stream_seq")]

    def __str__(self) -> str:
        return f"{self.stream}#{self.seq} {self.kind}"
