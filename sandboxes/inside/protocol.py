"""The runner's wire with the host and with its zygotes (stdlib only; see runner.py's head for the whole).

A job's reply is one record built by reply(), whose keys are REPLY_KEYS (each documented once, in
sandboxes/types.py). A job's own data travels to the forked child in a sealed memfd (write_payload / read_payload),
never through a zygote's memory. SandboxFault: the machinery itself failed, and the sandbox is replaced."""

from __future__ import annotations

import marshal
import os

VERSION = "1"


# The keys of a job's reply (documented in sandboxes/types.py, which cannot be imported here: this file is stdlib
# only and runs in the sandbox; tests/test_protocol_units.py checks that both sides list the same keys).
REPLY_KEYS = frozenset({
    "status", "exit_code", "signal", "wall_ms", "cpu_ms", "peak_memory_kb", "stdout", "stderr", "stdout_truncated",
    "stderr_truncated", "error", "events", "runs", "spec_error", "files", "usage", "trace", "timings", "files_kb",
    "processes", "cases",
})


def reply(status: str, **fields: object) -> dict:
    """A job's reply record. Every job's answer passes through here (Runner.handle), so a key the host does not
    know is caught as a fault of ours rather than silently dropped on the host."""
    unknown = fields.keys() - REPLY_KEYS
    if unknown:
        raise ValueError(f"undocumented reply keys {sorted(unknown)}")
    return {"status": status, **fields}


def write_payload(obj: dict) -> int:
    """A job's own data in an anonymous file, for the forked child to read (the zygote only passes it on).

    marshal, not JSON: the child decodes it in memory it shares with the zygote until written, and marshal's
    decoder touches a fraction of the pages (a job's CPU time grew by ~0.15 ms with JSON). Written and read by the
    same interpreter, from plain data the runner decoded from JSON itself."""
    fd = os.memfd_create("rewardbox-job", os.MFD_CLOEXEC)
    try:
        view = memoryview(marshal.dumps(obj))
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_payload(fd: int) -> dict:
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, min(size - offset, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return marshal.loads(b"".join(chunks))


class SandboxFault(Exception):
    """The machinery failed (a zygote is gone, a reply does not belong to the job): this sandbox cannot be trusted
    with another job. str() is safe to show; the traceback goes to the host's log only."""
