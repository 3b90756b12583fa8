"""Static files for the embedded install (no separate static server), streamed asynchronously.

django.contrib.staticfiles' serve answers a FileResponse whose file is read by a synchronous
iterator; under ASGI Django then warns ("StreamingHttpResponse must consume synchronous
iterators") into `up`'s log on the first static file. The same bytes, read off the event loop.
"""

import asyncio

from django.contrib.staticfiles.views import serve
from django.http import FileResponse


async def _chunks(handle, size: int = 64 * 1024):
    try:
        while chunk := await asyncio.to_thread(handle.read, size):
            yield chunk
    finally:
        handle.close()


def static_serve(request, path: str, **options):
    response = serve(request, path, **options)
    if isinstance(response, FileResponse) and response.file_to_stream is not None:
        response.streaming_content = _chunks(response.file_to_stream)  # headers (length, type) stay
    return response
