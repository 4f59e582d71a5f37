"""The server of git_handoff/mcp/protocol.py in-process, behind the MCP SDK's transport
interface, so the SDK's own `Client` can drive it without a subprocess. The SDK (and
anyio) is a test dependency: `git handoff mcp` never imports it."""

from __future__ import annotations

import json
import queue
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from git_handoff.mcp.protocol import Connection, Handlers, Message
from git_handoff.mcp.server import Stopping, handlers
from git_handoff.mcp.tools import Workspace


class InProcessTransport:
    """An async context manager yielding the client's (read, write) streams, the server
    answering on the other ends; leaving it ends the server's input, as closing stdin does."""

    def __init__(self, handlers: Handlers) -> None:
        self.handlers = handlers
        self._cm: Any = None

    async def __aenter__(self) -> Any:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        result: bool | None = await self._cm.__aexit__(exc_type, exc, tb)
        return result

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        outbox: queue.Queue[Message | None] = queue.Queue()
        connection = Connection(self.handlers, outbox.put)
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            server_read, server_write = server_streams

            async def read() -> None:
                async for item in server_read:
                    if isinstance(item, SessionMessage):
                        connection.receive(item.message.model_dump_json(by_alias=True, exclude_unset=True))

            async def write() -> None:
                while (message := await anyio.to_thread.run_sync(outbox.get)) is not None:
                    parsed = types.jsonrpc_message_adapter.validate_json(json.dumps(message), by_name=False)
                    await server_write.send(SessionMessage(parsed))

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                tg.start_soon(read)
                try:
                    yield client_streams
                finally:
                    await client_streams[1].aclose()  # the server's input ends
                    await anyio.to_thread.run_sync(connection.close)
                    outbox.put(None)


def build_server(workspace: Workspace | None = None, stopping: Stopping | None = None) -> InProcessTransport:
    """`git handoff mcp`'s server for the repository around `workspace`, in-process, as a
    transport the MCP SDK's `Client` takes."""
    return InProcessTransport(handlers(workspace, stopping))

