from django.apps import AppConfig


class SecretsVaultConfig(AppConfig):
    name = "secrets_vault"
    verbose_name = "Secrets"

    def ready(self):
        # Django has configured logging by now; the record factory also covers the
        # handlers uvicorn, Celery or a test adds afterwards.
        from secrets_vault.redaction import install_log_redaction

        install_log_redaction()
        # Sessions sit below the vault: they use it through a port it fills in here.
        from secrets_vault.for_sessions import agent_text_redact, turn_secrets_for
        from sessions.secrets_port import vault_register

        vault_register(redact=agent_text_redact, turn_secrets=turn_secrets_for)
        # A gateway whose keys cannot open this database's vault does not start (canary.py).
        from django.core import checks

        from secrets_vault.canary import vault_canary_check, vault_canary_reseal
        from secrets_vault.services import resealer

        checks.register(vault_canary_check)
        resealer(vault_canary_reseal)
