"""Calvin's data as people read it: system messages in a thread, table cells. Pure functions.

Some system messages are written for the agent (sessions.services.inbox_post: "Your request …
was denied by …", "The secret X was set by …", "send_message (call 7) was not delivered: …"):
the agent still receives exactly those words; the web page shows people a sentence of their
own and keeps the agent's words one click away. Notices already written for people
(sessions.services.system_notice_post: "Stopped (…).", "Waiting: …", "The agent failed: …")
get a kind, for their look, and a little tidying.
"""

import re
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Notice:
    kind: str  # approved | applied | denied | expired | failed | secret | undelivered | stopped | waiting | info
    text: str  # what people read (mrkdwn: a URL in it becomes a link)
    for_agent: bool  # the original words were the agent's; the page offers them too


_APPROVAL = re.compile(
    r"^Your request (?P<kind>[\w-]+) \(approval (?P<id>\d+): (?P<summary>.*)\)"
    r" (?:was )?(?P<outcome>approved by .*|denied by .*|expired: .*)$",
    re.DOTALL,
)
_APPLIED = re.compile(r"^approved by (?P<who>.+?) and applied\.(?: (?P<done>.*))?$", re.DOTALL)
_FAILED = re.compile(r"^approved by (?P<who>.+?) but failed: (?P<error>.*?)\.? Nothing was changed\.$", re.DOTALL)
_CHANGED = re.compile(r"^approved by (?P<who>.+?), but (?P<why>its arguments changed .*)$", re.DOTALL)
_DENIED = re.compile(r"^denied by (?P<who>.+?)\. Nothing was changed\.$", re.DOTALL)
_EXPIRED = re.compile(r"^expired: (?P<why>.*?), so nothing was changed\..*$", re.DOTALL)
_SECRET = re.compile(r"^The secret (?P<name>\S+) was set by (?P<who>.+?)\. It is in the environment .*$", re.DOTALL)
_UNDELIVERED = re.compile(
    r"^(?P<tool>[\w-]+) \(call (?P<id>\d+)\) was not delivered(?P<where> to Slack)?: (?P<error>.*)$", re.DOTALL
)
_STOPPED = re.compile(r"^Stopped \((?P<who>.*)\)(?P<rest> before the agent started)?\.$", re.DOTALL)
_PEOPLE_KINDS = (
    ("Waiting: ", "waiting"),
    ("Reminder: ", "waiting"),  # an approval nobody decided yet (approvals.services.approval_remind)
    ("Not run: ", "failed"),
    ("The agent failed", "failed"),
    ("The agent's reply could not be delivered", "failed"),
    ("The agent's turn was interrupted", "failed"),
    ("Resumed by ", "info"),
    ("Spawned a thread", "info"),
)


def _approval(match: re.Match) -> Notice | None:
    what = f"the agent's request “{match['summary']}”"
    outcome = match["outcome"]
    if found := _APPLIED.match(outcome):
        done = f" {found['done']}" if found["done"] else ""
        return Notice("applied", f"{found['who']} approved {what}, and it was applied.{done}", True)
    if found := _FAILED.match(outcome):
        return Notice("failed", f"{found['who']} approved {what}, but it failed: {found['error']}.", True)
    if found := _CHANGED.match(outcome):
        return Notice("failed", f"{found['who']} approved {what}, but {found['why']}", True)
    if found := _DENIED.match(outcome):
        return Notice("denied", f"{found['who']} denied {what}. Nothing was changed.", True)
    if found := _EXPIRED.match(outcome):
        return Notice("expired", f"T{what[1:]} expired ({found['why']}). Nothing was changed.", True)
    return None


def notice_for_people(text: str) -> Notice:
    """What a system message in a thread says to people."""
    text = (text or "").strip()
    if match := _APPROVAL.match(text):
        notice = _approval(match)
        if notice is not None:
            return notice
    if match := _SECRET.match(text):
        return Notice("secret", f"{match['who']} set the secret {match['name']}; the agent can use it now.", True)
    if match := _UNDELIVERED.match(text):
        where = " to Slack" if match["where"] else ""
        return Notice(
            "failed",
            f"The agent's {match['tool']} (call {match['id']}) could not be delivered{where}: {match['error']}",
            True,
        )
    if match := _STOPPED.match(text):
        who = match["who"].strip()
        who = "" if who == "the turn was stopped" else f" {who.removeprefix('stopped ')}"
        return Notice("stopped", f"Stopped{who}{match['rest'] or ''}.", False)
    for start, kind in _PEOPLE_KINDS:
        if text.startswith(start):
            return Notice(kind, text, False)
    return Notice("info", text, False)


def cell_words(value) -> str:
    """A table cell or field value as people write it: yes, no, — (nothing), 42 (not 42.0)."""
    if value is None or value == "":
        return "—"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return str(int(value))
    if isinstance(value, Decimal):
        return format(value.normalize(), "f") if value == value.to_integral() else str(value)
    return str(value)
