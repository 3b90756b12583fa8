"""The preview host's own answers (404, 502, 503...): a short page a person can read, sent
with the preview's origin and nothing of Calvin's (no cookie, no script)."""

import html

STATUS_TEXT = {
    302: "Found",
    400: "Bad Request",
    404: "Not Found",
    413: "Content Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{title}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}}
h1{{font-size:1.4em}}p.code{{color:#777;font-size:.9em}}</style></head>
<body><h1>{title}</h1><p>{text}</p><p class="code">{status} · Calvin preview</p></body></html>
"""


def page_headers(body: bytes, extra=()) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
        (b"x-robots-tag", b"noindex"),
        *extra,
    ]


def page_body(status: int, title: str, text: str) -> bytes:
    return PAGE.format(title=html.escape(title), text=html.escape(text), status=status).encode()


async def page_send(send, status: int, title: str, text: str, extra=()) -> None:
    body = page_body(status, title, text)
    await send({"type": "http.response.start", "status": status, "headers": page_headers(body, extra)})
    await send({"type": "http.response.body", "body": body})


async def redirect_send(send, location: str, extra=()) -> None:
    await page_send(send, 302, "Redirecting", f"Go on to {location}", [(b"location", location.encode()), *extra])
