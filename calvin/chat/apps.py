from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "calvin.chat"
    label = "chat"
    verbose_name = "Chat platforms"

    def ready(self):
        from calvin.chat import reactions  # noqa: F401  (subscribes to the services' events)
