from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self):
        from approvals import reactions  # noqa: F401  (subscribes to the services' events)
