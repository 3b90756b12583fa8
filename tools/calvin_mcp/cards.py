"""post_card as an MCP tool: a thin adapter over tools.services.cards."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.card_spec.models import CardSpec
from tools.results import Queued
from tools.services.cards import cards_post

DESCRIPTION = """Posts a card (key facts, a table, charts, link buttons) into the session's thread as Slack blocks.

spec.root is the id of a Card; spec.elements maps ids to {type, props, children}. Element types and props:
- Card {title?} with children (ids, in order); only the root is a Card.
- Heading {text <=150}; Text {text <=3000, Slack mrkdwn}; Divider {}.
- Field {label <=100, value}: key facts; at most 10 per card.
- Table {columns? (<=20), rows: [[cell]]}: one per card; at most 100 rows (header included), 20 columns;
  a cell or column name is a string of at most 500 characters, a number, a boolean or null.
- Chart {kind: bar|line, title <=50, series: [{name <=20, points: [{label <=20, value}]}]}:
  two per card; 12 series, 20 points; values are finite numbers within +-1e15.
- Button {label <=75, url}: links only.
Element ids are 1 to 100 characters; spec.state is at most 16 KiB as JSON. Numbers are finite
(no NaN or Infinity) and no string may contain NUL.
At most 50 Slack blocks; 50 cards per runner. An invalid spec is refused with the list of problems."""


async def post_card(
    spec: Annotated[CardSpec, Field(description="The card.")],
    ctx: Context,
) -> Queued:
    result = await call_service(cards_post, caller=caller_from_context(ctx), spec=spec)
    return Queued(tool_call_id=result["tool_call_id"], status=result["status"])


TOOLS = [("post_card", post_card, DESCRIPTION)]
