"""What every tool service does: check outbound content for secrets, record the call."""

import logging
import threading
from collections import OrderedDict

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection, transaction

from secrets_vault.crypto import VaultCorrupt, VaultUnavailable
from secrets_vault.scanner import SecretScanner, scanner_for
from secrets_vault.services import session_secret_pairs
from tools import dispatcher
from tools.caller import Caller, caller_has_secrets
from tools.changes import tool_call_changed, tool_call_recorded_live_rows, tool_call_recorded_live_written
from tools.errors import ToolRefused
from tools.limits import tool_call_count_and_insert
from tools.models import ToolCall

log = logging.getLogger(__name__)
NO_SECRETS = scanner_for([])


# (workspace, session, agent, secrets version) -> the scanner: most calls of a
# session find their secrets unchanged, and reading and decrypting them cost more than the
# rest of the call (bench/). Safe per process: the caller's query reads count and latest
# set_at on every call, so a secret set, replaced or deleted through any web process or
# worker is seen by the next call in every process (secrets_vault.services._next_set_at
# keeps a replaced value's set_at the latest, whatever the writer's clock).
_SCANNERS: OrderedDict[tuple, SecretScanner] = OrderedDict()
_SCANNERS_LOCK = threading.Lock()
MAX_CACHED_SCANNERS = 512


def secret_scanner_for(caller: Caller) -> SecretScanner:
    """What outbound content of this caller is checked against: every secret in the
    session's scope (workspace, agent, session), their encoded forms included."""
    if not caller_has_secrets(caller):
        return NO_SECRETS
    key = (caller.workspace_id, caller.session_id, caller.agent_id, caller.secrets_version)
    with _SCANNERS_LOCK:
        scanner = _SCANNERS.get(key)
        if scanner is not None:
            _SCANNERS.move_to_end(key)
            return scanner
    try:
        pairs = session_secret_pairs(
            session_id=caller.session_id, workspace_id=caller.workspace_id, agent_id=caller.agent_id
        )
    except (VaultUnavailable, VaultCorrupt) as exc:
        # Fail closed: content we cannot check for secrets is not sent.
        raise ToolRefused(f"cannot check this content against the session's secrets: {exc}") from exc
    scanner = SecretScanner(pairs)
    with _SCANNERS_LOCK:
        _SCANNERS[key] = scanner
        while len(_SCANNERS) > MAX_CACHED_SCANNERS:
            _SCANNERS.popitem(last=False)
    return scanner


def refuse_secrets(*, what: str, secrets: SecretScanner, content: str) -> None:
    """The one outbound check: every tool's content, before anything is sent or stored.

    The refusal names the secret, never its value."""
    name = secrets.find(content)
    if name is not None:
        raise ToolRefused(f"{what} contains the value of the secret {name} (plain or encoded); nothing was sent")


def refusal_redacted(caller: Caller, text: str) -> str:
    """A refusal's text with every secret in scope (and its encodings) redacted."""
    try:
        return secret_scanner_for(caller).redact(text)
    except ToolRefused as exc:  # the secrets cannot be read: neither can the text be checked
        return f"the call was refused, and its reason cannot be shown: {exc}"


def strings_in(value) -> list[str]:
    """Every string inside a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings_in(v)]
    return []


def tool_call_record(
    *,
    caller: Caller,
    tool: str,
    arguments: dict,
    payload: dict,
    secrets: SecretScanner,
    file_name: str = "",
    server: str = ToolCall.Server.CALVIN,
    status: str = ToolCall.Status.PENDING,
) -> ToolCall:
    """Count the call against the runner's limit (for tools that have one) and the
    workspace's tool calls of the day, and write the outbox row: all or nothing.

    Nothing a tool stores may hold a secret in the clear, so every string of the arguments
    and the payload is checked here, whatever the tool checked before (`secrets` is
    required so that no tool can forget it). A pending call is announced to the workers once
    that is committed; any other status (awaiting approval, applied) announces nothing.
    """
    refuse_secrets(what=f"an argument of {tool}", secrets=secrets, content="\n".join(strings_in([arguments, payload])))
    call = ToolCall(
        session_id=caller.session_id,
        runner_id=caller.runner_id,
        tool=tool,
        arguments=arguments,
        payload=payload,
        file=file_name,
        server=server,
        status=status,
    )
    pending = status == ToolCall.Status.PENDING
    counted = {"row": call, "workspace_id": caller.workspace_id, "runner_id": caller.runner_id, "tool": tool}
    ids = {"workspace_id": caller.workspace_id, "thread_id": caller.thread_id}
    live = tool_call_recorded_live_rows(call, status, **ids) if dispatcher.supported() else None
    if live is not None:
        # One statement counts the call, inserts it, writes its live event and wakes the workers:
        # one round trip and one commit, so the workspace's day row is locked only inside the
        # server (bench/README.md).
        tool_call_count_and_insert(**counted, notify=dispatcher.CHANNEL if pending else "", live=live)
        tool_call_recorded_live_written(live)
        return call
    with transaction.atomic(savepoint=False):  # the embedded SQLite: the same, in a few statements
        tool_call_count_and_insert(**counted)
        tool_call_changed(call, status, **ids)
    if pending:
        transaction.on_commit(lambda: effect_announce(call.id))
    return call


def effect_announce(tool_call_id: int) -> None:
    """Tell the workers a pending call is there. On PostgreSQL a notification their dispatchers
    LISTEN for (sent with the current transaction's commit, if there is one); elsewhere the
    Celery task, published in the request's thread (from a background thread it measured
    slower: it contends for the GIL with the event loop; bench/).

    Neither is retried: the row is committed and pending, so a lost announcement is not lost
    work; the dispatchers look every few seconds anyway, and the sweep re-queues what waits.
    """
    from tools.tasks import apply_tool_call

    try:
        if dispatcher.supported():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, '')", [dispatcher.CHANNEL])
        else:
            apply_tool_call.apply_async((tool_call_id,), retry=False)
    except Exception:
        log.warning("could not announce tool call %s now; the sweep will", tool_call_id, exc_info=True)


def off_loop(fn):
    """`fn` as a coroutine function run in a pooled thread with a usable database connection:
    for async services (git work, waits) that step off the event loop for their reads and
    writes. Not thread-sensitive: calls run side by side, each on its own connection."""

    def run(**kwargs):
        close_old_connections()  # a pooled thread outside Django's request cycle
        return fn(**kwargs)

    return sync_to_async(run, thread_sensitive=False)
