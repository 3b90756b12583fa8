"""/mcp answers POST only.

The server is stateless JSON: every call is one POST. A GET would open an event stream
that never closes (500 of them were held at once with one token), and a DELETE ends a
session that does not exist, so both get 405 before auth or the SDK see them. (The SDK
itself refuses bodies over 4 MiB with 413.)
"""

from tools.asgi_json import send_json_response

DETAIL = "this server is stateless: POST one JSON-RPC request per call"


class McpPostOnly:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] != "POST":
            return await send_json_response(
                send, 405, {"error": "method_not_allowed", "detail": DETAIL}, headers=[(b"allow", b"POST")]
            )
        return await self.app(scope, receive, send)
