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
    """Each method is idempotent per `tool_call_id`: a retry returns the first result.

    Cards are lists of layout items (tools/card_spec/layout.py) plus their Block Kit
    rendering; an item {"kind": "actions", "target": "<kind>:<id>", "items": [...]} is a
    row of buttons a person presses (a question's options, an approval's decision, a
    card's choices), which the platform routes back to calvin.dashboard.actions.
    """

    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        """The platform ids of this call's effect if the platform already has it, else None.

        Asked of the platform itself, not of our database: a worker can die after the
        platform accepted a post and before our commit recorded it. Web channel: the
        Message with that tool_call. Slack: a thread message whose metadata carries the id.
        """
        ...

    def post_message(self, *, thread, message, tool_call_id: int) -> dict:
        """Deliver a Message row made when the agent called (send_message): its id was returned at once."""
        ...

    def edit_message(self, *, thread, message, text: str) -> dict:
        """Replace the text of a delivered message; people see it marked edited."""
        ...

    def add_reaction(self, *, thread, message, emoji: str, agent_id: int) -> dict: ...

    def post_card(
        self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int | None, author: str = "agent"
    ) -> dict:
        """`author` "system" for Calvin's own cards (approvals); `tool_call_id` None for those too."""
        ...

    def update_card(self, *, thread, message, items: list, blocks: list, fallback_text: str) -> dict:
        """Edit a posted card in place (an approval decided, a question answered or timed out)."""
        ...

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
