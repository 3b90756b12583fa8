from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "calvin.dashboard"
    label = "dashboard"

    def ready(self):
        from calvin.dashboard import live, signals  # noqa: F401  (connects the receivers and subscriptions)
