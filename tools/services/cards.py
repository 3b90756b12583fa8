"""post_card: check the whole spec, render it, count it, record it."""

from tools.caller import Caller
from tools.card_spec.blockkit import MAX_BLOCKS, card_blocks, card_fallback_text
from tools.card_spec.layout import card_layout
from tools.card_spec.models import CardSpec
from tools.errors import ToolRefused
from tools.services.common import refuse_secrets, secret_scanner_for, strings_in, tool_call_record

MAX_PROBLEMS_SHOWN = 30


def cards_post(*, caller: Caller, spec: CardSpec) -> dict:
    items, problems = card_layout(spec)
    blocks = card_blocks(items) if not problems else []
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"at most {MAX_BLOCKS} Slack blocks (this card needs {len(blocks)})")
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        if len(problems) > MAX_PROBLEMS_SHOWN:
            shown.append(f"and {len(problems) - MAX_PROBLEMS_SHOWN} more problems")
        raise ToolRefused("invalid card spec: " + "; ".join(shown))
    arguments = spec.model_dump(mode="json")
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the card", secrets=scanner, content="\n".join(strings_in(arguments)))
    call = tool_call_record(
        caller=caller,
        tool="post_card",
        arguments=arguments,
        payload={"items": items, "blocks": blocks, "text": card_fallback_text(items)},
        secrets=scanner,
    )
    return {"tool_call_id": call.id, "status": call.status}
