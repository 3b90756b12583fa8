"""The ASGI app for preview hosts (docs/previews.md): everything whose Host is under the preview
domain comes here and never reaches Django. Each request is one stream to the preview's port in
the session's sandbox, over its host's connection, spoken as HTTP/1.1 with h11; bodies stream
both ways under the streams' flow control, so nothing large is held."""

import asyncio
import contextlib
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, quote

import h11
from asgiref.sync import sync_to_async
from django.conf import settings

from calvin.previews.access import ACCESS_COOKIE, access_exchange, access_login_url
from calvin.previews.addresses import preview_name_of
from calvin.previews.admission import Admission, preview_admit_async
from calvin.previews.pages import page_send, redirect_send
from calvin.previews.stream_pool import Upstream, stream_pool
from sessions.host_streams import HostStream, StreamLost, StreamRefused

ACCESS_PATH = "/__calvin/access"
# Never passed on, either way (RFC 9110 §7.6.1, and what only this hop means).
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
)
# What the gateway sets itself, whatever a client sent.
OURS = frozenset({b"host", b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto", b"forwarded"})
AGAIN = " Ask the agent in the session's thread to start it again."
REFUSED_TEXT = {
    "not_listening": "Nothing listens on port {port} in the session's sandbox." + AGAIN,
    "not_running": "The session's sandbox is not running now, so neither is the preview's server." + AGAIN,
    "no_sandbox": "The session's host runs agents without a sandbox, and serves no previews.",
    "unknown_session": "The session's host does not have this session.",
    "busy": "The session's host has too many preview connections open; try again shortly.",
}


class BodyTooLarge(Exception):
    pass


def header(scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return ""


def calvin_cookie_names() -> set[str]:
    return {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, ACCESS_COOKIE}


def cookie_value(scope, name: str) -> str:
    for key, value in scope["headers"]:
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key_, _, found = part.strip().partition("=")
                if key_ == name:
                    return found
    return ""


def cookies_without_calvins(value: bytes) -> bytes:
    """The Cookie header with Calvin's own cookies taken out: the preview's server never sees
    a session, CSRF or access cookie, whatever a browser or an operator's cookie domain sent."""
    ours = calvin_cookie_names()
    kept = [part.strip() for part in value.split(b";")]
    kept = [part for part in kept if part and part.split(b"=", 1)[0].strip().decode("latin-1") not in ours]
    return b"; ".join(kept)


def set_cookie_allowed(value: bytes) -> bool:
    """A preview may set host-only cookies of its own; never one with a Domain (it would reach
    other previews or Calvin's own host) nor one named like Calvin's."""
    text = value.decode("latin-1")
    name = text.split("=", 1)[0].strip()
    if name in calvin_cookie_names():
        return False
    attributes = [part.strip().lower() for part in text.split(";")[1:]]
    return not any(attribute.startswith("domain") for attribute in attributes)


def upstream_headers(scope, port: int) -> list[tuple[bytes, bytes]]:
    client = scope.get("client") or ("", 0)
    headers = [
        (b"host", f"localhost:{port}".encode()),  # dev servers refuse hosts they do not know
        (b"x-forwarded-host", header(scope, b"host").encode("latin-1")),
        (b"x-forwarded-proto", scope.get("scheme", "http").encode()),
        (b"x-forwarded-for", str(client[0]).encode()),
    ]
    for key, value in scope["headers"]:
        if key in HOP_BY_HOP or key in OURS:
            continue
        if key == b"cookie":
            value = cookies_without_calvins(value)
            if not value:
                continue
        headers.append((key, value))
    return headers


def response_headers(headers) -> list[tuple[bytes, bytes]]:
    kept = [
        (key, value)
        for key, value in headers
        if key not in HOP_BY_HOP and not (key == b"set-cookie" and not set_cookie_allowed(value))
    ]
    return [*kept, (b"x-robots-tag", b"noindex")]


def head_size(scope) -> int:
    target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    return target + sum(len(key) + len(value) + 4 for key, value in scope["headers"])


def target_of(scope) -> bytes:
    raw = scope.get("raw_path") or quote(scope["path"]).encode()
    query = scope.get("query_string") or b""
    return raw + (b"?" + query if query else b"")


async def admit(scope) -> Admission:
    """The checks every request and upgrade passes, as a verdict ("open" goes on)."""
    name = preview_name_of(header(scope, b"host"))
    if name is None:
        return Admission("bad_host")
    if head_size(scope) > settings.CALVIN_PREVIEW_MAX_REQUEST_HEAD_BYTES:
        return Admission("head_too_large")
    return await preview_admit_async(name=name, access_cookie=cookie_value(scope, ACCESS_COOKIE))


async def refusal_send(send, scope, admission: Admission) -> None:
    verdict, route = admission.verdict, admission.route
    limit = settings.CALVIN_PREVIEW_MAX_REQUEST_HEAD_BYTES
    if verdict == "bad_host":
        await page_send(send, 400, "Not a preview address", "This address does not name a preview.")
    elif verdict == "head_too_large":
        await page_send(send, 431, "Request headers too large", f"The request line and headers exceed {limit} bytes.")
    elif verdict == "missing":
        await page_send(send, 404, "No such preview", "This preview does not exist, or was taken down.")
    elif verdict == "login":
        await redirect_send(send, access_login_url(name=route.name, next_path=target_of(scope).decode("latin-1")))
    elif verdict == "limited":
        retry = [(b"retry-after", str(admission.retry_after).encode())]
        text = f"This preview had more than {settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE} requests this minute."
        await page_send(send, 429, "Too many requests", text, retry)
    elif verdict == "offline":
        host = f"Its host {admission.host_name}" if admission.host_name else "The session's host"
        await page_send(send, 503, "The preview's host is not connected", f"{host} is not connected to Calvin now.")


async def stream_open(admission: Admission) -> HostStream:
    route = admission.route
    return await HostStream.open(
        channel=admission.channel,
        session_id=route.session_id,
        port=route.port,
        timeout=settings.CALVIN_PREVIEW_OPEN_SECONDS,
    )


async def stream_refused_send(send, error: StreamRefused, port: int) -> None:
    if error.reason == "timeout":
        await page_send(send, 503, "The preview's host did not answer", error.text)
        return
    text = REFUSED_TEXT.get(error.reason, error.text or "The preview's server could not be reached.")
    await page_send(send, 502, "The preview's server is not running", text.format(port=port))


async def preview_http(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    admission = await admit(scope)
    if scope["path"] == ACCESS_PATH and admission.verdict in ("login", "open", "limited", "offline"):
        return await access_hand_off(scope, send, admission)
    if admission.verdict != "open":
        return await refusal_send(send, scope, admission)
    declared = header(scope, b"content-length")
    if declared.isdigit() and int(declared) > settings.CALVIN_PREVIEW_MAX_BODY_BYTES:
        return await too_large_send(send)
    bodiless = not declared and not header(scope, b"transfer-encoding")
    # A kept stream the server closed meanwhile is met before any answer: a request that has
    # no body and changes nothing goes again on a new stream.
    retry = bodiless and scope["method"] in ("GET", "HEAD", "OPTIONS")
    route, pool = admission.route, stream_pool()
    while True:
        try:
            upstream = await pool.take(
                channel=admission.channel,
                session_id=route.session_id,
                port=route.port,
                timeout=settings.CALVIN_PREVIEW_OPEN_SECONDS,
            )
        except StreamRefused as error:
            return await stream_refused_send(send, error, route.port)
        try:
            await exchange(scope, receive, send, upstream, route.port, bodiless=bodiless)
        except StaleStream:
            await upstream.stream.close()
            if retry:
                retry = False
                continue
            return await page_send(send, 502, "The preview's server went away", "The connection was lost.")
        except BaseException:
            await upstream.stream.close()
            raise
        await pool.give_back(upstream)
        return


async def too_large_send(send) -> None:
    limit = settings.CALVIN_PREVIEW_MAX_BODY_BYTES
    await page_send(send, 413, "Request body too large", f"A preview takes request bodies of at most {limit} bytes.")


class StaleStream(Exception):
    """A kept-alive stream ended before its server answered anything."""


async def exchange(scope, receive, send, upstream: Upstream, port: int, *, bodiless: bool) -> None:
    """One request and its response over the stream; the request body goes up while the
    response comes down (a server may answer before it has read it all)."""
    stream, connection = upstream.stream, upstream.connection
    headers = upstream_headers(scope, port)
    if header(scope, b"transfer-encoding") and not header(scope, b"content-length"):
        headers.append((b"transfer-encoding", b"chunked"))
    head = connection.send(h11.Request(method=scope["method"], target=target_of(scope), headers=headers))
    if bodiless:
        head += connection.send(h11.EndOfMessage())
    await stream.write(head)
    started = asyncio.Event()
    upload = asyncio.create_task(_departure(receive) if bodiless else _upload(receive, connection, stream))
    download = asyncio.create_task(_download(send, connection, stream, started))
    try:
        done, _ = await asyncio.wait({upload, download}, return_when=asyncio.FIRST_COMPLETED)
        if download in done:
            download.result()
            return
        error = upload.exception()
        if error is None:
            return  # the client went away
        if not isinstance(error, BodyTooLarge):
            raise error
        if not started.is_set():
            await too_large_send(send)
    except (StreamLost, h11.RemoteProtocolError) as error:
        if started.is_set():
            return
        if upstream.reused:
            raise StaleStream() from None
        if isinstance(error, StreamLost):
            await page_send(send, 502, "The preview's server went away", error.text or "The connection was lost.")
        else:
            text = f"The preview's server sent a response Calvin could not read ({error})."
            await page_send(send, 502, "Bad response from the preview's server", text)
    finally:
        for task in (upload, download):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _departure(receive) -> None:
    """For a request without a body: returns when the client leaves (a server-sent events
    stream would otherwise wait for the server forever)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _upload(receive, connection: h11.Connection, stream: HostStream) -> None:
    """The request body, as it arrives, then a watch for the client leaving."""
    size, limit = 0, settings.CALVIN_PREVIEW_MAX_BODY_BYTES
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body = message.get("body", b"")
        size += len(body)
        if size > limit:
            raise BodyTooLarge()
        if body:
            await stream.write(connection.send(h11.Data(data=body)))
        if not message.get("more_body"):
            break
    await stream.write(connection.send(h11.EndOfMessage()))
    await _departure(receive)


async def _download(send, connection: h11.Connection, stream: HostStream, started: asyncio.Event) -> None:
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.read())  # b"": the server closed
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            headers = response_headers(list(event.headers))  # names lowercased by h11
            await send({"type": "http.response.start", "status": event.status_code, "headers": headers})
            started.set()
        elif isinstance(event, h11.Data):
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
        elif isinstance(event, h11.EndOfMessage):
            await send({"type": "http.response.body", "body": b""})
            return
        elif isinstance(event, h11.ConnectionClosed):
            raise StreamLost("closed", "The preview's server closed the connection before it answered.")


async def access_hand_off(scope, send, admission: Admission) -> None:
    """/__calvin/access?token=...&next=/path, from the login on Calvin's origin: the token
    becomes this host's own access cookie (host-only, HttpOnly), and the person goes on."""
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    token = (query.get("token") or [""])[0]
    next_path = (query.get("next") or ["/"])[0]
    if not next_path.startswith("/") or next_path.startswith("//") or "\\" in next_path:
        next_path = "/"
    route = admission.route
    value = await sync_to_async(access_exchange, thread_sensitive=False)(name=route.name, token=token)
    if value is None:
        await page_send(send, 403, "Access link expired", "Open the preview's link again to sign in.")
        return
    cookie = SimpleCookie()
    try:
        cookie[ACCESS_COOKIE] = value
    except CookieError:
        await page_send(send, 403, "Access link expired", "Open the preview's link again to sign in.")
        return
    morsel = cookie[ACCESS_COOKIE]
    morsel["path"], morsel["httponly"], morsel["samesite"] = "/", True, "Lax"
    morsel["max-age"] = settings.CALVIN_PREVIEW_ACCESS_SECONDS
    if scope.get("scheme") == "https":
        morsel["secure"] = True
    await redirect_send(send, next_path, [(b"set-cookie", morsel.OutputString().encode())])
