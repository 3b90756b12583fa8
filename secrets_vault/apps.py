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
