"""Host end of the private channel to one in-sandbox runner (a unix socket, length-prefixed JSON frames)."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20


class RunnerGone(ConnectionError):
    """The runner closed the channel or stopped answering."""


class RunnerConnection:
    """One runner, one job at a time. The runner sends {"ready": true} whenever it can take the next job."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self.ready = False

    @classmethod
    async def open(cls, path: str, timeout: float) -> RunnerConnection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=MAX_FRAME)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if loop.time() > deadline:
                    raise RunnerGone(f"no runner listening on {path} after {timeout:g}s") from None
                await asyncio.sleep(0.02)
        conn = cls(reader, writer)
        await conn.wait_ready(max(0.1, deadline - loop.time()))
        return conn

    async def _recv(self) -> dict[str, Any]:
        try:
            (length,) = HEADER.unpack(await self._reader.readexactly(HEADER.size))
            if length > MAX_FRAME:
                raise RunnerGone(f"frame of {length} bytes")
            return json.loads(await self._reader.readexactly(length))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            raise RunnerGone(f"runner channel closed: {e!r}") from None

    async def wait_ready(self, timeout: float) -> None:
        """Wait for the runner's announcement that the previous job is cleaned up."""
        if self.ready:
            return
        try:
            frame = await asyncio.wait_for(self._recv(), timeout)
        except TimeoutError:
            raise RunnerGone(f"runner not ready after {timeout:g}s") from None
        if not frame.get("ready"):
            raise RunnerGone(str(frame.get("error") or "runner refused further jobs"))
        self.ready = True

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        if not self.ready:
            raise RunnerGone("runner not ready")
        self.ready = False
        data = json.dumps(message, separators=(",", ":")).encode()
        try:
            self._writer.write(HEADER.pack(len(data)) + data)
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            raise RunnerGone(f"runner channel closed: {e!r}") from None
        return await self._recv()

    def close(self) -> None:
        self._writer.close()
