"""CLAUDE.md carries each tool set's instructions (NanoClaw's instructions files): the sets the
agent has, only the tools the gateway's mode offers, and nothing of a set it does not have."""

import pytest

from calvin.workspaces.models import Agent
from sessions.instructions import TOOL_LINE, TOOL_SET_INSTRUCTIONS, instructions_compose, tool_set_instructions
from tools.availability import OFFERED

CALVIN_HEADING = "# Calvin's tools (mcp__calvin__)"
NANOCLAW_HEADING = "# NanoClaw's tools (mcp__nanoclaw__)"


def composed(tool_sets: list[str]) -> str:
    agent = Agent(name="a", cli_scope=Agent.CliScope.DISABLED, tool_sets=tool_sets)
    return instructions_compose(agent=agent, destination_names=["thread", "ops"])


@pytest.mark.parametrize(
    ("tool_sets", "has", "lacks"),
    [
        (["calvin", "nanoclaw"], [CALVIN_HEADING, NANOCLAW_HEADING, "`post_card`", "`add_reaction`"], []),
        (["calvin"], [CALVIN_HEADING, "`checkout_repo`"], [NANOCLAW_HEADING, "`send_message`", "# Destinations"]),
        (["nanoclaw"], [NANOCLAW_HEADING, "# Destinations", "- `ops`"], [CALVIN_HEADING, "`post_card`"]),
        ([], [], [CALVIN_HEADING, NANOCLAW_HEADING]),
    ],
)
def test_each_tool_set_the_agent_has_brings_its_text_and_a_removed_one_takes_it_away(tool_sets, has, lacks, settings):
    settings.CALVIN_MODE = "hosted"
    text = composed(tool_sets)
    for part in has:
        assert part in text, part
    for part in lacks:
        assert part not in text, part


def test_only_the_tools_of_the_gateways_mode_are_described(settings):
    settings.CALVIN_MODE = "one-machine"
    calvin, nanoclaw = tool_set_instructions("calvin"), tool_set_instructions("nanoclaw")
    assert "`send_file`" in calvin and "`post_card`" in calvin
    for absent in ("`spawn_thread`", "`checkout_repo`", "`preview`", "`request_secret`"):
        assert absent not in calvin, absent
    assert "`send_message`" in nanoclaw and "`install_packages`" not in nanoclaw
    settings.CALVIN_MODE = "self-hosted"
    assert "`spawn_thread`" in tool_set_instructions("calvin") and "`create_agent`" in tool_set_instructions("nanoclaw")


@pytest.mark.parametrize("tool_set", sorted(TOOL_SET_INSTRUCTIONS))
def test_every_tool_of_a_set_has_a_line_and_every_line_names_one_of_its_tools(tool_set):
    named = {
        m.group(1) for line in TOOL_SET_INSTRUCTIONS[tool_set].read_text().splitlines() if (m := TOOL_LINE.match(line))
    }
    # approval_prompt is Claude Code's, not the agent's to call.
    assert named == set(OFFERED[tool_set]) - {"approval_prompt", "unpreview"}
