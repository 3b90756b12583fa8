"""The two MCP servers, `calvin` at /mcp and `nanoclaw` at /mcp/nanoclaw, behind one auth.

Each is a package of thin adapters (tools/calvin_mcp, tools/nanoclaw_mcp) over the same
services in tools/services; one runner token works for both, as far as the session's agent
is given that tool set.
"""

from contextlib import AsyncExitStack, asynccontextmanager

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.applications import Starlette

from tools.asgi_json import JsonRpcIdCheck, send_json_response
from tools.auth import SCOPE_KEY, RunnerTokenAuth, caller_from_context
from tools.availability import CALVIN, NANOCLAW, OFFERED, definition_needed, host_has_definition, tool_offered
from tools.errors import ToolRefused
from tools.http_limits import McpPostOnly
from tools.refusals import refusal_note, refusals_check
from tools.services import approval_prompts
from tools.services.common import refusal_redacted

PATHS = {CALVIN: "/mcp", NANOCLAW: "/mcp/nanoclaw"}

# Tools only the runners of some providers call: tools/list shows them to those callers alone,
# and each one's service refuses a call from anyone else.
FOR_PROVIDERS = {approval_prompts.TOOL: approval_prompts.PROVIDERS}

INSTRUCTIONS = {
    CALVIN: (
        "Calvin's tools act beyond your sandbox: they post into this session's thread. "
        "Paths are absolute or relative to the session directory."
    ),
    NANOCLAW: (
        "NanoClaw's tools: messages, files and cards to the destinations in your destination map "
        "(`thread` is this session's own thread), questions, and approval-gated changes to your agent. "
        "Paths are absolute or relative to /workspace/agent/, your session directory."
    ),
}


def _tool_modules(server: str):
    if server == CALVIN:
        from tools.calvin_mcp import TOOLS
    else:
        from tools.nanoclaw_mcp import TOOLS
    return TOOLS


class GatewayServer(MCPServer):
    """The SDK's server with Calvin's availability: tools/list shows a caller the tools the
    gateway's mode offers (CALVIN_MODE, read per request) that its session may use, and a call
    to any other is refused by name. A rejected argument's error text (which quotes the value
    the agent sent) is redacted against the session's secrets before it goes back."""

    def __init__(self, *args, mode: str | None = None, tool_set: str = CALVIN, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode, self.tool_set = mode, tool_set

    def _offered(self, name: str, caller) -> bool:
        """Sync: may read the database (checkout_repo's workspace definition)."""
        if name in OFFERED[self.tool_set] and not tool_offered(name, self.mode, self.tool_set):
            return False
        if caller is None:  # in-process, not over HTTP (tests, docs): no runner, so no session to judge
            return True
        if caller.provider not in FOR_PROVIDERS.get(name, (caller.provider,)):
            return False
        if definition_needed(name, self.mode, self.tool_set):
            return host_has_definition(host_id=caller.host_id, workspace_id=caller.workspace_id)
        return True

    async def _handle_list_tools(self, ctx, params):
        listed = await super()._handle_list_tools(ctx, params)
        request = getattr(ctx, "request", None)
        caller = request.scope.get(SCOPE_KEY) if request is not None else None

        def offered():
            return [t for t in listed.tools if self._offered(t.name, caller)]

        def offered_in_thread():
            close_old_connections()  # a pooled thread outside Django's request cycle
            return offered()

        # Only a tool that depends on the session's definition reads the database: the others
        # are decided here, without a hop to a thread.
        reads = caller is not None and any(definition_needed(t.name, self.mode, self.tool_set) for t in listed.tools)
        tools = await sync_to_async(offered_in_thread, thread_sensitive=False)() if reads else offered()
        return listed.model_copy(update={"tools": tools})

    async def call_tool(self, name, arguments, context=None):
        caller = _caller_or_none(context)
        if caller is not None:
            try:
                refusals_check(paused_until=caller.refusals_paused_until)  # no I/O: read with the caller
            except ToolRefused as exc:
                raise ToolError(str(exc)) from None
        if name in OFFERED[self.tool_set] and not tool_offered(name, self.mode, self.tool_set):
            mode = self.mode or settings.CALVIN_MODE
            await _refused(
                caller, f"{name} is not offered in {mode} mode; tools/list shows the tools this gateway offers"
            )
        if self._tool_manager.get_tool(name) is None:
            await _refused(caller, f"Unknown tool: {name}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The tool's own refusals were counted by tools/adapter.py; arguments the SDK
            # rejected before the tool ran are counted here.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            if caller is None:  # called in-process, not over HTTP: no session
                raise exc from exc.__cause__
            await _refused(caller, str(exc), cause=exc.__cause__)


def _caller_or_none(context):
    try:
        return caller_from_context(context)
    except (AttributeError, KeyError):  # called in-process, not over HTTP: no runner
        return None


def _note_and_redact(caller, text: str) -> str:
    close_old_connections()  # a pooled thread outside Django's request cycle
    refusal_note(runner_id=caller.runner_id)
    return refusal_redacted(caller, text)


async def _refused(caller, text: str, cause: BaseException | None = None):
    """Refuse a call the SDK or the gateway turned away before any tool ran: counted against
    the runner like the tools' own refusals (so a runner that keeps sending wrong types or
    unknown names is paused too), and redacted, since the text may quote what it sent."""
    if caller is not None:
        text = await sync_to_async(_note_and_redact, thread_sensitive=False)(caller, text)
    raise ToolError(text) from cause


def build_server(mode: str | None = None, server: str = CALVIN) -> MCPServer:
    """Every tool of the set is registered; which are offered is decided per request (a fixed
    `mode` here, else settings.CALVIN_MODE at the time), so one process follows its settings."""
    mcp = GatewayServer(name=server, instructions=INSTRUCTIONS[server], mode=mode, tool_set=server)
    for name, fn, description in _tool_modules(server):
        if name in OFFERED[server]:
            mcp.add_tool(fn, name=name, description=description)
    return mcp


def _security() -> TransportSecuritySettings:
    """Host and Origin from ALLOWED_HOSTS, with or without a port (the SDK's own default
    knows only loopback names, so a public name would get 421)."""
    hosts = [h for h in settings.ALLOWED_HOSTS if h != "*"]
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection="*" not in settings.ALLOWED_HOSTS,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[*origins, *(f"{o}:*" for o in origins)],
    )


class ToolSetRouter:
    """/mcp -> calvin, /mcp/nanoclaw -> nanoclaw, for callers whose agent is given that set."""

    def __init__(self, apps: dict[str, object]):
        self.apps = apps
        self.by_path = {PATHS[name]: name for name in apps}

    async def __call__(self, scope, receive, send):
        name = self.by_path.get(scope["path"].rstrip("/") or "/")
        if name is None:
            return await send_json_response(
                send, 404, {"error": "not_found", "detail": "MCP servers: /mcp, /mcp/nanoclaw"}
            )
        if name not in scope[SCOPE_KEY].tool_sets:
            detail = f"this session's agent is not given the {name} tool set"
            return await send_json_response(send, 403, {"error": "forbidden", "detail": detail})
        return await self.apps[name](scope, receive, send)


def build_http_app(mode: str | None = None):
    """The ASGI app for /mcp and /mcp/nanoclaw (stateless JSON, so any web process can answer
    any call), and the app whose lifespan runs both servers' session managers."""
    servers = {name: build_server(mode, name) for name in PATHS}
    apps = {
        name: mcp.streamable_http_app(
            streamable_http_path=PATHS[name], stateless_http=True, json_response=True, transport_security=_security()
        )
        for name, mcp in servers.items()
    }

    @asynccontextmanager
    async def lifespan(_app):
        async with AsyncExitStack() as stack:
            for mcp in servers.values():
                await stack.enter_async_context(mcp.session_manager.run())
            yield

    # The id is checked after auth, so only a runner's requests are read before the SDK reads them.
    return McpPostOnly(RunnerTokenAuth(JsonRpcIdCheck(ToolSetRouter(apps)))), Starlette(lifespan=lifespan)
