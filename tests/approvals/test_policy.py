"""approvals.policy: what needs a person's approval, from one table of rules."""

import pytest

from approvals.policy import RULES, Rule, approval_needed, rule_for


@pytest.mark.parametrize("scope", ["disabled", "group", "global", None])
@pytest.mark.parametrize("tool", ["install_packages", "add_mcp_server"])
def test_self_modification_is_always_gated(tool, scope):
    assert approval_needed(source="nanoclaw", tool=tool, cli_scope=scope, permission_mode="bypassPermissions")


@pytest.mark.parametrize(("scope", "gated"), [("global", False), ("group", True), ("disabled", True), (None, True)])
def test_create_agent_is_gated_unless_the_agents_scope_is_global(scope, gated):
    assert approval_needed(source="nanoclaw", tool="create_agent", cli_scope=scope) is gated


@pytest.mark.parametrize(
    ("mode", "gated"), [("default", True), ("acceptEdits", True), ("plan", True), ("bypassPermissions", False)]
)
def test_post_thread_is_gated_outside_bypass_permissions(mode, gated):
    assert approval_needed(source="calvin", tool="post_thread", permission_mode=mode) is gated


@pytest.mark.parametrize(
    ("tool", "mode", "gated"),
    [
        ("Bash", "default", True),
        ("Bash", "acceptEdits", True),
        ("Bash", "bypassPermissions", False),
        ("Edit", "default", True),
        ("Edit", "acceptEdits", False),
        ("Write", "acceptEdits", False),
        ("WebFetch", "plan", True),
    ],
)
def test_claude_code_permission_prompts_follow_the_sessions_permission_mode(tool, mode, gated):
    assert approval_needed(source="claude-code", tool=tool, permission_mode=mode) is gated


def test_ncl_writes_are_gated_and_reads_are_not():
    assert approval_needed(source="ncl", tool="write", cli_scope="global")
    assert not approval_needed(source="ncl", tool="read")


@pytest.mark.parametrize(
    ("source", "tool"),
    [("nanoclaw", "send_message"), ("nanoclaw", "send_card"), ("calvin", "send_file"), ("calvin", "post_card")],
)
def test_tools_without_a_rule_run_without_asking(source, tool):
    assert not approval_needed(source=source, tool=tool)


def test_a_tools_own_rule_comes_before_its_sources_catch_all():
    assert rule_for(source="claude-code", tool="Edit").tool == "Edit"
    assert rule_for(source="claude-code", tool="Bash").tool == "*"
    assert rule_for(source="calvin", tool="Bash") is None  # a catch-all covers its own source only


def test_a_later_issue_adds_a_row_not_an_engine():
    rules = (*RULES, Rule("calvin", "checkout_repo", unless_cli_scopes=frozenset({"global"})))
    assert approval_needed(source="calvin", tool="checkout_repo", cli_scope="group", rules=rules)
    assert not approval_needed(source="calvin", tool="checkout_repo", cli_scope="global", rules=rules)
    assert not approval_needed(source="calvin", tool="checkout_repo", cli_scope="group")


def test_every_rule_says_why():
    assert all(rule.why for rule in RULES)
