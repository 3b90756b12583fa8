"""uvicorn as Calvin runs it: one place for the server's own limits.

uvicorn's httptools protocol keeps no bound on the request line and headers: a 64 MB
Authorization header was read whole and processed for 6 s before its 401. This protocol
stops reading a request's head at MAX_HEAD_BYTES and answers 431.

Client addresses: uvicorn's own default trusts X-Forwarded-For and X-Forwarded-Proto from
127.0.0.1, so any client on the machine could choose the address login throttling counts.
Here the socket's peer is the client unless the operator names the proxies in front
(CALVIN_TRUSTED_PROXIES, or --proxy-headers --forwarded-allow-ips), and then the headers
are read only from those peers.
"""

import argparse
import ipaddress

import uvicorn
from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from calvin.private_files import gateway_umask_set, private_modes_ensure

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


def trusted_proxy_list(proxies) -> list[str]:
    """The proxies' addresses or networks, checked: uvicorn would quietly keep a mistyped one
    as a literal that never matches, and "*" would trust every client's headers."""
    entries = [entry.strip() for entry in (proxies.split(",") if isinstance(proxies, str) else proxies)]
    checked = []
    for entry in entries:
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"trusted proxy {entry!r} is not an IP address or network (CIDR): name each proxy in front of"
                ' Calvin, e.g. 10.0.0.5 or 10.0.0.0/24 ("*", trusting every client, is not accepted)'
            ) from None
        checked.append(str(network))  # an address is its one-address network: 10.0.0.5/32
    return checked


def proxy_options(trusted_proxies=None) -> dict:
    """uvicorn's proxy options: off unless proxies are named (None: CALVIN_TRUSTED_PROXIES)."""
    proxies = trusted_proxy_list(settings.CALVIN_TRUSTED_PROXIES if trusted_proxies is None else trusted_proxies)
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies}


def add_proxy_arguments(parser) -> None:
    """--proxy-headers and --forwarded-allow-ips, for calvin.http_server and `manage.py up` alike."""
    parser.add_argument(
        "--proxy-headers",
        action="store_true",
        help="a proxy is in front: take client addresses and schemes from X-Forwarded-For/-Proto, only as"
        " set by the proxies named with --forwarded-allow-ips (or CALVIN_TRUSTED_PROXIES)",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        metavar="ADDRESSES",
        help="the proxies' addresses or networks, comma-separated (needs --proxy-headers)",
    )


def trusted_proxies_from(*, proxy_headers: bool, forwarded_allow_ips: str | None) -> list[str]:
    """The proxies a command line names, else CALVIN_TRUSTED_PROXIES; a ValueError says what is missing."""
    if forwarded_allow_ips is not None and not proxy_headers:
        raise ValueError("--forwarded-allow-ips names proxies to trust with --proxy-headers: add --proxy-headers")
    proxies = trusted_proxy_list(
        settings.CALVIN_TRUSTED_PROXIES if forwarded_allow_ips is None else forwarded_allow_ips
    )
    if proxy_headers and not proxies:
        raise ValueError(
            "--proxy-headers needs the proxies' addresses: --forwarded-allow-ips ADDRESS[,ADDRESS]"
            " (or CALVIN_TRUSTED_PROXIES); without them no forwarded header is trusted"
        )
    return proxies


def uvicorn_config(*, host: str, port: int, trusted_proxies=None, **options) -> uvicorn.Config:
    options.setdefault("log_level", "info")
    return uvicorn.Config(
        "calvin.asgi:application",
        host=host,
        port=port,
        lifespan="on",
        http=HeadCappedHttpTools,
        **proxy_options(trusted_proxies),
        **options,
    )


def serve(*, host: str, port: int, trusted_proxies=None, **options) -> None:
    """uvicorn.run (not Server.run), so that --workers N starts N processes."""
    uvicorn.run(
        "calvin.asgi:application",
        host=host,
        port=port,
        lifespan="on",
        http=HeadCappedHttpTools,
        **proxy_options(trusted_proxies),
        **options,
    )


def main(argv: list[str] | None = None) -> None:
    # The web process of a scaled deployment: python -m calvin.http_server --host 0.0.0.0 --port 8000
    parser = argparse.ArgumentParser(description="Serve Calvin's gateway (Django, /mcp, /ws/) with uvicorn.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    add_proxy_arguments(parser)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", action="store_true")
    args = parser.parse_args(argv)
    try:
        proxies = trusted_proxies_from(proxy_headers=args.proxy_headers, forwarded_allow_ips=args.forwarded_allow_ips)
    except ValueError as problem:
        parser.error(str(problem))
    import django
    from django.core.management import call_command

    django.setup()
    # The system checks first (manage.py check): e.g. a vault key that cannot open this
    # database's secrets stops the gateway here, with the reason, not at the first secret.
    call_command("check")
    gateway_umask_set()  # before uvicorn starts its workers: they inherit it
    private_modes_ensure(
        var_dir=settings.VAR_DIR,
        directories=[settings.MEDIA_ROOT, settings.CALVIN_SESSIONS_DIR, settings.CALVIN_SESSIONS_TMP_DIR],
    )
    serve(
        host=args.host,
        port=args.port,
        workers=args.workers,
        trusted_proxies=proxies,
        log_level=args.log_level,
        access_log=not args.no_access_log,
    )


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")  # as calvin.asgi does
    main()
