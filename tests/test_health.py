"""/healthz and /readyz: real checks against PostgreSQL, Redis and the broker, and real failures
(closed ports, an unapplied migration); nothing secret in any answer."""

import json

import pytest
from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from calvin import health
from tests.conftest import free_port

SECRET_WORD = "pw-very-secret-9"


def body_of(response) -> dict:
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"].startswith("max-age=0")
    return json.loads(response.content)


def assert_nothing_secret(response, *words) -> None:
    text = response.content.decode()
    for word in (SECRET_WORD, "127.0.0.1", "localhost", "redis://", "postgres", "Error", "refused", *words):
        assert word not in text, word


def test_healthz_answers_without_touching_the_database(client):
    # No django_db mark: pytest-django fails any query here.
    response = client.get("/healthz")
    assert response.status_code == 200 and body_of(response) == {"status": "ok"}
    assert client.head("/healthz").status_code == 200


@pytest.mark.django_db
def test_readyz_checks_everything_and_is_ready(client, settings):
    assert settings.REDIS_URL
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = body_of(response)
    assert isinstance(body.pop("workers"), int)  # counted in tests/test_workers.py
    assert body == {
        "status": "ready",
        "checks": {"database": "ok", "redis": "ok", "broker": "ok", "migrations": "ok"},
    }


@pytest.mark.django_db
def test_embedded_without_redis_there_is_no_redis_check(client, settings):
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = "memory://"  # `up` with nothing configured
    response = client.get("/readyz")
    assert response.status_code == 200
    assert body_of(response)["checks"] == {"database": "ok", "broker": "ok", "migrations": "ok"}


@pytest.mark.django_db
def test_an_unreachable_redis_is_named_and_nothing_secret_is_said(client, settings):
    settings.REDIS_URL = f"redis://:{SECRET_WORD}@127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = body_of(response)
    assert body["status"] == "not ready" and body["checks"]["redis"] == "unreachable"
    assert body["checks"]["database"] == "ok" and body["checks"]["broker"] == "ok"
    assert_nothing_secret(response)


@pytest.mark.django_db
def test_an_unreachable_broker_is_named(client, settings):
    settings.CELERY_BROKER_URL = f"redis://:{SECRET_WORD}@127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body_of(response)["checks"]["broker"] == "unreachable"
    assert_nothing_secret(response)


@pytest.mark.django_db
def test_an_unreachable_database_is_named_and_migrations_are_unchecked(client, monkeypatch):
    broken = {**connection.settings_dict, "PASSWORD": SECRET_WORD, "PORT": str(free_port()), "NAME": "calvin_prod"}
    monkeypatch.setitem(connections.settings, "broken", broken)
    monkeypatch.setattr(health, "DATABASE_ALIAS", "broken")
    try:
        response = client.get("/readyz")
    finally:
        connections["broken"].close()
        del connections["broken"]
    assert response.status_code == 503
    assert body_of(response)["checks"] == {
        "database": "unreachable",
        "redis": "ok",
        "broker": "ok",
        "migrations": "unchecked",
    }
    assert_nothing_secret(response, "calvin_prod")


@pytest.mark.django_db
def test_an_unapplied_migration_is_named(client):
    recorder = MigrationRecorder(connection)
    applied = recorder.applied_migrations()
    last_audit = max(name for app, name in applied if app == "audit")
    recorder.record_unapplied("audit", last_audit)  # rolled back with the test's transaction
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body_of(response)["checks"]["migrations"] == "unapplied"


def test_probes_take_get_and_head_only():
    client = Client()  # the test client skips CSRF checks: the method alone is refused
    assert client.post("/healthz").status_code == 405
    assert client.put("/readyz").status_code == 405


def test_probes_are_not_redirected_to_https(settings):
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/accounts/login/").status_code == 301  # everything else is


def test_probes_answer_whatever_the_host_header_says():
    client = Client(HTTP_HOST="10.1.2.3:8000")  # an orchestrator probing the pod's address
    assert client.get("/healthz").status_code == 200
    assert client.get("/accounts/login/").status_code == 400  # every other page checks ALLOWED_HOSTS
