"""Requests to Django's views do not leave database connections behind: under ASGI each runs
in a thread of its own, and a connection kept past its request outlived that thread (one per
request, until PostgreSQL refused new clients)."""

import httpx2
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def open_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_a_hundred_requests_leave_no_connection_open(gateway, person):
    person.get("/me")  # the gateway's first request may open what it keeps (the test's own is one)
    before = open_connections()
    with httpx2.Client(base_url=person.base, headers={"Authorization": f"Bearer {person.token}"}) as http:
        for _ in range(100):
            assert http.get("/sessions").status_code == 200
        assert http.get(gateway.removesuffix("/") + "/healthz").status_code in (200, 503)
    assert open_connections() <= before + 1, (before, open_connections())
