"""/mcp answers POST only.

The server is stateless JSON: every call is one POST. A GET would open an event stream
that never closes (500 of them were held at once with one token), and a DELETE ends a
session that does not exist, so both get 405 before auth or the SDK see them. (The SDK
itself refuses bodies over 4 MiB with 413.)
"""

import json

_BODY = json.dumps(
    {"error": "method_not_allowed", "detail": "this server is stateless: POST one JSON-RPC request per call"}
).encode()


class McpPostOnly:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] != "POST":
            await send(
                {
                    "type": "http.response.start",
                    "status": 405,
                    "headers": [
                        (b"allow", b"POST"),
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_BODY)).encode()),
                    ],
                }
            )
            return await send({"type": "http.response.body", "body": _BODY})
        return await self.app(scope, receive, send)
