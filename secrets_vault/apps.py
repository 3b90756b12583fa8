from django.apps import AppConfig


class SecretsVaultConfig(AppConfig):
    name = "secrets_vault"
    verbose_name = "Secrets"
