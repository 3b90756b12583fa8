from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "calvin.chat"
    label = "chat"
    verbose_name = "Chat platforms"
