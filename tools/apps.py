from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tool calls"

    def ready(self):
        from tools import (
            dispatcher,  # noqa: F401  (starts with a Celery worker)
            reactions,  # noqa: F401  (subscribes to the services' events)
        )
