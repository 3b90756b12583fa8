"""One MCP SDK client session over real HTTP, kept open and driven from synchronous code.

Hypothesis runs its examples synchronously; opening a client per call would double the
requests (initialize, then the call). The client lives in one task of its own event loop,
on a thread: anyio requires its context to be entered and left by the same task, while
calls may come from any task of that loop.
"""

import asyncio
import threading
from contextlib import AsyncExitStack

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


class ToolSession:
    def __init__(self, url: str, token: str, timeout: float = 90.0):
        self.url, self.token, self.timeout = url, token, timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="fuzz-mcp-client")
        self._ready = threading.Event()
        self._closing: asyncio.Event | None = None
        self._owner = None
        self.client: Client | None = None

    async def _hold(self) -> None:
        self._closing = asyncio.Event()
        async with AsyncExitStack() as stack:
            headers = {"Authorization": f"Bearer {self.token}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=self.timeout))
            transport = streamable_http_client(self.url, http_client=http)
            self.client = await stack.enter_async_context(Client(transport, mode="legacy"))
            self._ready.set()
            await self._closing.wait()

    def __enter__(self) -> "ToolSession":
        self._thread.start()
        self._owner = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        while not self._ready.wait(0.05):
            if self._owner.done():
                self._owner.result()  # raises what stopped the client from opening
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._closing.set)
        try:
            self._owner.result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=self.timeout)

    def list_tools(self):
        return self._run(self.client.list_tools()).tools

    def call(self, tool: str, arguments: dict):
        return self._run(self.client.call_tool(tool, arguments))

    def call_many(self, calls: list[tuple[str, dict]], concurrency: int) -> list:
        """Each (tool, arguments) call, `concurrency` at a time; a call's result, or what it raised."""

        async def all_calls():
            gate = asyncio.Semaphore(concurrency)

            async def one(tool: str, arguments: dict):
                async with gate:
                    try:
                        return await asyncio.wait_for(self.client.call_tool(tool, arguments), self.timeout)
                    except Exception as error:  # an HTTP or protocol error: the test reports it with the call
                        return error

            return await asyncio.gather(*(one(tool, arguments) for tool, arguments in calls))

        return asyncio.run_coroutine_threadsafe(all_calls(), self._loop).result()
