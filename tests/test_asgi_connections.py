"""calvin/asgi.py closes a request's database connections as the request ends (its thread's)."""

import asyncio

import pytest
from django.db import connection

from calvin import asgi

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_request_threads_connection_is_closed_as_the_request_ends():
    connection.ensure_connection()
    asgi._close_request_connections()
    assert connection.connection is None


def test_on_an_event_loops_thread_it_leaves_connections_be(monkeypatch):
    """Django's test client ends a streamed body on the event loop (CI met it after a test had
    opened a connection there): no request's thread is there, and closing a connection from a
    running loop raises SynchronousOnlyOperation."""

    async def request_ends():
        with monkeypatch.context() as allowed:
            allowed.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            connection.ensure_connection()  # as an earlier test on this loop's context left one
        asgi._close_request_connections()
        return connection.connection

    assert asyncio.run(request_ends()) is not None
