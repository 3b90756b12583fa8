"""Calvin's own chat channel: the thread is the Message table, delivery is a websocket push."""

import uuid

from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.utils import timezone

from calvin.chat.base import (
    BatchPost,
    ChatPermanentError,
    NewThread,
    ThreadEntry,
    ThreadExcerpt,
    ThreadNotReadable,
    ThreadTarget,
)
from calvin.chat.links import thread_url
from calvin.events import MessagePosted, announce, announce_many
from calvin.workspaces.code_channel_rules import space_channel_id, space_of_channel_id
from sessions.models import Message, Reaction, Thread

WEB = Thread.ChannelKind.WEB
# The same words whether the thread does not exist or belongs to another workspace: a
# session learns nothing about other tenants' threads.
NOT_FOUND = "there is no web thread {id} that this session can read: no thread of this session's workspace has that id"


def _readers(thread_id: int):
    """The people who can see a web thread: the dashboard's rule (selectors.threads_visible_to),
    every user who is a member of the thread's workspace."""
    return get_user_model().objects.filter(memberships__workspace__threads__id=thread_id)


def thread_visible_to(user, thread_id: int) -> bool:
    """The dashboard's rule (selectors.thread_visible_to), kept here: chat does not import the shell."""
    return user.is_authenticated and _readers(thread_id).filter(id=user.id).exists()


def _posted(message: Message, *, replace: bool = False, workspace_id: int | None = None) -> None:
    """The pages watching the thread show it once this commits (calvin.dashboard.live reacts)."""
    if workspace_id is None:
        workspace_id = Thread.objects.values_list("workspace_id", flat=True).get(id=message.thread_id)
    announce(
        MessagePosted(workspace_id=workspace_id, thread_id=message.thread_id, message_id=message.id, replace=replace)
    )


def _unseen_because(session, thread: Thread) -> str | None:
    """Why the thread's audience is not the session's (seed 000: the session's owner and everyone
    who can read the session's own conversation must see it), or None."""
    owner = session.owner
    if owner is not None and owner.user_id is not None and not thread_visible_to(owner.user, thread.id):
        return f"the session's owner ({owner}) cannot see that thread"
    if _readers(session.thread_id).exclude(id__in=_readers(thread.id).values("id")).exists():
        return "some people who can read this session's thread cannot see that thread"
    return None


# What read_thread shows of a message, read as values: building a model instance for each row
# and the people and agents it names cost more than the query (bench/read_thread.py).
ENTRY_FIELDS = (
    "id",
    "kind",
    "author",
    "text",
    "file_name",
    "created_at",
    "member__display_name",
    "member__user__username",
    "member__slack_user_id",
    "sender_agent__name",
    "thread__session__agent__name",  # the thread's own agent: who "agent" messages without a sender are
)


def _entry(row: dict) -> ThreadEntry:
    if row["author"] == Message.Author.PERSON:
        # Member.__str__, from the values read.
        name = row["member__display_name"] or row["member__user__username"] or row["member__slack_user_id"]
        author = f"{name or 'someone'} (person)"
    elif row["author"] == Message.Author.AGENT:
        author = f"agent {row['sender_agent__name'] or row['thread__session__agent__name'] or '(no agent)'}"
    else:
        author = "Calvin (notice)"
    text = row["text"]
    if row["kind"] == Message.Kind.FILE:
        text = f"[file {row['file_name']}]" + (f" {text}" if text else "")
    elif row["kind"] == Message.Kind.CARD:
        text = f"[card] {text}"
    return ThreadEntry(id=str(row["id"]), author=author, at=row["created_at"], text=text)


def _card_fields(*, thread, items: list, blocks: list, fallback_text: str, author: str = "agent") -> dict:
    return {
        "thread": thread,
        "kind": Message.Kind.CARD,
        "author": author,
        "text": fallback_text,
        "card": items,
        "blocks": blocks,
    }


def _file_fields(
    *, thread, stored_name: str, file_name: str, title: str, comment: str, alt_text: str, content_type: str
) -> dict:
    return {
        "thread": thread,
        "kind": Message.Kind.FILE,
        "author": Message.Author.AGENT,
        "text": comment,
        "file": stored_name,
        "file_name": file_name,
        "file_title": title,
        "file_alt_text": alt_text,
        "content_type": content_type,
        "file_size": default_storage.size(stored_name),  # the storage quota's record
    }


class WebChannel:
    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        message = (
            Message.objects.filter(thread=thread, tool_call_id=tool_call_id, delivered_at__isnull=False)
            .only("id")
            .first()
        )
        return None if message is None else {"message_id": message.id}

    def _deliver(self, *, tool_call_id: int, fields: dict, workspace_id: int | None = None) -> dict:
        # Called inside the transaction that marks the call applied, so the message and
        # "applied" commit together; the unique tool_call is the last line of defence.
        message = Message.objects.create(tool_call_id=tool_call_id, **fields)
        thread = fields.get("thread")
        _posted(message, workspace_id=thread.workspace_id if thread is not None else workspace_id)
        return {"message_id": message.id}

    def _changed(self, thread, message: Message, replace: bool = True, **fields) -> dict:
        for name, value in fields.items():
            setattr(message, name, value)
        message.save(update_fields=list(fields))
        _posted(message, replace=replace, workspace_id=thread.workspace_id)
        return {"message_id": message.id}

    def post_message(self, *, thread, message: Message, tool_call_id: int) -> dict:
        # First shown now: a new message for the pages, not a change to one they have.
        return self._changed(thread, message, replace=False, delivered_at=timezone.now())

    def edit_message(self, *, thread, message: Message, text: str) -> dict:
        return self._changed(thread, message, text=text, edited_at=timezone.now())

    def add_reaction(self, *, thread, message: Message, emoji: str, agent_id: int) -> dict:
        Reaction.objects.get_or_create(message=message, emoji=emoji, agent_id=agent_id)
        _posted(message, replace=True, workspace_id=thread.workspace_id)
        return {"message_id": message.id}

    def post_card(
        self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int | None, author: str = "agent"
    ) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields=_card_fields(thread=thread, items=items, blocks=blocks, fallback_text=fallback_text, author=author),
        )

    def update_card(self, *, thread, message: Message, items: list, blocks: list, fallback_text: str) -> dict:
        return self._changed(thread, message, card=items, blocks=blocks, text=fallback_text)

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
    ) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields=_file_fields(
                thread=thread,
                stored_name=stored_name,
                file_name=file_name,
                title=title,
                comment=comment,
                alt_text=alt_text,
                content_type=content_type,
            ),
        )

    def deliver_many(self, *, posts: list[BatchPost]) -> dict[int, dict]:
        """Several effects at once, each as its own method would make it, inside the caller's
        transaction (which marks their calls applied): the new messages in one INSERT, in the
        posts' order (so their ids follow the calls'), the queued ones (send_message's) shown in
        one UPDATE, and their live events in one statement. Returns each call's platform ids."""
        made, queued = [], []
        for post in posts:
            if post.method == "post_message":
                queued.append(post.arguments["message"])
            else:
                build = _card_fields if post.method == "post_card" else _file_fields
                fields = build(thread=post.thread, **post.arguments)
                made.append(Message(tool_call_id=post.tool_call_id, **fields))
        Message.objects.bulk_create(made)
        if queued:
            Message.objects.filter(id__in=[m.id for m in queued]).update(delivered_at=timezone.now())
        message_of = {m.tool_call_id: m for m in made}
        message_of.update((p.tool_call_id, p.arguments["message"]) for p in posts if p.method == "post_message")
        announce_many(
            [
                MessagePosted(
                    workspace_id=post.thread.workspace_id,
                    thread_id=post.thread.id,
                    message_id=message_of[post.tool_call_id].id,
                )
                for post in posts
            ]
        )
        return {post.tool_call_id: {"message_id": message_of[post.tool_call_id].id} for post in posts}

    # Other threads (read_thread, post_thread): any web thread of the session's workspace.

    def thread_target(self, *, ref, session) -> ThreadTarget:
        thread = Thread.objects.filter(id=ref.thread_id, channel_kind=WEB, workspace_id=session.workspace_id).first()
        if thread is None:
            raise ThreadNotReadable(NOT_FOUND.format(id=ref.thread_id))
        # The bot is in every web thread; who sees it is the dashboard's business.
        reason = _unseen_because(session, thread)
        if reason:
            raise ThreadNotReadable(f"web thread {thread.id} cannot be read from this session: {reason}")
        label = f"web thread {thread.id}" + (f" ({thread.title})" if thread.title else "")
        return ThreadTarget(
            channel_kind=WEB,
            url=thread_url(thread.id),
            label=label,
            key={"thread_id": thread.id},
            own=thread.id == session.thread_id,
        )

    def read_thread(self, *, target: ThreadTarget, latest: int) -> ThreadExcerpt:
        messages = Message.transcript().filter(thread_id=target.key["thread_id"])
        first = messages.order_by("id").values(*ENTRY_FIELDS).first()
        if first is None:
            return ThreadExcerpt(first=None, replies=[], replies_total=0)
        # Counted apart: a window count in the same query joins every row before the limit (slower).
        replies = messages.filter(id__gt=first["id"])
        total = replies.count()
        rows = list(replies.order_by("-id").values(*ENTRY_FIELDS)[:latest])[::-1] if total else []
        return ThreadExcerpt(first=_entry(first), replies=[_entry(row) for row in rows], replies_total=total)

    def post_reply(self, *, target: ThreadTarget, text: str, tool_call_id: int, sender_agent_id: int | None) -> dict:
        thread_id = target.key["thread_id"]
        posted = Message.objects.filter(tool_call_id=tool_call_id).values_list("id", flat=True).first()
        if posted is None:
            workspace_id = (
                Thread.objects.filter(id=thread_id, channel_kind=WEB).values_list("workspace_id", flat=True).first()
            )
            if workspace_id is None:
                raise ChatPermanentError(f"web thread {thread_id} no longer exists")
            fields = {
                "thread_id": thread_id,
                "kind": Message.Kind.TEXT,
                "author": Message.Author.AGENT,
                "sender_agent_id": sender_agent_id,
                "text": text,
            }
            posted = self._deliver(tool_call_id=tool_call_id, fields=fields, workspace_id=workspace_id)["message_id"]
        return {"message_id": posted, "url": f"{thread_url(thread_id)}#message-{posted}"}

    # spawn_thread: a new web thread, listed beside the parent's in the workspace's threads; in the
    # parent's space when it is in one (a code channel): the web channel has no direct messages.

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        space = space_of_channel_id(parent_thread.channel_id)
        where = space_channel_id(space) if space else "web"
        return NewThread(channel_kind=WEB, channel_id=where, thread_ts=uuid.uuid4().hex)

    def direct_channel_open(self, *, workspace_id: int, member) -> str:
        raise ChatPermanentError("the web channel has no direct messages")

    def thread_spawned(self, *, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
        raise ChatPermanentError("a web thread is made at once; there is no spawned thread waiting")
