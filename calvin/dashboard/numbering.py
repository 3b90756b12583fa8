"""Numbering live events: each stream's committed, unnumbered events get the next seqs.

The announcing transaction only inserts its event, unnumbered: it takes no shared lock, so it
neither waits on nor deadlocks with another. Numbering is its own short transaction holding the
streams' counters: seqs have no gaps, and a reader that sees seq n committed sees n-1 too. An
event whose announcer died between its commit and its numbering is numbered by the next caller
for the stream (the next event, a page's catch-up, a socket's periodic look).

On PostgreSQL any number of streams take two statements: one locks their counters (in name
order, so two numberers never deadlock), one numbers and counts. The second is a statement of
its own so that its snapshot is taken after the locks were granted and sees every numbering
committed before; one statement with the locks in it would number from an older snapshot and
leave gaps. Through the ORM this was a dozen queries per stream, more than a tool call's own write.
"""

import json

from django.db import connection, transaction

from calvin.dashboard.models import LiveEvent, LiveStream

EVENTS, STREAMS = LiveEvent._meta.db_table, LiveStream._meta.db_table

_LOCK_SQL = f"""
INSERT INTO {STREAMS} (name, last_seq) SELECT name, 0 FROM unnest(%(streams)s::text[]) AS name ORDER BY name
ON CONFLICT (name) DO UPDATE SET last_seq = {STREAMS}.last_seq
"""

_NUMBER_SQL = f"""
WITH waiting AS (
    SELECT id, stream, row_number() OVER (PARTITION BY stream ORDER BY id) AS n
    FROM {EVENTS} WHERE stream = ANY(%(streams)s) AND seq IS NULL
), numbered AS (
    UPDATE {EVENTS} AS e SET seq = s.last_seq + w.n
    FROM waiting w JOIN {STREAMS} s ON s.name = w.stream WHERE e.id = w.id
    RETURNING e.stream, e.seq, e.kind, e.payload
), counted AS (
    UPDATE {STREAMS} AS s SET last_seq = s.last_seq + c.k
    FROM (SELECT stream, count(*) AS k FROM waiting GROUP BY stream) c WHERE s.name = c.stream
)
SELECT stream, seq, kind, payload FROM numbered ORDER BY stream, seq
"""


def live_streams_number(streams: list[str]) -> list[dict]:
    """Number the streams' waiting events (in the order they were written); their frames, in
    order within each stream. After commit: the caller pushes them."""
    streams = sorted(set(streams))
    if not streams:
        return []
    if connection.vendor != "postgresql":
        return [frame for stream in streams for frame in _number_one_by_orm(stream)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_SQL, {"streams": streams})
        cursor.execute(_NUMBER_SQL, {"streams": streams})
        rows = cursor.fetchall()
    # Django reads jsonb as text (its JSONField decodes it): so does this.
    return [
        {"stream": stream, "seq": seq, "kind": kind, "payload": json.loads(raw) if isinstance(raw, str) else raw}
        for stream, seq, kind, raw in rows
    ]


def _number_one_by_orm(stream: str) -> list[dict]:
    """SQLite (embedded `up`, one writer at a time): no UPDATE in a WITH there."""
    waiting = LiveEvent.objects.filter(stream=stream, seq__isnull=True)
    if not waiting.exists():
        return []
    with transaction.atomic():
        LiveStream.objects.get_or_create(name=stream)
        last = LiveStream.objects.select_for_update().get(name=stream).last_seq
        rows = list(waiting.order_by("id"))
        for offset, row in enumerate(rows, 1):
            row.seq = last + offset
        LiveEvent.objects.bulk_update(rows, ["seq"])
        LiveStream.objects.filter(name=stream).update(last_seq=last + len(rows))
    return [{"stream": stream, "seq": r.seq, "kind": r.kind, "payload": r.payload} for r in rows]
