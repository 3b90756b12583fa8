"""Rotating the vault key from the admin: superusers only, a page counting what is sealed under
which key, then one POST (with CSRF) re-encrypting every secret under the first key of
SP_STORE_KEY, recorded as one vault.rotate event without a workspace and without a value."""

import pytest
from django.test import Client

from calvin.audit.models import AuditEvent
from secrets_vault import crypto
from secrets_vault.crypto import new_key
from secrets_vault.models import Secret
from secrets_vault.services import secret_set_for_workspace, session_secret_values
from tests.admin.conftest import flat, session_in

pytestmark = pytest.mark.django_db

ROTATE = "/admin/secrets_vault/secret/rotate/"


@pytest.fixture
def root_client(django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def older_secret(settings, workspace):
    """A secret sealed under an old key, and SP_STORE_KEY with a new key put in front."""
    old, new = new_key(), new_key()
    settings.SP_STORE_KEY = [old]
    secret = secret_set_for_workspace(workspace_id=workspace.id, name="API_TOKEN", value="s3cr3t-value-123")
    settings.SP_STORE_KEY = [new, old]
    return secret


def test_a_superuser_sees_the_counts_then_rotates(root_client, older_secret, workspace, settings):
    first = crypto.vault_keys()[0].key_id
    page = flat(root_client.get("/admin/secrets_vault/secret/"))
    assert f'href="{ROTATE}"' in page
    page = flat(root_client.get(ROTATE))
    assert "Rotate the vault key" in page and first in page
    assert "<td>Secrets (every workspace)</td><td>0</td><td>1</td>" in page
    assert Secret.objects.get(id=older_secret.id).key_id != first  # asked, not done
    page = flat(root_client.post(ROTATE, follow=True))
    assert f"Vault key rotated: 1 secret(s) and Slack bot token(s) re-encrypted under key {first}" in page
    assert Secret.objects.get(id=older_secret.id).key_id == first
    settings.SP_STORE_KEY = settings.SP_STORE_KEY[:1]  # the old key removed: the value still opens
    session = session_in(workspace)
    assert "s3cr3t-value-123" in session_secret_values(session_id=session.id, workspace_id=workspace.id)
    event = AuditEvent.objects.get(verb="vault.rotate")
    assert event.workspace_id is None and event.actor_label == "root"
    assert event.changes == {"key_id": [None, first], "under_older_keys": [1, 0]}
    assert "s3cr3t" not in str(event.changes)


def test_a_workspace_owner_neither_sees_nor_reaches_it(owner_client, older_secret):
    assert f'href="{ROTATE}"' not in flat(owner_client.get("/admin/secrets_vault/secret/"))
    assert owner_client.get(ROTATE).status_code == 403
    assert owner_client.post(ROTATE).status_code == 403
    assert Secret.objects.get(id=older_secret.id).key_id != crypto.vault_keys()[0].key_id
    assert not AuditEvent.objects.filter(verb="vault.rotate").exists()


def test_the_rotation_needs_its_csrf_token(django_user_model, older_secret):
    root = django_user_model.objects.create_superuser("root2", "root2@example.com", "pw-root-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    assert client.post(ROTATE).status_code == 403
    assert Secret.objects.get(id=older_secret.id).key_id != crypto.vault_keys()[0].key_id
