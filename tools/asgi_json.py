"""JSON written straight to ASGI for the middleware in front of /mcp: an answer, and the
check of a JSON-RPC request's id."""

import json

import pydantic_core


async def send_json_response(send, status: int, payload: dict, headers=()) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# The SDK's own cap on a request body (it answers 413 past it): a body this long is read
# whole here to be checked; past it, the SDK sees it as it came and refuses it.
MAX_CHECKED_BODY = 4 * 1024 * 1024
INVALID_REQUEST = -32600
BAD_ID = "Invalid Request: the id must be a string or an integer"


def _id_is_valid(message) -> bool:
    """MCP's rule for an id (JSON-RPC's, without null or fractions): a string or an integer.
    A message without an id (a notification) has none to judge."""
    if not isinstance(message, dict) or "id" not in message:
        return True
    value = message["id"]
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class JsonRpcIdCheck:
    """Refuse a JSON-RPC message whose `id` is NaN, Infinity, an object, an array, null, a
    boolean or a fraction, with -32600 Invalid Request (id null, since it cannot be echoed).

    The SDK takes such a message for a notification, answers 202 and drops it, so a client
    that sent a request would wait for an answer that never comes. The body is read here,
    parsed with the SDK's own parser, and handed on unchanged; anything this check cannot
    parse (or too long to read) is left for the SDK to refuse in its own words.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > MAX_CHECKED_BODY or not message.get("more_body", False):
                break
        whole = messages[-1].get("type") == "http.request" and not messages[-1].get("more_body", False)
        if whole and size <= MAX_CHECKED_BODY:
            body = b"".join(m.get("body", b"") for m in messages)
            try:
                parsed = pydantic_core.from_json(body)
            except ValueError:
                parsed = None
            if not _id_is_valid(parsed):
                error = {"code": INVALID_REQUEST, "message": BAD_ID}
                return await send_json_response(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            messages = [{"type": "http.request", "body": body, "more_body": False}]
        return await self.app(scope, _replay(messages, receive), send)


def _replay(messages: list, receive):
    """A receive that gives back what was already read, then reads on."""
    pending = list(messages)

    async def replayed():
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
