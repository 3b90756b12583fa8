"""The vault's side of sessions/secrets_port.py (registered from SecretsVaultConfig.ready())."""

from secrets_vault.scanner import scanner_for
from secrets_vault.services import session_secret_pairs, session_secrets


def agent_text_redact(session, text: str) -> str:
    pairs = session_secret_pairs(session_id=session.id, workspace_id=session.workspace_id, agent_id=session.agent_id)
    return scanner_for(pairs).redact(text) if pairs else text


def turn_secrets_for(session) -> list[dict]:
    rows = session_secrets(session_id=session.id, workspace_id=session.workspace_id, agent_id=session.agent_id)
    return [{"name": secret.name, "value": value, "file": secret.as_file} for secret, value in rows]
