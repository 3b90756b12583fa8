"""uvicorn as Calvin runs it: one place for the server's own limits.

uvicorn's httptools protocol keeps no bound on the request line and headers: a 64 MB
Authorization header was read whole and processed for 6 s before its 401. This protocol
stops reading a request's head at MAX_HEAD_BYTES and answers 431.
"""

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024  # request line + headers; nginx allows 32 KiB by default

_REASON = b"the request line and headers are larger than 64 KiB"
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_REASON), _REASON)
)


class HeadTooLarge(Exception):
    pass


class HeadCappedHttpTools(HttpToolsProtocol):
    _head_bytes = 0
    _in_head = True
    _head_refused = False

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # Still in the head after parsing this chunk, and already over the cap: stop
        # reading now rather than buffer what a slow sender keeps sending.
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._refuse()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        # A head that arrived in one read is measured here, before any app code runs.
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > MAX_HEAD_BYTES:
            self._head_refused = True
            raise HeadTooLarge()  # httptools stops parsing; uvicorn calls send_400_response
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if self._head_refused:
            return self._refuse()
        super().send_400_response(msg)

    def on_message_complete(self) -> None:
        self._in_head = True  # a kept-alive connection's next request starts with a head
        super().on_message_complete()

    def _refuse(self) -> None:
        self.transport.write(_TOO_LARGE)
        self.transport.close()


def uvicorn_config(*, host: str, port: int, **options) -> uvicorn.Config:
    options.setdefault("log_level", "info")
    return uvicorn.Config(
        "calvin.asgi:application", host=host, port=port, lifespan="on", http=HeadCappedHttpTools, **options
    )


def serve(*, host: str, port: int, **options) -> None:
    """uvicorn.run (not Server.run), so that --workers N starts N processes."""
    uvicorn.run("calvin.asgi:application", host=host, port=port, lifespan="on", http=HeadCappedHttpTools, **options)


if __name__ == "__main__":
    # The web process of a scaled deployment: python -m calvin.http_server --host 0.0.0.0 --port 8000
    import argparse

    parser = argparse.ArgumentParser(description="Serve Calvin's gateway (Django, /mcp, /ws/) with uvicorn.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--proxy-headers", action="store_true", help="trust X-Forwarded-* from --forwarded-allow-ips")
    parser.add_argument("--forwarded-allow-ips", default="127.0.0.1")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", action="store_true")
    args = parser.parse_args()
    serve(
        host=args.host,
        port=args.port,
        workers=args.workers,
        proxy_headers=args.proxy_headers,
        forwarded_allow_ips=args.forwarded_allow_ips,
        log_level=args.log_level,
        access_log=not args.no_access_log,
    )
