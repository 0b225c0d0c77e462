"""Length-prefixed JSON frames, optionally carrying file descriptors (stdlib only).

Used on every private channel inside the sandbox and between host and runner. A frame is a 4-byte big-endian
length followed by UTF-8 JSON. Frames never travel over a job's stdout, which the job controls.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20


class ChannelClosed(Exception):
    """The peer closed the channel (or died) before a whole frame arrived."""


def encode(obj: object) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return HEADER.pack(len(data)) + data


def send(sock: socket.socket, obj: object, fds: list[int] | None = None) -> None:
    data = encode(obj)
    if fds:
        socket.send_fds(sock, [data[:1]], fds)
        data = data[1:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    """n bytes, received into one buffer allocated once: a cases job's stdins (up to a 64 MiB frame) are neither
    copied again nor reallocated per chunk (recv(n) allocated n bytes per call; ~2.4x the runner's CPU)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ChannelClosed()
        got += k
    return buf


def recv(sock: socket.socket, max_frame: int = MAX_FRAME) -> object:
    (length,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if length > max_frame:
        raise ValueError(f"frame of {length} bytes exceeds {max_frame}")
    return json.loads(_recv_exact(sock, length))


def read_request(sock: socket.socket) -> object:
    """The host's next request. A cases job's stdins come as a sealed memfd attached to the frame ({"blob": n},
    with the job's "stdin_sizes"; the host's sandboxes/connection.py raw_stdins): mapped here, and put back into
    the job as views of that mapping, one per stdin (each case then copies its own into its stdin memfd)."""
    msg, fds = recv_with_fds(sock)
    try:
        if not isinstance(msg, dict) or not msg.get("blob"):
            if fds:
                raise ValueError("descriptors that no job announced")
            return msg
        size, job = int(msg["blob"]), msg.get("job")
        if not 0 < size <= MAX_FRAME or not isinstance(job, dict) or len(fds) != 1:
            raise ValueError("a blob that no job announced, over the frame cap, or not one memfd")
        if os.fstat(fds[0]).st_size != size:
            raise ValueError("the blob's memfd is not the size announced")
        blob = memoryview(mmap.mmap(fds[0], size, prot=mmap.PROT_READ))
        sizes = [int(n) for n in job.pop("stdin_sizes", ())]
        if sum(sizes) != size or any(n < 0 for n in sizes):
            raise ValueError("the blob's parts do not add up to it")
        stdins, at = [], 0
        for n in sizes:
            stdins.append(blob[at:at + n])
            at += n
        job["stdins"] = stdins
        return msg
    finally:
        for fd in fds:
            os.close(fd)


def recv_with_fds(sock: socket.socket, maxfds: int = 8) -> tuple[object, list[int]]:
    first, fds, _flags, _addr = socket.recv_fds(sock, 1, maxfds)
    if not first:
        raise ChannelClosed()
    rest = _recv_exact(sock, HEADER.size - 1)
    (length,) = HEADER.unpack(first + rest)
    if length > MAX_FRAME:
        raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME}")
    return json.loads(_recv_exact(sock, length)), list(fds)


def write_fd(fd: int, obj: object) -> None:
    """Send one frame on a plain pipe fd."""
    view = memoryview(encode(obj))
    while view:
        view = view[os.write(fd, view) :]


class FdReader:
    """Incremental frame reader for a non-blocking pipe fd, driven by poll()."""

    def __init__(self, fd: int, max_frame: int = MAX_FRAME) -> None:
        self.fd = fd
        self.max_frame = max_frame
        self.buf = bytearray()
        self.eof = False

    def feed(self) -> list[object]:
        """Read what is available; return the complete frames. Sets eof when the writer is gone."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            self.eof = True
        elif chunk:
            self.buf += chunk
        frames = []
        while len(self.buf) >= HEADER.size:
            (length,) = HEADER.unpack_from(self.buf)
            if length > self.max_frame:
                raise ValueError(f"frame of {length} bytes exceeds {self.max_frame}")
            if len(self.buf) < HEADER.size + length:
                break
            frames.append(json.loads(bytes(self.buf[HEADER.size : HEADER.size + length])))
            del self.buf[: HEADER.size + length]
        return frames
