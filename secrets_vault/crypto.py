"""AES-GCM with keys from SP_STORE_KEY. Only the vault's services call this module.

Each ciphertext is bound to its workspace, its place (session or agent) and name (as associated data), so a
row copied to another workspace or renamed does not decrypt. Keys are 32 bytes, urlsafe
base64; the first key encrypts and every key decrypts, so keys rotate without downtime.
"""

import base64
import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

NONCE_BYTES = 12


class VaultUnavailable(Exception):
    """No SP_STORE_KEY is configured, or a secret's key is no longer configured."""


class VaultCorrupt(Exception):
    """A ciphertext does not decrypt under its key and binding."""


@dataclass(frozen=True)
class VaultKey:
    key_id: str
    aead: AESGCM


def new_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def _load(raw: str) -> VaultKey:
    key = base64.urlsafe_b64decode(raw.strip() + "=" * (-len(raw.strip()) % 4))
    if len(key) != 32:
        raise VaultUnavailable("each SP_STORE_KEY entry must be 32 bytes, urlsafe base64")
    return VaultKey(key_id=hashlib.sha256(key).hexdigest()[:16], aead=AESGCM(key))


def vault_keys() -> list[VaultKey]:
    return [_load(raw) for raw in settings.SP_STORE_KEY if raw.strip()]


def vault_available() -> bool:
    return bool(settings.SP_STORE_KEY)


def _binding(workspace_id: int, session_id: int | None, name: str, agent_id: int | None) -> bytes:
    place = f"agent-{agent_id}" if agent_id else (session_id or "-")
    return f"calvin-secret:{workspace_id}:{place}:{name}".encode()


def encrypt(
    *, workspace_id: int, session_id: int | None, name: str, value: str, agent_id: int | None = None
) -> tuple[str, bytes]:
    keys = vault_keys()
    if not keys:
        raise VaultUnavailable("the gateway has no SP_STORE_KEY")
    key = keys[0]
    nonce = os.urandom(NONCE_BYTES)
    sealed = key.aead.encrypt(nonce, value.encode(), _binding(workspace_id, session_id, name, agent_id))
    return key.key_id, nonce + sealed


def decrypt(
    *, workspace_id: int, session_id: int | None, name: str, key_id: str, ciphertext: bytes, agent_id: int | None = None
) -> str:
    key = next((k for k in vault_keys() if k.key_id == key_id), None)
    if key is None:
        raise VaultUnavailable(f"the key that encrypted secret {name} is not configured")
    data = bytes(ciphertext)
    try:
        binding = _binding(workspace_id, session_id, name, agent_id)
        plain = key.aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], binding)
    except InvalidTag as exc:
        raise VaultCorrupt(f"secret {name} does not decrypt in this place") from exc
    return plain.decode()
