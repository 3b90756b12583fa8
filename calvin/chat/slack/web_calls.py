"""The Web API calls that send one SlackPost, and the search that finds whether a post left
SENDING by a dead worker or a timeout already reached Slack (calvin.chat.slack.lanes uses both).
The search reads conversations within Slack's read limit, shared with read_thread."""

import logging
import urllib.error
import urllib.request

from django.conf import settings
from django.core.cache import cache
from django.core.files.storage import default_storage
from django.db import transaction
from slack_sdk.errors import SlackApiError

from calvin.chat.base import ChatPermanentError, ChatTemporaryError
from calvin.chat.models import SlackLane, SlackPost

log = logging.getLogger(__name__)

Kind, Status = SlackPost.Kind, SlackPost.Status
METADATA_EVENT = "calvin_post"
# A thread searched for a post that may have arrived: pages of 200, at most this many.
SEARCH_PAGES = 10
# Where a search that must wait for Slack's read limit goes on from (a page's cursor), per post.
SEARCH_RESUME = "slack-post-search:{post_id}"
SEARCH_RESUME_SECONDS = 3600


def _error(exc: Exception, doing: str) -> Exception:
    from calvin.chat.slack.web_api import slack_error

    return slack_error(exc, doing=doing)


def _call(doing: str, method, **kwargs):
    try:
        return method(**kwargs)
    except Exception as exc:
        raise _error(exc, doing) from None


def _slack_error_code(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    return data.get("error", "") if isinstance(data, dict) else ""


def _metadata_post_id(message: dict) -> str | None:
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != METADATA_EVENT:
        return None
    return str((metadata.get("event_payload") or {}).get("post_id"))


def _thread_search(client, lane: SlackLane, post: SlackPost, matches) -> dict | None:
    """The first message of the post's thread (or channel) that `matches`, asking Slack.

    Within Slack's read limit (calvin.chat.slack.read_limits: about a call a minute per team,
    15 messages a call): a page not allowed now raises SlackReadLater (a ChatTemporaryError
    with its retry_after, which the lane waits), and the search goes on from that page, kept in
    the cache, when the post is tried again."""
    from calvin.chat.slack.read_limits import HISTORY, REPLIES, SlackReadLater, slack_read, slack_read_page

    method = REPLIES if post.thread_ts else HISTORY
    resume = SEARCH_RESUME.format(post_id=post.id)
    oldest = _search_after(lane, post)
    cursor = cache.get(resume)
    for _ in range(SEARCH_PAGES):
        kwargs = {"channel": lane.channel_id, "include_all_metadata": True, "limit": slack_read_page()}
        if oldest:
            kwargs["oldest"] = oldest
        if post.thread_ts:
            kwargs["ts"] = post.thread_ts
        if cursor:
            kwargs["cursor"] = cursor
        call = client.conversations_replies if post.thread_ts else client.conversations_history
        try:
            answer = slack_read(team_id=lane.team_id, method=method, call=call, **kwargs)
        except SlackReadLater:
            if cursor:
                cache.set(resume, cursor, timeout=SEARCH_RESUME_SECONDS)
            raise
        except SlackApiError as exc:
            if _slack_error_code(exc) == "thread_not_found":
                cache.delete(resume)
                return None  # nothing in that thread yet: the post is not there either
            raise _error(exc, method) from None
        except Exception as exc:
            raise _error(exc, method) from None
        for message in answer.get("messages") or []:
            if matches(message):
                cache.delete(resume)
                return message
        cursor = (answer.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    cache.delete(resume)
    return None


def _search_after(lane: SlackLane, post: SlackPost) -> str:
    """A ts, on Slack's own clock, that the post's message comes after ("" when none is known):
    the last post Slack took in this lane before it (a lane sends one post at a time, and waits
    for one being sent), or the newest message of its thread Calvin held before it was made."""
    from calvin.chat.models import SlackHistoryMessage

    sent = SlackPost.objects.filter(lane_id=lane.id, status=Status.SENT).exclude(slack_ts="").exclude(id=post.id)
    if post.sent_at is not None:  # a sent file's message looked for again (_target_ts)
        sent = sent.filter(sent_at__lt=post.sent_at)
    held = SlackHistoryMessage.objects.none()
    if post.thread_ts:
        sent = sent.filter(thread_ts=post.thread_ts)
        held = SlackHistoryMessage.objects.filter(
            history__team_id=lane.team_id,
            history__channel_id=lane.channel_id,
            history__thread_ts=post.thread_ts,
            stored_at__lt=post.created_at,
        )
    # Slack's ts are fixed-width: they order as strings.
    known = [
        sent.order_by("-slack_ts").values_list("slack_ts", flat=True).first(),
        held.order_by("-ts").values_list("ts", flat=True).first(),
    ]
    return max((ts for ts in known if ts), default="")


def _has_file(file_id: str):
    return lambda message: any(f.get("id") == file_id for f in message.get("files") or [])


def _post_find(client, lane: SlackLane, post: SlackPost) -> dict | None:
    """What Slack already has of a post that was being sent, or None when it has nothing."""
    if post.kind == Kind.MESSAGE:
        found = _thread_search(client, lane, post, lambda m: _metadata_post_id(m) == str(post.id))
        return {"ts": found["ts"]} if found else None
    if post.kind == Kind.FILE and post.slack_file_id:
        found = _thread_search(client, lane, post, _has_file(post.slack_file_id))
        return {"ts": found["ts"], "file_id": post.slack_file_id} if found else None
    return None  # a file whose upload never started; chat.update and reactions.add repeat safely


def _target_ts(client, lane: SlackLane, post: SlackPost) -> str:
    """The ts of the message (part `post.part`) an update or a reaction is for."""
    from sessions.models import Message

    message = Message.objects.filter(id=post.message_id).only("id", "platform_ts").first()
    if message is None:
        raise ChatPermanentError("the message to change is gone")
    if post.part == 0 and message.platform_ts:
        return message.platform_ts
    target = (
        SlackPost.objects.filter(message_id=message.id, kind__in=(Kind.MESSAGE, Kind.FILE), part=post.part)
        .order_by("id")
        .first()
    )
    if target is None or target.status != Status.SENT:
        why = f" ({target.error or target.status})" if target is not None else ""
        raise ChatPermanentError(f"message {message.id} never reached Slack{why}")
    if target.slack_ts:
        return target.slack_ts
    found = _thread_search(client, lane, target, _has_file(target.slack_file_id)) if target.slack_file_id else None
    if found is None:
        raise ChatPermanentError(f"message {message.id} is not in its Slack thread")
    with transaction.atomic():  # found once, kept
        SlackPost.objects.filter(id=target.id).update(slack_ts=found["ts"])
        if target.part == 0:
            Message.objects.filter(id=message.id, platform_ts="").update(platform_ts=found["ts"])
    return found["ts"]


def _send_message(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    kwargs = {
        "channel": lane.channel_id,
        "text": payload.get("text") or "",
        # How a later try finds this message if the answer to this one is lost.
        "metadata": {"event_type": METADATA_EVENT, "event_payload": {"post_id": post.id}},
    }
    if payload.get("blocks"):
        kwargs["blocks"] = payload["blocks"]
    if post.thread_ts:
        kwargs["thread_ts"] = post.thread_ts
    answer = _call("chat.postMessage", client.chat_postMessage, **kwargs)
    return {"ts": answer.get("ts") or ""}


def _send_update(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    ts = payload.get("ts") or _target_ts(client, lane, post)
    kwargs = {"channel": lane.channel_id, "ts": ts, "text": payload.get("text") or ""}
    if "blocks" in payload:
        kwargs["blocks"] = payload["blocks"]
    _call("chat.update", client.chat_update, **kwargs)
    return {"ts": ts}


def _send_reaction(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    ts = payload.get("timestamp") or _target_ts(client, lane, post)
    try:
        client.reactions_add(channel=lane.channel_id, timestamp=ts, name=payload["name"])
    except SlackApiError as exc:
        if _slack_error_code(exc) != "already_reacted":  # what was asked is there
            raise _error(exc, "reactions.add") from None
    except Exception as exc:
        raise _error(exc, "reactions.add") from None
    return {"ts": ts}


def _upload_bytes(url: str, handle, size: int) -> None:
    """files_upload_v2's second call: the bytes, POSTed to the URL Slack gave. Its errors
    never name the URL (it is a capability)."""
    request = urllib.request.Request(
        url,
        data=handle,
        method="POST",
        headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.CALVIN_SLACK_HTTP_TIMEOUT) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 429 or exc.code >= 500:
            raise ChatTemporaryError(f"Slack answered {exc.code} to the file's bytes") from None
        raise ChatPermanentError(f"Slack refused the file's bytes (HTTP {exc.code})") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ChatTemporaryError(f"Slack could not be reached for the file's bytes: {type(exc).__name__}") from None


def _send_file(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    name = payload["stored_name"]
    try:
        size = default_storage.size(name)
    except OSError:
        raise ChatPermanentError("the file is no longer stored") from None
    answer = _call(
        "files.getUploadURLExternal",
        client.files_getUploadURLExternal,
        filename=payload["file_name"],
        length=size,
        alt_txt=payload.get("alt_text") or None,
    )
    file_id = answer["file_id"]
    # Its own commit, before the bytes go: a try after a lost answer looks for this file.
    SlackPost.objects.filter(id=post.id).update(slack_file_id=file_id)
    with default_storage.open(name, "rb") as handle:
        _upload_bytes(answer["upload_url"], handle, size)
    _call(
        "files.completeUploadExternal",
        client.files_completeUploadExternal,
        files=[{"id": file_id, "title": payload.get("title") or payload["file_name"]}],
        channel_id=lane.channel_id,
        initial_comment=payload.get("comment") or None,
        thread_ts=post.thread_ts or None,
    )
    return {"file_id": file_id}


SENDERS = {Kind.MESSAGE: _send_message, Kind.UPDATE: _send_update, Kind.REACTION: _send_reaction, Kind.FILE: _send_file}
