"""The one interface every chat channel implements; tools never talk to a platform directly."""

from typing import Protocol


class ChatTemporaryError(Exception):
    """The platform could not take it now (429, timeout); try again later."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ChatPermanentError(Exception):
    """The platform refused it for good; retrying will not help."""


class ChatAdapter(Protocol):
    """Each method is idempotent per `tool_call_id`: a retry returns the first result."""

    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        """The platform ids of this call's effect if the platform already has it, else None.

        Asked of the platform itself, not of our database: a worker can die after the
        platform accepted a post and before our commit recorded it. Web channel: the
        Message with that tool_call. Slack: a thread message whose metadata carries the id.
        """
        ...

    def post_message(self, *, thread, text: str, tool_call_id: int, author: str) -> dict: ...

    def post_card(self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int) -> dict: ...

    def upload_file(
        self,
        *,
        thread,
        stored_name: str,
        file_name: str,
        title: str,
        comment: str,
        alt_text: str,
        content_type: str,
        tool_call_id: int,
    ) -> dict: ...
