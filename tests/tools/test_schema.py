"""tools/list: the seed's parameters and bounds, from the one parameter model."""

import asyncio

import pytest
from mcp.client import Client

from tools.availability import OFFERED, tool_offered
from tools.server import build_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_send_file_schema(agent):
    tools = {t.name: t for t in agent.list_tools()}
    schema = tools["send_file"].input_schema
    assert schema["required"] == ["path"]
    props = schema["properties"]
    assert set(props) == {"path", "comment", "title", "alt_text"}  # ctx is not a parameter
    assert props["path"]["description"] == "Absolute, or relative to the session directory."

    def bound(name):
        return next(option["maxLength"] for option in props[name]["anyOf"] if "maxLength" in option)

    assert (bound("comment"), bound("title"), bound("alt_text")) == (3000, 200, 1000)
    assert "PNG, JPEG, GIF and WebP images render inline" in tools["send_file"].description


def test_post_card_schema(agent):
    tool = next(t for t in agent.list_tools() if t.name == "post_card")
    schema = tool.input_schema
    assert schema["required"] == ["spec"]
    spec = schema["$defs"]["CardSpec"]
    assert spec["required"] == ["root", "elements"]
    assert spec["properties"]["root"]["description"] == "Id of the root element, a Card."
    assert "state" in spec["properties"]
    element = schema["$defs"]["CardElement"]
    assert set(element["properties"]) == {"type", "props", "children"}
    assert "An invalid spec is refused with the list of problems" in tool.description


# In-process there is no runner, so approval_prompt (listed over HTTP to Claude Code runners
# only, tests/tools/test_approval_prompt.py) is listed in every mode, and checkout_repo in
# self-hosted mode whatever the session's host has (tests/tools/test_availability.py).
SERVED_TOOLS = {
    "send_file", "post_card", "checkout_repo", "spawn_thread", "read_thread", "post_thread",
    "request_secret", "preview", "unpreview", "approval_prompt",
}  # fmt: skip
LISTED = {
    "one-machine": {"send_file", "post_card", "approval_prompt"},
    "self-hosted": SERVED_TOOLS,
    "hosted": SERVED_TOOLS,
}


@pytest.mark.parametrize("mode", LISTED)
def test_each_mode_lists_the_tools_the_seed_gives_it(mode):
    async def names():
        async with Client(build_server(mode)) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert asyncio.run(names()) == LISTED[mode]


# Seed 000's availability table, copied by hand: one-machine, self-hosted, hosted. "when the
# host has a workspace definition" and "offered, but the gateway refuses the call" are both
# offered (listed); their refusals are the services' business.
SEED_TABLE = {
    "send_file": (True, True, True),
    "post_card": (True, True, True),
    "checkout_repo": (False, True, True),
    "spawn_thread": (False, True, True),
    "read_thread": (False, True, True),
    "post_thread": (False, True, True),
    "request_secret": (False, True, True),
    "preview": (False, True, True),
    "unpreview": (False, True, True),
}
# Beyond the seed's table, from later issues: Claude Code's permission prompts (issue 8).
LATER = {"approval_prompt": (True, True, True)}


@pytest.mark.parametrize("name", {**SEED_TABLE, **LATER})
def test_availability_follows_the_seed_table(name):
    modes = ("one-machine", "self-hosted", "hosted")
    assert tuple(tool_offered(name, mode) for mode in modes) == {**SEED_TABLE, **LATER}[name]


def test_no_tool_is_offered_that_the_seed_does_not_list():
    assert set(OFFERED["calvin"]) == set(SEED_TABLE) | set(LATER)
    assert not tool_offered("delete_everything", "hosted")
