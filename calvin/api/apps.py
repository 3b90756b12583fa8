from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "calvin.api"
    label = "api"
    verbose_name = "API"
