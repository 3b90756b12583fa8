"""The worker's side alone: claimed web cards applied one by one against applied together.

    .venv/bin/python bench/apply_effects.py [calls] [rounds]

In-process, on calvin_bench (run bench/run.py once first: it leaves the database migrated), no
server, no clients: each round records `calls` pending post_card calls into one web thread
through the tool's own service, then drains them as a dispatcher does (claim 16, apply, again)
twice over, once with tools/effects_batch.py switched off (every call in its own transaction,
the path before it) and once as Calvin runs; the two alternate, so a slow minute of this
machine hits both. Prints effects/s and the time per effect of each, round by round.
"""

import os
import statistics
import sys
import time
from pathlib import Path

from run import CALVIN_ENV, card_arguments, vault_key_ensure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.update(CALVIN_ENV)
vault_key_ensure()  # the settings read it from var/bench, as bench/run.py's processes do

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from calvin.workspaces.models import Member  # noqa: E402
from calvin.workspaces.services import workspace_create  # noqa: E402
from sessions.services import runner_start, session_start  # noqa: E402
from tools import effects_batch  # noqa: E402
from tools.caller import caller_for_token  # noqa: E402
from tools.card_spec.blockkit import card_blocks, card_fallback_text  # noqa: E402
from tools.card_spec.layout import card_layout  # noqa: E402
from tools.card_spec.models import CardSpec  # noqa: E402
from tools.effects import tool_calls_apply_claimed, tool_calls_claim_new  # noqa: E402
from tools.models import ToolCall  # noqa: E402
from tools.services.common import secret_scanner_for, tool_call_record  # noqa: E402

BATCH = 16  # tools/dispatcher.py's


def new_caller():
    tag = os.urandom(4).hex()
    user = get_user_model().objects.create_user(f"apply-{tag}")
    workspace = workspace_create(name=f"Apply {tag}", slug=f"apply-{tag}", owner_user=user)
    member = Member.objects.get(workspace=workspace, user=user)
    session = session_start(workspace=workspace, owner=member, title="apply")
    _, token = runner_start(session=session)
    return caller_for_token(token)


def record(caller, count: int) -> None:
    spec = CardSpec.model_validate(card_arguments("apply")["spec"])
    items, _ = card_layout(spec)
    payload = {"items": items, "blocks": card_blocks(items), "text": card_fallback_text(items)}
    scanner = secret_scanner_for(caller)
    for _ in range(count):
        # "send_card" (nanoclaw's card): a post_card effect with no per-runner limit of 50
        tool_call_record(
            caller=caller,
            tool="send_card",
            server=ToolCall.Server.NANOCLAW,
            arguments=spec.model_dump(mode="json"),
            payload=payload,
            secrets=scanner,
        )


def drain() -> tuple[int, float]:
    done, started = 0, time.perf_counter()
    while True:
        ids, _ = tool_calls_claim_new(limit=BATCH)
        if not ids:
            return done, time.perf_counter() - started
        tool_calls_apply_claimed(ids=ids)
        done += len(ids)


def main(count: int, rounds: int) -> None:
    # Nothing else of the bench's may be pending: this drain would take it.
    ToolCall.objects.filter(status__in=["pending", "applying"]).update(status=ToolCall.Status.FAILED)
    together = effects_batch.batchable_calls
    figures: dict[str, list[float]] = {"one by one": [], "together": []}
    print(f"{count} send_card calls per drain into one web thread, batches of {BATCH}, {rounds} rounds")
    for n in range(rounds):
        for mode in figures:
            effects_batch.batchable_calls = together if mode == "together" else (lambda ids: {})
            caller = new_caller()
            record(caller, count)
            done, seconds = drain()
            applied = ToolCall.objects.filter(session_id=caller.session_id, status=ToolCall.Status.APPLIED).count()
            assert done == count == applied, (done, count, applied)
            figures[mode].append(done / seconds)
            print(f"  round {n + 1}, {mode:10}: {done / seconds:6.0f} effects/s, {seconds / done * 1000:5.2f} ms each")
    effects_batch.batchable_calls = together
    before, after = statistics.median(figures["one by one"]), statistics.median(figures["together"])
    print(f"median: one by one {before:.0f} effects/s, together {after:.0f} effects/s ({after / before:.1f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
