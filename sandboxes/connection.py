"""Host end of the private channel to one in-sandbox runner (a unix socket, length-prefixed JSON frames)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import struct
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20
IOV_MAX = 1024  # buffers one writev takes
ALIVE_EVERY_S = 0.5  # while the socket is not up: how often to ask whether the sandbox still runs at all


def raw_stdins(message: dict[str, Any], files: StdinsFiles | None = None) -> tuple[dict[str, Any], int | None]:
    """A cases job's stdins as raw bytes in a sealed memfd passed with the frame (the frame says how many, and each
    one's size), not as JSON: an io item's input is megabytes, which JSON encoding here and decoding in the runner
    cost ~3 ms per MB, and which the channel's socket took ~2.4 ms of this side's CPU per MB to stream (the copies
    of asyncio's write buffer). The runner (inside/wire.py read_request) maps the memfd and splits it back. Returns
    the message and a descriptor of that memfd (the caller's to close), from files (STDINS_FILES by default), which
    writes the stdins of a group's samples once. Other messages, and stdins that are not valid text (the runner
    refuses those one by one, as before), go as they are, with no descriptor."""
    job = message.get("job")
    if message.get("op") != "cases" or not isinstance(job, dict) or not isinstance(job.get("stdins"), list):
        return message, None
    got = (files or STDINS_FILES).get(job["stdins"])
    if got is None:
        return message, None
    fd, sizes = got
    job = {**{k: v for k, v in job.items() if k != "stdins"}, "stdin_sizes": sizes}
    return {**message, "job": job, "blob": sum(sizes)}, fd


def stdins_memfd(parts: list[bytes]) -> int:
    """A sealed memfd holding parts one after the other (written with writev: no joined copy here)."""
    fd = os.memfd_create("rewardbox-stdins", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        views = [memoryview(p) for p in parts if p]
        while views:
            written = os.writev(fd, views[:IOV_MAX])
            while written:  # drop what was written, whole parts then a part's head
                if written >= len(views[0]):
                    written -= len(views.pop(0))
                else:
                    views[0], written = views[0][written:], 0
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


class StdinsFiles:
    """The sealed memfds of recent cases jobs' stdins, by the identity of their strings: the samples of one problem
    (a GRPO group, sent together) carry the very same strings of their tests, so their jobs share one memfd,
    encoded and written once instead of once per sample (an io item's stdins are megabytes). Sealed, so no job, nor
    anything here, can change what another job reads. It holds the strings it remembers, so their ids cannot be
    reused while it does; at most max_bytes of stdins, the least recently used forgotten first."""

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], tuple[list[Any], int, list[int]]] = OrderedDict()
        self._bytes = 0

    def get(self, stdins: list[Any]) -> tuple[int, list[int]] | None:
        """(a descriptor of the memfd, the caller's to close; each stdin's size in bytes), or None when the stdins
        are not all text, or empty."""
        key = tuple(map(id, stdins))  # the remembered strings are alive: the same ids are the same strings
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
            return os.dup(hit[1]), hit[2]
        try:
            parts = [s.encode() for s in stdins]
        except (AttributeError, UnicodeError):
            return None
        sizes = [len(p) for p in parts]
        size = sum(sizes)
        if not size:
            return None
        fd = stdins_memfd(parts)
        if size > self.max_bytes:
            return fd, sizes
        self._entries[key] = (list(stdins), fd, sizes)
        self._bytes += size
        while self._bytes > self.max_bytes:
            self._forget(next(iter(self._entries)))
        return os.dup(fd), sizes

    def _forget(self, key: tuple[int, ...]) -> None:
        _, fd, sizes = self._entries.pop(key)
        self._bytes -= sum(sizes)
        os.close(fd)


STDINS_FILES = StdinsFiles()


class RunnerGone(ConnectionError):
    """The runner closed the channel, stopped answering, or answered out of step."""


class _Protocol(asyncio.StreamReaderProtocol):
    """A stream protocol that also says when the runner hangs up, even while nobody is reading (an idle sandbox
    whose machinery broke: its runner exits, and the pool replaces it at once)."""

    def __init__(self, reader: asyncio.StreamReader, on_hangup: Callable[[], None]) -> None:
        super().__init__(reader)
        self._on_hangup = on_hangup

    def eof_received(self) -> bool | None:
        self._on_hangup()
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_hangup()
        super().connection_lost(exc)


class RunnerConnection:
    """One runner, one job at a time. The runner sends {"ready": true} whenever it can take the next job, and
    every answer carries the id of the request it answers."""

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader
        self._writer: asyncio.StreamWriter
        self.ready = False
        self.gone = False
        self.on_hangup: Callable[[], None] | None = None
        self._next_id = 0

    @classmethod
    async def open(cls, path: str, timeout: float,
                   alive: Callable[[], Awaitable[bool]] | None = None) -> RunnerConnection:
        """Connect to the runner once its socket is up and wait for its first {"ready"}. `alive` tells whether the
        sandbox still runs: a sandbox that died while starting (killed, crashed) never opens its socket, and is
        noticed within ALIVE_EVERY_S instead of at the deadline (issue 30: a minute per killed start)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_check = loop.time() + ALIVE_EVERY_S
        conn = cls()
        while True:
            reader = asyncio.StreamReader(limit=MAX_FRAME, loop=loop)
            protocol = _Protocol(reader, conn._hung_up)
            try:
                transport, _ = await loop.create_unix_connection(lambda: protocol, path)  # noqa: B023 - called in this await
                break
            except (FileNotFoundError, ConnectionRefusedError):
                now = loop.time()
                if now > deadline:
                    raise RunnerGone(f"no runner listening on {path} after {timeout:g}s") from None
                if alive is not None and now >= next_check:
                    if not await alive():
                        raise RunnerGone("the sandbox ended while starting") from None
                    next_check = loop.time() + ALIVE_EVERY_S
                await asyncio.sleep(0.02)
        conn._reader, conn._writer = reader, asyncio.StreamWriter(transport, protocol, reader, loop)
        # Connected: a runner that dies from here on closes the channel, which wait_ready sees at once.
        await conn.wait_ready(max(0.1, deadline - loop.time()))
        return conn

    def _hung_up(self) -> None:
        if not self.gone:
            self.gone = True
            if self.on_hangup is not None:
                self.on_hangup()

    async def _recv(self) -> dict[str, Any]:
        try:
            (length,) = HEADER.unpack(await self._reader.readexactly(HEADER.size))
            if length > MAX_FRAME:
                raise RunnerGone(f"frame of {length} bytes")
            frame = json.loads(await self._reader.readexactly(length))
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError) as e:
            raise RunnerGone(f"runner channel closed: {e!r}") from None
        if not isinstance(frame, dict):
            raise RunnerGone("the runner sent something that is not a record")
        return frame

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
        if not self.ready or self.gone:
            raise RunnerGone("runner not ready")
        self.ready = False
        self._next_id += 1
        message, stdins_fd = raw_stdins(message)
        data = json.dumps({**message, "id": self._next_id}, separators=(",", ":")).encode()
        frame = HEADER.pack(len(data)) + data
        try:
            if stdins_fd is not None:
                await self._send_with_fd(frame, stdins_fd)
            else:
                self._writer.write(frame)
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            raise RunnerGone(f"runner channel closed: {e!r}") from None
        reply = await self._recv()
        if reply.get("id") != self._next_id:
            raise RunnerGone("the runner's answer is not about this request (channel out of step)")
        return reply

    async def _send_with_fd(self, frame: bytes, fd: int) -> None:
        """Send frame with fd attached to its first bytes (SCM_RIGHTS), then the rest of it through the stream; fd
        is closed here. Called with nothing of ours queued (a request follows the previous reply), so the socket
        takes at least those first bytes at once."""
        try:
            await self._writer.drain()
            own = socket.socket(fileno=os.dup(self._writer.get_extra_info("socket").fileno()))  # non-blocking, as
            with own:  # asyncio's: a full socket raises BlockingIOError
                for _ in range(1000):
                    try:
                        sent = socket.send_fds(own, [frame], [fd])
                        break
                    except BlockingIOError:
                        await asyncio.sleep(0.001)
                else:
                    raise ConnectionError("the runner's socket took nothing for a second")
        finally:
            os.close(fd)
        if sent < len(frame):
            self._writer.write(frame[sent:])

    def close(self) -> None:
        self._writer.close()
