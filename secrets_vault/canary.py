"""The vault's canary: proof at start-up that SP_STORE_KEY opens this database's secrets.

A database restored from a backup without its keys (or a gateway given the wrong key) would
otherwise start, serve, and fail on every secret. The first gateway with a key seals a known
text; every later start opens it, and `manage.py check` (which the gateway runs before it
serves) refuses to go on when it cannot.
"""

from pathlib import Path

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from secrets_vault import crypto
from secrets_vault.models import VaultCanary

CANARY_TEXT = "calvin-vault-canary"
# Workspace 0 is no workspace: the canary's binding cannot be a secret's.
_PLACE = {"workspace_id": 0, "session_id": None, "name": "vault-canary"}


def _seal() -> tuple[str, bytes]:
    return crypto.encrypt(**_PLACE, value=CANARY_TEXT)


@transaction.atomic
def vault_canary_problem() -> str | None:
    """None when the keys open the canary (writing it first if the database has none); else why not."""
    if not crypto.vault_available():
        return None  # no vault: request_secret says so itself, and nothing sealed can be lost
    canary = VaultCanary.objects.select_for_update().order_by("id").first()
    if canary is None:
        key_id, ciphertext = _seal()
        VaultCanary.objects.create(key_id=key_id, ciphertext=ciphertext)
        return None
    try:
        opened = crypto.decrypt(**_PLACE, key_id=canary.key_id, ciphertext=bytes(canary.ciphertext))
    except (crypto.VaultUnavailable, crypto.VaultCorrupt):
        opened = None
    if opened == CANARY_TEXT:
        return None
    return (
        f"SP_STORE_KEY cannot open this database's vault (it was sealed with key {canary.key_id}, which is not"
        " among the configured keys, or that key is wrong). A database restored without its vault keys cannot"
        " decrypt its secrets: set SP_STORE_KEY to the keys that were in use (the first one encrypts)."
    )


def vault_canary_reseal() -> int:
    """Rotation (secrets_rotate) seals the canary again under the first key, so the old key can go.
    Returns 0: the canary is not a secret, and the count people read is of theirs."""
    keys = crypto.vault_keys()
    if keys and VaultCanary.objects.exclude(key_id=keys[0].key_id).exists():
        key_id, ciphertext = _seal()
        VaultCanary.objects.update(key_id=key_id, ciphertext=ciphertext)
    return 0


def vault_canary_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """System check: an Error when the keys cannot open the canary. A database that cannot be read
    yet (not migrated, not reachable) is left to `migrate` and /readyz."""
    database = connections[DEFAULT_DB_ALIAS].settings_dict
    if database["ENGINE"].endswith("sqlite3") and not Path(str(database["NAME"])).exists():
        return []  # a laptop's first `up`: a query here would create the file before `up` checks its options
    try:
        problem = vault_canary_problem()
    except DatabaseError:
        return []
    return [checks.Error(problem, id="secrets_vault.E001")] if problem else []
