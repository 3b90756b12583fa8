"""A JSON answer written straight to ASGI, for the middleware in front of /mcp."""

import json


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
