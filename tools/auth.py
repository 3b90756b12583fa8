"""ASGI middleware in front of /mcp: a valid runner token or 401, before any tool runs."""

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from tools.asgi_json import send_json_response
from tools.caller import Caller, caller_for_token

SCOPE_KEY = "calvin.caller"


def _resolve(token: str) -> Caller | None:
    close_old_connections()
    return caller_for_token(token)


resolve_token = sync_to_async(_resolve, thread_sensitive=False)


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
