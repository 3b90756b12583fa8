from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "calvin.accounts"
    label = "accounts"
    verbose_name = "Accounts"
