"""The approval card: every argument in full and visible, within Slack's limits, the outcome as a note."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.cards import approval_card, chunks, duration, quoted, visible
from approvals.models import PendingApproval
from calvin.workspaces.models import Member
from sessions.services import session_start
from tools.services.agents import ARG_MAX, ARGS_MAX, ENV_MAX, INSTRUCTIONS_MAX

pytestmark = pytest.mark.django_db

S = PendingApproval.Status


def make(workspace, kind: str, details: dict, **fields) -> PendingApproval:
    session = session_start(workspace=workspace, title="card")
    now = timezone.now()
    approval = PendingApproval.objects.create(
        session=session, kind=kind, summary=kind, details=details, expires_at=now + timedelta(hours=24), **fields
    )
    PendingApproval.objects.filter(id=approval.id).update(requested_at=now)
    approval.refresh_from_db()
    return approval


def texts(card: dict) -> str:
    out = []
    for item in card["items"]:
        out.append(item.get("text", ""))
        out.extend(f"{f['label']}\n{f['value']}" for f in item.get("items", []) if "label" in f and "value" in f)
    return "\n".join(out)


def block_texts(blocks: list[dict]) -> list[dict]:
    found = []
    for block in blocks:
        if "text" in block:
            found.append(block["text"])
        found.extend(block.get("fields", []))
        found.extend(block.get("elements", []) if block["type"] == "context" else [])
    return found


def test_a_pending_card_has_the_decision_buttons_and_who_asked(workspace):
    approval = make(workspace, "install_packages", {"apt": ["jq"], "npm": [], "reason": "parse JSON"})
    card = approval_card(approval)
    actions = [i for i in card["items"] if i["kind"] == "actions"]
    assert actions == [
        {
            "kind": "actions",
            "action": "approval",
            "target_id": approval.id,
            "items": [
                {"label": "Approve", "value": "approve", "style": "primary"},
                {"label": "Deny", "value": "deny", "style": "danger"},
            ],
        }
    ]
    text = texts(card)
    assert f"agent main · session {approval.session_id}" in text
    assert '1. "jq"' in text and "Reason: parse JSON" in text
    assert "Expires" in text and timezone.localtime(approval.expires_at).strftime("%Y-%m-%d %H:%M") in text
    slack_actions = [b for b in card["blocks"] if b["type"] == "actions"]
    action_ids = [e["action_id"] for e in slack_actions[0]["elements"]]
    assert action_ids == [f"approval:{approval.id}:0", f"approval:{approval.id}:1"]


@pytest.mark.parametrize(
    ("status", "note"),
    [
        (S.APPROVED, "Approved by boss · applying"),
        (S.APPLIED, "Approved by boss · applied 14:02 UTC"),
        (S.DENIED, "Denied by boss"),
        (S.EXPIRED, "Expired: nobody decided within 24 h"),
    ],
)
def test_a_decided_card_has_no_buttons_and_says_what_happened(workspace, status, note):
    boss = Member.objects.create(workspace=workspace, display_name="boss", role=Member.Role.ADMIN)
    finished = timezone.now().replace(hour=14, minute=2)
    approval = make(workspace, "install_packages", {"apt": ["jq"], "npm": []}, status=status, decided_by=boss)
    PendingApproval.objects.filter(id=approval.id).update(finished_at=finished)
    approval.refresh_from_db()
    card = approval_card(approval)
    assert not [i for i in card["items"] if i["kind"] == "actions"]
    assert not [b for b in card["blocks"] if b["type"] == "actions"]
    assert card["items"][-1] == {"kind": "note", "text": note}
    assert note in card["text"]


def test_a_failed_card_gives_the_reason(workspace):
    from tools.models import ToolCall

    session = session_start(workspace=workspace, title="t")
    call = ToolCall.objects.create(session=session, tool="install_packages", status="failed", error="apt said no")
    approval = PendingApproval.objects.create(
        session=session, tool_call=call, kind="install_packages", summary="s", details={"apt": ["jq"]},
        status=S.FAILED, expires_at=timezone.now(),
    )  # fmt: skip
    assert approval_card(approval)["items"][-1]["text"] == "Approved by someone · failed: apt said no"


def test_invisible_characters_are_shown_as_escapes():
    assert visible("a\u202eb\u200bc\u00a0d\te") == "a\\u202eb\\u200bc\\u00a0d\\u0009e"
    assert visible("line\nnext", keep_newlines=True) == "line\nnext"
    assert quoted(" ") == '" "' and quoted('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert quoted("\U000e0041") == '"\\U000e0041"'  # an invisible tag character


def test_add_mcp_server_shows_command_args_and_env_with_vault_references(workspace):
    details = {
        "name": "gh",
        "command": "npx",
        "args": ["-y", "--token=\u202eevil"],
        "env": {"TOKEN": "vault:GH_TOKEN", "MODE": "vault"},
    }
    text = texts(approval_card(make(workspace, "add_mcp_server", details)))
    assert 'Command: "npx"' in text
    assert 'Arguments (2):\n1. "-y"\n2. "--token=\\u202eevil"' in text
    assert 'TOKEN = the vault secret "GH_TOKEN" (a reference: its value is not shown here)' in text
    assert 'MODE = "vault"' in text


def test_the_largest_requests_fit_slack_in_full(workspace):
    """Every argument of the biggest request each tool accepts is on the card, within Slack's limits."""
    largest = {
        "add_mcp_server": {
            "name": "x" * 63,
            "command": "c" * 1000,
            "args": ["a" * ARG_MAX] * 5,  # 10,000 characters in all, the bound
            "env": {f"K{i:02}": "v" * (10_000 // ENV_MAX - 4) for i in range(ENV_MAX)},
        },
        "create_agent": {"name": "n" * 64, "instructions": ("word " * 40 + "\n") * (INSTRUCTIONS_MAX // 201)},
        "install_packages": {"apt": ["a" * 214] * 10, "npm": ["b" * 214] * 10, "reason": "r" * 2000},
    }
    for kind, details in largest.items():
        card = approval_card(make(workspace, kind, details))
        blocks = card["blocks"]
        assert len(blocks) <= 50, kind
        for text in block_texts(blocks):
            assert text["type"] == "plain_text"  # an argument can never format, link or mention
            assert len(text["text"]) <= 3000
        slack = "".join(t["text"] for t in block_texts(blocks))
        for value in [*details.get("args", []), *details.get("env", {}).values(), details.get("command", "")]:
            assert value in slack, kind
    assert ARGS_MAX * ARG_MAX > 10_000  # the total bound, not the per-argument one, keeps the card small


def test_slack_never_gets_mrkdwn_from_an_argument(workspace):
    card = approval_card(make(workspace, "install_packages", {"apt": [], "npm": [], "reason": "<!channel> *now*"}))
    assert all(t["type"] == "plain_text" for t in block_texts(card["blocks"]))


def test_chunks_cut_at_line_ends_and_keep_every_character():
    text = "\n".join(["x" * 1000] * 7) + "\n" + "y" * 7000
    pieces = chunks(text, 3000)
    assert all(len(p) <= 3000 for p in pieces)
    assert "".join(pieces).replace("\n", "") == text.replace("\n", "")
    assert pieces[0] == "\n".join(["x" * 1000] * 2)


@pytest.mark.parametrize(
    ("span", "shown"),
    [
        (timedelta(hours=24), "24 h"),
        (timedelta(hours=1, minutes=30), "1 h 30 min"),
        (timedelta(minutes=5), "5 min"),
        (timedelta(seconds=90), "90 s"),
    ],
)
def test_durations(span, shown):
    assert duration(span) == shown
