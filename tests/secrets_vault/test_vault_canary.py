"""A gateway whose SP_STORE_KEY cannot open this database's vault does not start: `manage.py
check` names the problem, and the gateway process exits with it before it serves."""

import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from secrets_vault.canary import vault_canary_problem
from secrets_vault.crypto import new_key, vault_keys
from secrets_vault.models import VaultCanary
from secrets_vault.services import secrets_rotate
from tests.conftest import free_port
from tests.support.celery_processes import ROOT, subprocess_database_url

pytestmark = pytest.mark.django_db


def test_the_first_check_seals_the_canary_and_the_same_keys_open_it(settings):
    assert not VaultCanary.objects.exists()
    call_command("check")
    canary = VaultCanary.objects.get()
    assert canary.key_id == vault_keys()[0].key_id
    call_command("check")  # and again: opened, not written twice
    assert VaultCanary.objects.count() == 1


def test_a_database_restored_without_its_keys_is_refused_by_check(settings):
    call_command("check")
    settings.SP_STORE_KEY = [new_key()]  # the backup came back; its key did not
    with pytest.raises(SystemCheckError, match="SP_STORE_KEY cannot open this database's vault"):
        call_command("check")


def test_rotation_reseals_the_canary_so_the_old_key_can_go(settings):
    call_command("check")
    old = settings.SP_STORE_KEY[0]
    fresh = new_key()
    settings.SP_STORE_KEY = [fresh, old]
    assert secrets_rotate() == 0  # the canary is not counted among the secrets
    settings.SP_STORE_KEY = [fresh]
    assert vault_canary_problem() is None


def test_without_a_vault_there_is_nothing_to_check(settings):
    settings.SP_STORE_KEY = []
    assert vault_canary_problem() is None
    assert not VaultCanary.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_gateway_process_exits_with_the_reason_before_serving(settings):
    call_command("check")  # the canary, sealed with the tests' key (committed)
    environment = {**os.environ, "DATABASE_URL": subprocess_database_url(), "SP_STORE_KEY": new_key()}
    port = free_port()
    gateway = subprocess.run(
        [sys.executable, "-m", "calvin.http_server", "--port", str(port)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gateway.returncode != 0
    assert "SP_STORE_KEY cannot open this database's vault" in gateway.stderr
    assert environment["SP_STORE_KEY"] not in gateway.stderr + gateway.stdout
