"""Where hosts fetch agents' inbox files: the host's token as Bearer, never a person's login.

    GET  /hosts/inbox-files/<id>/            the bytes, streamed
    POST /hosts/inbox-files/<id>/delivered/  the host wrote them into the agent's directory

Anything but a live host that holds a session of the file's agent gets the same bare 404, so
a token or an id learns nothing about files it may not have.
"""

import asyncio

from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseNotAllowed, HttpResponseNotFound, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from tools.inbox_selectors import inbox_file_for_host
from tools.services.inbox_files import inbox_file_delivered

CHUNK = 256 * 1024


def _bearer(request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _not_found() -> HttpResponse:
    return HttpResponseNotFound("not found\n", content_type="text/plain")


async def _chunks(handle):
    """An async body: uvicorn streams a 100 MiB file rather than Django buffering it whole."""
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()


def _open(file_id: int, token: str):
    found = inbox_file_for_host(token=token, file_id=file_id)
    if found is None:
        return None
    _host, file = found
    try:
        return file.file.open("rb"), file.size
    except FileNotFoundError:
        return None


# No cookie is ever read here (a person's session gives nothing), so there is no CSRF to guard.
@csrf_exempt
async def inbox_file_download(request, file_id: int):
    if request.method != "GET":
        return HttpResponseNotAllowed(["GET"])
    opened = await sync_to_async(_open)(file_id, _bearer(request))
    if opened is None:
        return _not_found()
    handle, size = opened
    response = StreamingHttpResponse(_chunks(handle), content_type="application/octet-stream")
    response["Content-Length"] = str(size)
    response["Cache-Control"] = "no-store"
    return response


def _delivered(file_id: int, token: str) -> bool:
    found = inbox_file_for_host(token=token, file_id=file_id)
    if found is None:
        return False
    host, file = found
    inbox_file_delivered(host=host, file=file)
    return True


@csrf_exempt
async def inbox_file_delivered_view(request, file_id: int):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not await sync_to_async(_delivered)(file_id, _bearer(request)):
        return _not_found()
    return HttpResponse(status=204)
