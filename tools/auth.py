"""ASGI middleware in front of /mcp: a valid runner token or 401, before any tool runs.

The gate remembers a token it found valid for GATE_SECONDS, in this process, so a tool call
does not step into a thread twice (once for its token, once for its service): every tool call
reads its caller afresh in its service's own thread (tools/adapter.py), so a revoked token's
calls are refused at once and its secrets, pause and session are never stale. What the memory
lets through for those seconds is only what needs no caller but its tool sets: the MCP
handshake, tools/list and the routing to a tool set.
"""

import time
from collections import OrderedDict

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from sessions.tokens import token_digest
from tools.asgi_json import send_json_response
from tools.caller import Caller, caller_by_digest

SCOPE_KEY = "calvin.caller"
GATE_SECONDS = 5.0
GATE_ENTRIES = 10_000

# digest -> (caller, when this process stops trusting it); read and written on the event loop only
_gate: OrderedDict[str, tuple[Caller, float]] = OrderedDict()


def _resolve(digest: str) -> Caller | None:
    close_old_connections()
    return caller_by_digest(digest)


_resolve_in_thread = sync_to_async(_resolve, thread_sensitive=False)


async def resolve_token(token: str) -> Caller | None:
    digest = token_digest(token)
    now = time.monotonic()
    remembered = _gate.get(digest)
    if remembered is not None and remembered[1] > now:
        return remembered[0]
    caller = await _resolve_in_thread(digest)
    if caller is None:
        _gate.pop(digest, None)
        return None
    _gate[digest] = (caller, now + GATE_SECONDS)
    _gate.move_to_end(digest)
    while len(_gate) > GATE_ENTRIES:
        _gate.popitem(last=False)
    return caller


def gate_drop(caller: Caller | None) -> None:
    """Forget this caller's token, so its next request reads it again: after a refusal, which may
    have paused the runner (tools/refusals.py); the check before a call then sees the pause."""
    if caller is not None:
        _gate.pop(caller.token_digest, None)


def gate_forget() -> None:
    """Forget every remembered token (tests that revoke one and expect the handshake refused)."""
    _gate.clear()


def bearer_token(scope) -> str | None:
    """The token of an `Authorization: Bearer` header (HTTP or websocket scope), else None."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _unauthorized(send, detail: str) -> None:
    await send_json_response(
        send,
        401,
        {"error": "unauthorized", "detail": detail},
        headers=[(b"www-authenticate", b'Bearer realm="calvin"')],
    )


class RunnerTokenAuth:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        token = bearer_token(scope)
        if token is None:
            return await _unauthorized(send, "missing bearer token")
        caller = await resolve_token(token)
        if caller is None:
            return await _unauthorized(send, "unknown or revoked token")
        await self.app({**scope, SCOPE_KEY: caller}, receive, send)


def caller_from_context(ctx) -> Caller:
    """The caller the middleware attached to this request's scope."""
    return ctx.request_context.request.scope[SCOPE_KEY]
