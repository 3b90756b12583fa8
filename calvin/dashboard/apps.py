from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "calvin.dashboard"
    label = "dashboard"

    def ready(self):
        from calvin.dashboard import signals  # noqa: F401  (connects the receivers)
