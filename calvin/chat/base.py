"""The one interface every chat channel implements; tools never talk to a platform directly."""

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Protocol


class ChatTemporaryError(Exception):
    """The platform could not take it now (429, timeout); try again later."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ChatPermanentError(Exception):
    """The platform refused it for good; retrying will not help."""


class ThreadNotReadable(Exception):
    """The session may not read (or post into) that thread; the text is the reason the agent gets.

    A thread of another workspace reads exactly like one that does not exist."""


@dataclass(frozen=True)
class ThreadTarget:
    """Another thread a session reads or posts into, as its adapter found it (JSON-safe: it is
    stored with post_thread's call, and the approved call posts where the card said).

    `key` is what the adapter needs to find it again (web: {"thread_id"}; Slack: channel and root ts).
    """

    channel_kind: str
    url: str
    label: str
    key: dict = field(default_factory=dict)
    own: bool = False  # the session's own thread

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ThreadEntry:
    """One message of a thread read by read_thread, its text whole (the caller cuts it)."""

    id: str
    author: str
    at: datetime
    text: str
    # Its place among the thread's replies (1 is the first reply), when replies are missing
    # between those given (None: the replies given are the latest, one after another).
    position: int | None = None


@dataclass(frozen=True)
class ThreadExcerpt:
    first: ThreadEntry | None  # None with replies: the first message is not known (see `partial`)
    replies: list[ThreadEntry]  # the latest ones asked for, oldest first
    replies_total: int
    # Why what is given is not the thread's first message and latest replies, in words for the
    # agent ("" when it is): a Slack thread Calvin could not fetch whole within Slack's limits.
    partial: str = ""


@dataclass(frozen=True)
class NewThread:
    """Where spawn_thread's new thread is, once its platform made it: the Thread's platform ids
    and the link people and the agent are given ("": Calvin's page of the thread)."""

    channel_kind: str
    channel_id: str
    thread_ts: str
    url: str = ""


@dataclass(frozen=True)
class BatchPost:
    """One effect of a batch given to an adapter's `deliver_many` (an optional method: the web
    channel has it): `method` is the adapter method the effect would call on its own
    ("post_card", "upload_file" or "post_message") and `arguments` what it would pass besides
    the thread and the tool call's id."""

    tool_call_id: int
    thread: object
    method: str
    arguments: dict


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

    # Other threads: read_thread and post_thread (seed 000).

    def thread_target(self, *, ref, session) -> ThreadTarget:
        """The thread `ref` (calvin.chat.thread_refs.ThreadRef) names, if `session` may read it:
        the bot is in the conversation, and the session's owner and everyone who can read the
        session's own conversation can see it. Else ThreadNotReadable with the reason."""
        ...

    def read_thread(self, *, target: ThreadTarget, latest: int) -> ThreadExcerpt:
        """The first message, the `latest` last replies and how many replies there are: delivered messages only.
        Slack: from the history Calvin keeps, asking Slack only for what it lacks, within Slack's limits."""
        ...

    def post_reply(self, *, target: ThreadTarget, text: str, tool_call_id: int, sender_agent_id: int | None) -> dict:
        """A reply inside the thread (never top level). Idempotent per call: a retry finds its first post.
        Returns {"message_id", "url"}."""
        ...

    # A new thread beside the session's own: spawn_thread (seed 000).

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        """Where a spawned session's thread goes, its first message `text` (the task and the brief's
        link) posted at top level when the platform needs one; called in the transaction that
        records the call. The new thread when it exists at once (web: listed beside the parent),
        None when the platform makes it later (Slack: the top-level message's ts is the thread):
        then `thread_spawned` says when. ChatPermanentError when it cannot be done.
        `channel_id`: a conversation `direct_channel_open` gave, else ("") the parent's channel."""
        ...

    def direct_channel_open(self, *, workspace_id: int, member) -> str:
        """The id of `member`'s direct messages with Calvin, opened if need be (spawn_thread from a
        code channel posts there). ChatPermanentError when there are none (the web channel has no
        direct messages; a person without a platform id), ChatTemporaryError for "not now"."""
        ...

    def thread_spawned(self, *, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
        """The thread `thread_spawn` left to the platform, once made; None while it waits.
        ChatPermanentError when the platform refused it, or (`withdraw`) when it was still
        waiting and is withdrawn, so it will never appear."""
        ...
