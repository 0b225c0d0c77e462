"""Warm linter servers for quality jobs (stdlib only; used by the runner): eslint for JavaScript/TypeScript, pylint
for Python.

One linter process (eslint_server.js, or lint_server.py for Python) stays up per sandbox, started on the first
lint job of its language. It runs under its own uid (not the candidate's: no job can signal, trace or feed it),
with the job rlimits and seccomp filter, and only ever parses the programs it gets. It is restarted after MAX_USES
lints, after any failure or overrun. eslint keeps nothing of one lint for the next (eslint_server.js says why);
pylint would (astroid records what a program assigns to the modules it keeps warm), so lint_server.py lints each
program in a fork of its warm linter (the lint zygote stays the fallback when the server cannot start).
"""

from __future__ import annotations

import json
import os
import select
import signal
import time

import wire

MAX_USES = 500
START_TIMEOUT_S = 30.0
SERVER = "/opt/rewardbox/eslint_server.js"
LIMITS = {"wall_s": 60.0, "total_s": 60.0, "cpu_s": 3600.0, "memory_mb": 256 + 1280, "output_bytes": 1 << 20,
          "file_size_mb": 1, "nofile": 256, "nproc": 32}


class NodeLinter:
    def __init__(self, uid: int, home: str, enter_job, place_fds, job_env, fork, wait_child,
                 argv: list[str] | None = None, limits: dict | None = None, name: str = "eslint") -> None:
        self.uid, self.home = uid, home
        self.argv = argv or ["/usr/bin/node", "--max-old-space-size=256", SERVER]
        self.limits, self.name = limits or LIMITS, name
        self._enter_job, self._place_fds, self._job_env = enter_job, place_fds, job_env
        # The runner's own fork/wait: its reaper then knows this pid and never bills it to a job as an orphan.
        self._fork, self._wait_child = fork, wait_child
        self.pid = 0
        self.to_fd = self.from_fd = -1
        self.reader: wire.FdReader | None = None
        self.uses = 0
        os.makedirs(home, mode=0o700, exist_ok=True)
        os.chmod(home, 0o700)
        os.chown(home, uid, uid)

    def _start(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = self._fork()
        if pid == 0:
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                self._place_fds([devnull, devnull, devnull, req_r, rep_w])
                self._enter_job(self.uid, self.limits, self.home)
                env = self._job_env(None, self.home)
                os.execve(self.argv[0], self.argv, env)
            finally:
                os._exit(127)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.to_fd, self.from_fd = pid, req_w, rep_r
        os.set_blocking(rep_r, False)
        self.reader = wire.FdReader(rep_r)
        self.uses = 0
        ready = self._reply(time.monotonic() + START_TIMEOUT_S)
        if not (isinstance(ready, dict) and ready.get("ready")):
            self.stop()
            raise RuntimeError(f"{self.name} did not start")

    def _cpu_ms(self) -> float:
        """The server's CPU time so far, read by the runner from /proc (the lint's own cost, for benches): its
        main thread's run time in ns (schedstat), else utime + stime in clock ticks."""
        try:
            with open(f"/proc/{self.pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e6
        except (OSError, IndexError, ValueError):
            pass
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def start(self) -> None:
        """Up now (if not already): what the runner calls before it announces it is ready."""
        if not self.pid:
            self._start()

    def stop(self) -> None:
        if self.pid:
            for kill in (os.killpg, os.kill):  # its group (enter_job's setsid): lint_server.py's lint child too
                try:
                    kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            self._wait_child(self.pid, 10.0)
        for fd in (self.to_fd, self.from_fd):
            if fd >= 0:
                os.close(fd)
        self.pid, self.to_fd, self.from_fd, self.reader = 0, -1, -1, None

    def _reply(self, deadline: float) -> object:
        assert self.reader is not None
        while True:
            frames = self.reader.feed()
            if frames:
                return frames[0]
            if self.reader.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            select.select([self.from_fd], [], [], remaining)

    def lint(self, code: str, language: str, timeout_s: float, roots: list[str] | None = None) -> dict:
        """The runner's result record for a lint job; stdout holds the server's JSON (roots: lint_server.py's)."""
        started = time.monotonic()
        if not self.pid or self.uses >= MAX_USES:
            self.stop()
            self._start()
        self.uses += 1
        cpu_before = self._cpu_ms()
        try:
            os.set_blocking(self.to_fd, True)
            wire.write_fd(self.to_fd, {"code": code, "language": language, "roots": roots})
            reply = self._reply(time.monotonic() + timeout_s)
        except OSError:
            reply = None
        wall_ms = (time.monotonic() - started) * 1000.0
        if not isinstance(reply, dict) or "error" in reply:
            self.stop()
            if reply is None:
                return {"status": "timeout", "error": f"{self.name} did not answer in time", "wall_ms": wall_ms,
                        "stdout": "", "stderr": ""}
            # the server's message is its stack trace (our paths): the first line for the result, the rest for the log
            error = str(reply.get("error") if isinstance(reply, dict) else f"{self.name} sent no report")
            return {"status": "runtime_error", "error": error.splitlines()[0][:300] if error else f"{self.name} failed",
                    "trace": error[:2000], "wall_ms": wall_ms, "stdout": "", "stderr": ""}
        child_cpu_ms = float(reply.pop("child_cpu_ms", 0.0))  # lint_server.py lints in a fork: its CPU
        return {"status": "ok", "exit_code": 0, "wall_ms": wall_ms,
                "cpu_ms": self._cpu_ms() - cpu_before + child_cpu_ms,
                "peak_memory_kb": 0,
                "stdout": json.dumps(reply), "stderr": ""}
