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


class HeadCappedHttpTools(HttpToolsProtocol):
    _head_bytes = 0
    _in_head = True

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # Still in the head after parsing this chunk: the head alone is over the cap. (A
        # chunk that ends the head may carry body bytes too; those are not the head's.)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.transport.write(_TOO_LARGE)
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True  # a kept-alive connection's next request starts with a head
        super().on_message_complete()


def uvicorn_config(*, host: str, port: int, **options) -> uvicorn.Config:
    options.setdefault("log_level", "info")
    return uvicorn.Config(
        "calvin.asgi:application", host=host, port=port, lifespan="on", http=HeadCappedHttpTools, **options
    )


def serve(*, host: str, port: int, **options) -> None:
    uvicorn.Server(uvicorn_config(host=host, port=port, **options)).run()
