from calvin.chat.base import ChatAdapter, ChatPermanentError, ChatTemporaryError


def chat_adapter_for(thread) -> ChatAdapter:
    from calvin.chat.web import WebChannel

    if thread.channel_kind == "web":
        return WebChannel()
    raise ChatPermanentError(f"no chat adapter for {thread.channel_kind} threads on this gateway yet")


__all__ = ["ChatAdapter", "ChatPermanentError", "ChatTemporaryError", "chat_adapter_for"]
