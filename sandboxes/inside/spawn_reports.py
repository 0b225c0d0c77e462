"""How a zygote learns and reports the fate of a process it started (stdlib only; runner.py's head has the whole):
the set-up error its child wrote before the program's first line, and the exit status and rusage from wait4."""

from __future__ import annotations

import os
import socket

import wire

SPAWN_FAILED = 125  # a job process's exit status when its set-up failed (its error pipe says why)


def setup_error(err_r: int, pid: int) -> str:
    """What the child wrote on its error pipe before closing it (at exec, or once set up), "" when nothing: a child
    that failed is reaped here (it reports nothing else)."""
    error = b""
    while chunk := os.read(err_r, 4096):
        error += chunk
    os.close(err_r)
    if error:
        os.waitpid(pid, 0)
    return error.decode(errors="replace")


def report_exit(ctl: socket.socket, job_id: int, pid: int) -> None:
    """Wait for the process and tell the runner how it ended, from the kernel (wait4)."""
    _, status, ru = os.wait4(pid, 0)
    wire.send(ctl, {"id": job_id, "pid": pid, "status": status,
                    "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1000.0, "maxrss_kb": ru.ru_maxrss})
