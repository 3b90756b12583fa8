from django.conf import settings
from django.utils.module_loading import import_string

from calvin.chat.base import ChatAdapter, ChatPermanentError, ChatTemporaryError


def chat_adapter_for(thread) -> ChatAdapter:
    """The adapter settings.CALVIN_CHAT_ADAPTERS names for the thread's platform."""
    path = settings.CALVIN_CHAT_ADAPTERS.get(thread.channel_kind)
    if path is None:
        raise ChatPermanentError(f"no chat adapter for {thread.channel_kind} threads on this gateway yet")
    return import_string(path)()


__all__ = ["ChatAdapter", "ChatPermanentError", "ChatTemporaryError", "chat_adapter_for"]
