from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tool calls"

    def ready(self):
        from tools import reactions  # noqa: F401  (subscribes to the services' events)
