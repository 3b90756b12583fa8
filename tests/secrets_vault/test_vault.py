"""Secrets: ciphertext only, bound to their place, rotated without loss, failing closed."""

import pytest
from django.core.management import call_command

from secrets_vault import crypto
from secrets_vault.models import Secret
from secrets_vault.services import secret_set, session_secret_values
from sessions.services import session_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(workspace):
    return session_start(workspace=workspace, title="vault")


@pytest.fixture
def key(settings):
    settings.SP_STORE_KEY = [crypto.new_key()]
    return settings.SP_STORE_KEY[0]


def test_only_ciphertext_is_stored(session, key):
    secret = secret_set(session=session, name="API_KEY", value="s3cr3t-value")
    row = Secret.objects.get(id=secret.id)
    assert b"s3cr3t-value" not in bytes(row.ciphertext)
    assert session_secret_values(session_id=session.id, workspace_id=session.workspace_id) == ["s3cr3t-value"]


def test_a_copied_row_does_not_decrypt_elsewhere(session, key, workspace):
    secret = secret_set(session=session, name="API_KEY", value="s3cr3t-value")
    other = session_start(workspace=workspace, title="other")
    Secret.objects.create(
        workspace=workspace, session=other, name="API_KEY", ciphertext=secret.ciphertext, key_id=secret.key_id
    )
    with pytest.raises(crypto.VaultCorrupt):
        session_secret_values(session_id=other.id, workspace_id=workspace.id)
    renamed = Secret.objects.get(id=secret.id)
    renamed.name = "OTHER"
    renamed.save()
    with pytest.raises(crypto.VaultCorrupt):
        session_secret_values(session_id=session.id, workspace_id=workspace.id)


def test_no_key_means_no_vault(session, settings):
    settings.SP_STORE_KEY = []
    assert not crypto.vault_available()
    with pytest.raises(crypto.VaultUnavailable):
        secret_set(session=session, name="X", value="y-value")


def test_rotation_reencrypts_under_the_new_first_key(session, key, settings):
    secret_set(session=session, name="A", value="value-a")
    new = crypto.new_key()
    settings.SP_STORE_KEY = [new, key]
    call_command("rotate_secrets")
    settings.SP_STORE_KEY = [new]  # the old key can now be dropped
    assert session_secret_values(session_id=session.id, workspace_id=session.workspace_id) == ["value-a"]


def test_workspace_secrets_count_for_every_session(session, key, workspace):
    key_id, ciphertext = crypto.encrypt(workspace_id=workspace.id, session_id=None, name="ORG", value="org-wide")
    Secret.objects.create(workspace=workspace, name="ORG", key_id=key_id, ciphertext=ciphertext)
    assert session_secret_values(session_id=session.id, workspace_id=workspace.id) == ["org-wide"]


def test_a_ciphertext_copied_to_another_workspace_does_not_decrypt(key, workspace, django_user_model):
    from calvin.workspaces.services import workspace_create
    from secrets_vault.services import secret_put

    original = secret_put(workspace_id=workspace.id, name="ORG", value="acme-org-wide")
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    Secret.objects.create(workspace=globex, name="ORG", ciphertext=original.ciphertext, key_id=original.key_id)
    globex_session = session_start(workspace=globex, title="globex")
    with pytest.raises(crypto.VaultCorrupt, match="secret ORG does not decrypt in this place") as caught:
        session_secret_values(session_id=globex_session.id, workspace_id=globex.id)
    assert "acme-org-wide" not in str(caught.value)


def test_a_wrong_key_fails_closed_naming_the_secret(session, key, settings):
    secret = secret_set(session=session, name="API_KEY", value="s3cr3t-value")
    other = crypto.new_key()
    settings.SP_STORE_KEY = [other]
    with pytest.raises(crypto.VaultUnavailable, match="secret API_KEY is not configured"):
        session_secret_values(session_id=session.id, workspace_id=session.workspace_id)
    # A key claiming the stored key's id (a tampered row) does not decrypt it either.
    Secret.objects.filter(id=secret.id).update(key_id=crypto.vault_keys()[0].key_id)
    with pytest.raises(crypto.VaultCorrupt) as caught:
        session_secret_values(session_id=session.id, workspace_id=session.workspace_id)
    assert "s3cr3t-value" not in str(caught.value)


def test_a_secret_is_never_put_at_a_place_of_another_workspace(key, workspace, django_user_model):
    from django.core.exceptions import ValidationError

    from calvin.workspaces.services import agent_create, workspace_create
    from secrets_vault.services import secret_put

    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    globex_agent = agent_create(workspace=globex, name="globex-agent")
    globex_session = session_start(workspace=globex, title="globex")
    with pytest.raises(ValidationError, match="agent is not in this workspace"):
        secret_put(workspace_id=workspace.id, agent_id=globex_agent.id, name="X_KEY", value="value-123")
    with pytest.raises(ValidationError, match="session is not in this workspace"):
        secret_put(workspace_id=workspace.id, session_id=globex_session.id, name="X_KEY", value="value-123")
    assert not Secret.objects.exists()
