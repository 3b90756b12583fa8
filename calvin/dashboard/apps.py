from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "calvin.dashboard"
    label = "dashboard"
