"""Trees of spawned sessions (Session.parent, set by spawn_thread): where a session sits in its
tree, which sessions the tree holds, and the tree as a thread page shows it.

Each walk is one recursive query (WITH RECURSIVE, which PostgreSQL and SQLite both run), kept
inside one workspace: a parent link never leads into another tenant's sessions.
"""

from django.db import connection
from django.db.models.expressions import RawSQL

from sessions.models import Session

# A spawned session counts as alive while its agent has work: waiting to start or running. An
# idle one (its agent answered, or a person stopped it) costs nothing until someone writes to
# it, and finished or failed ones have ended.
LIVE_STATUSES = (Session.Status.QUEUED, Session.Status.RUNNING)
# No real tree is this deep: the bound ends a walk should a parent link edited by hand (the
# admin's raw id field) make a loop.
MAX_LEVELS = 100


def _table() -> str:
    return connection.ops.quote_name(Session._meta.db_table)


def spawn_lineage(*, session_id: int, workspace_id: int) -> tuple[int, int]:
    """(the id of the session's root, how many levels below it the session is): a session that
    was not spawned is its own root, at level 0."""
    table = _table()
    sql = f"""
        WITH RECURSIVE up (id, parent_id, level) AS (
            SELECT id, parent_id, 0 FROM {table} WHERE id = %s AND workspace_id = %s
            UNION ALL
            SELECT s.id, s.parent_id, up.level + 1 FROM {table} s JOIN up ON s.id = up.parent_id
            WHERE s.workspace_id = %s AND up.level < %s
        )
        SELECT id, level FROM up ORDER BY level DESC LIMIT 1
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id, workspace_id, workspace_id, MAX_LEVELS])
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (session_id, 0)


def spawn_tree_ids(*, root_id: int, workspace_id: int) -> RawSQL:
    """The ids of a root session and of every session spawned under it, as a subquery: use it
    as `id__in=` (or `session_id__in=`) so the tree is read in the same query."""
    table = _table()
    sql = f"""
        WITH RECURSIVE down (id, level) AS (
            SELECT id, 0 FROM {table} WHERE id = %s AND workspace_id = %s
            UNION ALL
            SELECT s.id, down.level + 1 FROM {table} s JOIN down ON s.parent_id = down.id
            WHERE s.workspace_id = %s AND down.level < %s
        )
        SELECT id FROM down
    """
    return RawSQL(sql, (root_id, workspace_id, workspace_id, MAX_LEVELS))


def spawn_tree(*, session: Session) -> dict | None:
    """The tree of spawned threads `session` belongs to, from its root: each node is
    {"session", "status", "current", "children"} with children oldest first. None when the session is
    alone in its tree (neither spawned nor spawning). Two queries, however large the tree."""
    root_id, _ = spawn_lineage(session_id=session.id, workspace_id=session.workspace_id)
    members = list(
        Session.objects.filter(
            workspace_id=session.workspace_id, id__in=spawn_tree_ids(root_id=root_id, workspace_id=session.workspace_id)
        )
        .select_related("thread", "agent")
        .order_by("id")
    )
    if len(members) < 2:
        return None
    children: dict[int, list[Session]] = {}
    for member in members:
        children.setdefault(member.parent_id, []).append(member)
    by_id = {member.id: member for member in members}
    seen: set[int] = set()

    def node(member: Session) -> dict:
        seen.add(member.id)
        kids = [node(kid) for kid in children.get(member.id, []) if kid.id not in seen]
        # As the header says it: a queued session whose agent a person runs waits for that agent.
        external = member.agent is not None and member.agent.provider == "external"
        status = "external" if external and member.status == Session.Status.QUEUED else member.status
        return {"session": member, "status": status, "current": member.id == session.id, "children": kids}

    return node(by_id[root_id])
