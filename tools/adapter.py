"""What every MCP tool function shares: check the arguments, call a service off the event
loop, translate refusals, and pause runners that keep being refused."""

import logging

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver.exceptions import ToolError

from calvin.celery import DATABASE_UNAVAILABLE
from tools.errors import ToolRefused
from tools.input_checks import argument_problems
from tools.refusals import refusal_note, refusals_check
from tools.services.common import refusal_redacted


def _in_thread(service, kwargs):
    close_old_connections()  # tool threads live outside Django's request cycle
    caller = kwargs["caller"]
    try:
        problems = argument_problems({k: v for k, v in kwargs.items() if k != "caller"})
        if problems:
            raise ToolRefused("invalid arguments: " + "; ".join(problems[:30]))
        return service(**kwargs)
    except ToolRefused as exc:
        refusal_note(runner_id=caller.runner_id)
        # A refusal may quote the agent's input (a path, a name): no secret goes back in it.
        raise ToolRefused(refusal_redacted(caller, str(exc))) from None


log = logging.getLogger(__name__)

# The database went away under the call (a restart, a failover). Its COMMIT may have reached the
# server before the answer was lost, so the agent is told it may still land (the outbox sweep
# publishes such a call), rather than a bare "Error executing tool".
DATABASE_DOWN = (
    "Calvin's database did not answer (it may be restarting): try again in a few seconds. If it went"
    " away just as this call was being saved, the call may still take effect."
)


# Not thread-sensitive: calls run side by side, each thread on its own DB connection.
_run = sync_to_async(_in_thread, thread_sensitive=False)


async def call_service(service, **kwargs):
    try:
        refusals_check(paused_until=kwargs["caller"].refusals_paused_until)  # no I/O: read with the caller
        return await _run(service, kwargs)
    except ToolRefused as exc:
        raise ToolError(str(exc)) from None
    except DATABASE_UNAVAILABLE as exc:
        log.warning("a tool call met the database unavailable: %s", exc)
        raise ToolError(DATABASE_DOWN) from None


def _refused_text(caller, exc: ToolRefused) -> str:
    close_old_connections()
    refusal_note(runner_id=caller.runner_id)
    return refusal_redacted(caller, str(exc))


async def call_async_service(service, **kwargs):
    """call_service for a service that waits on the event loop (a host's git work): the same
    argument checks, refusal accounting and redaction, without holding a thread while it waits."""
    caller = kwargs["caller"]
    try:
        refusals_check(paused_until=caller.refusals_paused_until)
        problems = argument_problems({k: v for k, v in kwargs.items() if k != "caller"})
        if problems:
            raise ToolRefused("invalid arguments: " + "; ".join(problems[:30]))
        return await service(**kwargs)
    except ToolRefused as exc:
        text = await sync_to_async(_refused_text, thread_sensitive=False)(caller, exc)
        raise ToolError(text) from None
    except DATABASE_UNAVAILABLE as exc:
        log.warning("a tool call met the database unavailable: %s", exc)
        raise ToolError(DATABASE_DOWN) from None
