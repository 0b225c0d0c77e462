"""A running job process seen from the runner (stdlib only; runner.py's head has the whole): its pipes pumped
with byte caps, stdin fed, the wall limit enforced from outside with SIGKILL, and its verdict classified from
what the kernel says (wait4 status, CPU, peak memory), never from anything the process wrote."""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cleanup import _kill_quietly
from job_lockdown import _own_standard_streams
from protocol import reply, write_payload
from spawn_reports import SPAWN_FAILED
from zygotes import Zygote, ZygoteLost

if TYPE_CHECKING:
    from runner import Runner


MEMORY_MARKERS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")


class Proc:
    """One job process forked by a zygote: stdin feeding, capped capture, limits, classification."""

    def __init__(self, runner: Runner, zygote: Zygote, uid: int, cwd: str, limits: dict) -> None:
        self.runner, self.zygote, self.uid, self.cwd, self.limits = runner, zygote, uid, cwd, limits
        self.cap = int(limits["output_bytes"])
        self.out = bytearray()
        self.err = bytearray()
        self.truncated = {"stdout": False, "stderr": False}
        self.killed_for: str | None = None
        self.pid = 0
        self.exit: dict | None = None
        self.spawn_error: str | None = None
        self.job_id = 0
        self.fds: dict[int, str] = {}
        self.stdin_w: int | None = None
        self.stdin_data = b""
        self.locked = False

    def start(self, program: dict, stdin: str, files: dict | None, env: dict | None, extra_fds=(),
              wait: bool = True, stdin_file: int | None = None, prepared: bool = False, locked: bool = False) -> None:
        """Spawn the process (extra_fds become its fds 3, 4, ...; they are closed here). Input that cannot be
        encoded ends the job here, before anything runs. wait=False: only the request is sent; spawned() waits
        for the zygote's answer. stdin_file: a read-only descriptor of a file holding the input (cases.py), given
        as fd 0 instead of a pipe the runner feeds (closed here). prepared: the zygote is a case zygote that holds
        the program, its files and environment ready (zygotes._case_zygote): no payload is sent. locked: that
        zygote runs as the job (locked_cases.py): the runner gives the job its pipes, which the zygote cannot."""
        self.runner.used_uids.add(self.uid)
        self.oom_before = self.runner._oom_kills()
        self.started = time.monotonic()
        try:
            self.stdin_data = stdin.encode()
        except UnicodeError:
            for fd in extra_fds:
                os.close(fd)
            self.spawn_error = "the job's stdin is not valid text (it cannot be encoded as UTF-8)"
            return
        payload = [] if prepared else [write_payload({"program": program, "files": files, "env": env})]
        in_r, in_w = (stdin_file, None) if stdin_file is not None else os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (in_w, out_r, err_r):
            if fd is not None:
                os.set_blocking(fd, False)
        self.fds = {out_r: "stdout", err_r: "stderr"}
        self.stdin_w = in_w
        self.locked = locked
        if locked:
            _own_standard_streams([in_r, out_w, err_w], self.uid)
        req = {"role": "job", "uid": self.uid, "cwd": self.cwd, "limits": self.limits}
        if "argv" in program:  # exec'd: the zygote may fork it without Python's after-fork work (zygotes._fork)
            req["exec"] = True
        if prepared:
            req["prepared"] = True
        self.job_id = self.runner.request_spawn(self.zygote, req, [in_r, out_w, err_w, *extra_fds, *payload])
        if wait:
            self.spawned()

    def spawned(self) -> None:
        """Collect the zygote's answer to start(wait=False): the pid, or why set-up failed."""
        if self.spawn_error or self.pid:
            return  # failed before any request, or collected already
        reply = self.zygote.reply(self.job_id)
        if not self.stdin_data:
            self._close_stdin()
        if "spawn_error" in reply:
            self.spawn_error = str(reply["spawn_error"])[:2000]
        self.pid = reply["pid"]

    def abandon(self) -> None:
        """Close the runner's ends (its zygote was lost: the case runs again in another Proc)."""
        for fd in list(self.fds):
            os.close(fd)
        self.fds.clear()
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin_w is not None:
            os.close(self.stdin_w)
            self.stdin_w = None

    def pump(self, timeout: float, extra: Sequence[int] = ()) -> list[int]:
        """Move data for up to timeout seconds; return the extra fds that became readable."""
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        if self.stdin_w is not None:
            poller.register(self.stdin_w, select.POLLOUT)
        if self.exit is None and self.pid and not self.spawn_error:
            poller.register(self.zygote.fileno(), select.POLLIN)
        for fd in extra:
            poller.register(fd, select.POLLIN)
        ready = []
        for fd, ev in poller.poll(max(0.0, timeout) * 1000):
            if fd in self.fds:
                self._read(fd)
            elif fd == self.stdin_w:
                self._write_stdin(ev)
            elif fd == self.zygote.fileno():
                self.exit = self.zygote.reply(self.job_id)
                self.ended = time.monotonic()
            else:
                ready.append(fd)
        return ready

    def _write_stdin(self, ev: int) -> None:
        if ev & (select.POLLERR | select.POLLHUP):
            self._close_stdin()
            return
        try:
            assert self.stdin_w is not None  # polled for POLLOUT only while open
            n = os.write(self.stdin_w, self.stdin_data[:65536])
        except (BlockingIOError, BrokenPipeError):
            self._close_stdin()
            return
        self.stdin_data = self.stdin_data[n:]
        if not self.stdin_data:
            self._close_stdin()

    def _read(self, fd: int) -> None:
        name = self.fds[fd]
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not chunk:
            os.close(fd)
            del self.fds[fd]
            return
        buf = self.out if name == "stdout" else self.err
        room = self.cap - len(buf)
        buf += chunk[: max(0, room)]
        if len(chunk) > room:
            self.truncated[name] = True
            self.kill("output_limit")

    def kill(self, reason: str) -> None:
        if self.exit is not None:
            return  # already reaped: its pid may belong to someone else now
        if self.killed_for is None:
            self.killed_for = reason
        if self.pid:
            _kill_quietly(self.pid)
            # its escaped descendants too (a Proc's uid runs nothing else), except for the routine end of a judge's
            # candidate, and under a locked case zygote (another process of the uid, which must report this one's
            # end): the clean-up after the case kills them there
            if self.killed_for != "ok" and not self.locked:
                self.runner.stop_uid(self.uid)

    def wait_until(self, deadline: float) -> None:
        """Pump until the process exits and its pipes are drained, killing it at the deadline."""
        if self.spawn_error:
            self.exit = {"status": SPAWN_FAILED << 8, "cpu_ms": 0.0, "maxrss_kb": 0}
        while self.exit is None or self.fds:
            now = time.monotonic()
            if now >= deadline:
                if self.exit is None and self.locked and self.killed_for:  # killed, yet its zygote says nothing:
                    raise ZygoteLost(self.zygote, "did not report a case's end")  # a case stopped it
                if self.exit is None:
                    self.kill("timeout")
                    deadline = now + 2.0  # the kill must land; pipes held by escaped children get closed too
                else:
                    break  # exited, but a descendant keeps the pipes open: the cleaner kills it
            elif self.exit is not None and self.killed_for:
                # We killed it and the kill has landed: only an escaped descendant can still hold the pipes.
                # Drain what is buffered, but never wait out the kill grace on its account.
                deadline = min(deadline, now + 0.1)
            self.pump(min(deadline - now, 0.5) if deadline > now else 0.05)
        for fd in list(self.fds):
            os.close(fd)
        self.fds.clear()
        self._close_stdin()
        self.ended = getattr(self, "ended", time.monotonic())

    def result(self) -> dict:
        ex = self.exit or {"status": 0, "cpu_ms": 0.0, "maxrss_kb": 0}
        raw = ex["status"]
        exit_code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) and not self.spawn_error else None
        sig = os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else None
        oom = self.runner._oom_kills() > self.oom_before
        res = reply(
            self._classify(exit_code, sig, ex["cpu_ms"], oom),
            exit_code=exit_code,
            signal=sig,
            wall_ms=(self.ended - self.started) * 1000.0,
            cpu_ms=ex["cpu_ms"],
            peak_memory_kb=ex["maxrss_kb"],
            stdout=self.out.decode(errors="replace"),
            stderr=self.err.decode(errors="replace"),
            stdout_truncated=self.truncated["stdout"],
            stderr_truncated=self.truncated["stderr"],
        )
        if self.spawn_error:
            res["error"] = self.spawn_error
        return res

    def _classify(self, exit_code: int | None, sig: int | None, cpu_ms: float, oom: bool) -> str:
        if self.spawn_error:
            return "sandbox_error"
        if self.killed_for:
            return self.killed_for
        if oom:
            return "memory_limit"
        tail = bytes(self.err[-600:])
        if exit_code == 0:
            return "ok"
        if sig in (signal.SIGXCPU,) or (sig == signal.SIGKILL and cpu_ms >= float(self.limits["cpu_s"]) * 1000 - 50):
            return "timeout"
        if sig == signal.SIGXFSZ:
            return "output_limit"
        if any(m in tail for m in MEMORY_MARKERS):
            return "memory_limit"
        if sig == signal.SIGKILL:
            return "killed"
        return "runtime_error"


class CandidateSlot:
    """The candidate-module process of a judge job; replaced (respawned) when it hangs or dies mid-test."""

    def __init__(self, runner: Runner, limits: dict, candidate: dict) -> None:
        self.runner, self.limits, self.candidate = runner, limits, candidate
        self.proc: Proc | None = None
        self.done: list[dict] = []
        self.pid = 0

    def spawn(self, wait: bool = True) -> tuple[int, int]:
        """Start a candidate host; return (fd to write requests, fd to read replies) for the judge. wait=False:
        the pid is known after spawned()."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.proc = Proc(self.runner, self.runner.zygote, self.runner.cand_uid,
                         self.runner.dirs[self.runner.cand_uid], self.limits)
        # Python candidates load in a forked interpreter; other languages exec their own host (candidate_host.js)
        # with the candidate's files, speaking the same protocol on fds 3 and 4.
        program = self.candidate.get("program") or {"host": True, "code": self.candidate["code"],
                                                    "module": self.candidate.get("module", "solution")}
        self.proc.start(program, "", self.candidate.get("files"), self.candidate.get("env"), extra_fds=(req_r, rep_w),
                        wait=wait)
        if wait:
            self.spawned()
        return req_w, rep_r

    def spawned(self) -> None:
        assert self.proc is not None
        self.proc.spawned()
        self.pid = self.proc.pid

    def pump(self, timeout: float, extra: list[int]) -> list[int]:
        if self.proc is None:
            return []
        if self.proc.killed_for is None and self.proc.exit is None:
            if time.monotonic() - self.proc.started > float(self.limits["total_s"]):
                self.proc.kill("timeout")
        return self.proc.pump(timeout, extra)

    def finish_current(self, alive_means: str) -> dict | None:
        """Kill the current candidate process and record how it ended. A process still alive ends as
        alive_means: "timeout" when the judge gave up on a hung test case, "ok" at the end of the job."""
        if self.proc is None:
            return None
        p = self.proc
        if p.exit is None and p.killed_for is None:
            p.killed_for = alive_means
        p.kill(p.killed_for or alive_means)
        p.wait_until(time.monotonic() + 2.0)
        res = p.result()
        self.done.append(res)
        self.proc = None
        if alive_means == "timeout":  # a respawn follows: nothing of the old process may survive into it
            self.runner.clean_uid(self.runner.cand_uid)
        return {k: res[k] for k in ("status", "exit_code", "signal", "cpu_ms", "peak_memory_kb")}

    def result(self) -> dict:
        """Aggregate over every candidate process of the job: summed CPU, max memory, first output."""
        runs = self.done
        first = runs[0] if runs else {}
        worst = next((r for r in runs if r["status"] != "ok"), first)
        return reply(
            worst.get("status", "sandbox_error"),
            exit_code=worst.get("exit_code"),
            signal=worst.get("signal"),
            cpu_ms=sum(r["cpu_ms"] for r in runs),
            peak_memory_kb=max((r["peak_memory_kb"] for r in runs), default=0),
            stdout=first.get("stdout", ""),
            stderr=first.get("stderr", ""),
            stdout_truncated=any(r["stdout_truncated"] for r in runs),
            stderr_truncated=any(r["stderr_truncated"] for r in runs),
            processes=[{k: r[k] for k in ("status", "exit_code", "signal", "cpu_ms", "peak_memory_kb")} for r in runs],
        )
