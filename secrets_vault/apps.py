from django.apps import AppConfig


class SecretsVaultConfig(AppConfig):
    name = "secrets_vault"
    verbose_name = "Secrets"

    def ready(self):
        # Django has configured logging by now; the record factory also covers the
        # handlers uvicorn, Celery or a test adds afterwards.
        from secrets_vault.redaction import install_log_redaction

        install_log_redaction()
