"""The two things sessions need of the vault, which sits above them (tools → approvals /
secrets_vault → sessions): the agent's words redacted before people see them, and the
secrets a turn's runner gets. secrets_vault registers both from its AppConfig.ready();
until it has, both fail closed (nothing is shown unchecked, no turn starts without them).
"""

from collections.abc import Callable

_port: dict[str, Callable] = {}


def vault_register(*, redact: Callable, turn_secrets: Callable) -> None:
    _port["redact"], _port["turn_secrets"] = redact, turn_secrets


def _vault(name: str) -> Callable:
    try:
        return _port[name]
    except KeyError:
        raise RuntimeError("the vault has not registered with sessions (secrets_vault not installed?)") from None


def agent_text_redacted(session, text: str) -> str:
    """What the agent says goes to people: never a secret value in the clear."""
    return _vault("redact")(session, text) if text else text


def turn_secrets(session) -> list[dict]:
    """[{name, value, file}] for the session's runner: every secret in its scope."""
    return _vault("turn_secrets")(session)
