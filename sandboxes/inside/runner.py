"""rewardbox in-sandbox runner (stdlib only; runs as root with CAP_SETUID/SETGID/KILL/CHOWN inside the sandbox).

It answers jobs on a unix socket in a directory only root can enter, one job at a time, and reports a result
record that the job cannot forge: exit status, CPU time and peak memory come from the kernel (wait4), output is
read from pipes with byte caps, and the wall limit is enforced from outside with SIGKILL.

Processes (all inside the sandbox):
- runner (this file): trusted; never runs untrusted code; holds test specs. It is the sandbox's first process:
  when it exits, the kernel ends every other one.
- zygotes: forked at start-up, before any job data exists in memory, and they never receive any: a spawn request
  carries only descriptors and non-secret parameters (uid, working directory, limits). The job's own data
  (program, files, environment, test spec) travels in a memfd that only the forked child reads, after the fork.
  So no job process inherits another job's data, not even as freed heap. Children set their OOM score to the
  maximum, drop to the job uid, take rlimits, the seccomp filter and a Landlock domain, then run the program.
  * zygote: run jobs and the candidate module of judge jobs;
  * lint zygote: the same, with the linter imported once (warm) for quality jobs when the pylint server (below)
    cannot start;
  * judge zygote: the judge process of judge jobs, under its own uid; it runs the tests and calls the candidate
    through a plain-data channel. The candidate (another uid) can neither signal, ptrace nor open its pipes.
  * lean zygote: forked like the others but importing nothing more than the runner has at that point (no
    threading: its at-fork hook alone costs every forked process ~0.3 ms of CPU, counted as the program's); the
    cases of io items fork from it (cases.py), a compiled program's directly;
  * case zygote: forked by the lean zygote for one cases job (cases.py), with that job's program only. For a
    Python program it compiles it once (runs none of it) and prepares what each case would do before the
    program's first line (environment, sys.path, our modules out of sys.modules, a fresh __main__, the standard
    streams: job_lockdown.prepare_main). Then it locks itself down as the job (locked_cases.py: the job uid,
    rlimits, seccomp, Landlock, once for all the cases) and starts every case of the job: a fork that runs the
    prepared program, or a posix_spawn of the compiled one; it exits with the job. A case that kills, stops or
    changes it, or leaves a process behind, loses it: that case (if unreported) and the rest then fork from the
    lean zygote, each locking itself down as any job process.
- linter servers (node_lint.py): pylint (lint_server.py) and, on first use, eslint, each under its own uid with
  the job rlimits and seccomp (no job can read, signal or feed them). pylint lints each program in a fork of its
  warm process, so nothing a program does to the linter's state reaches the next; eslint builds a fresh Linter per
  program. Restarted every 500 programs and after any failure.
- owner watchdog: holds the host's connection and ends the runner when the host hangs up (its owner died), so
  that no sandbox outlives the process that started it.
After every job a cleaner running as each job uid kills every process of that uid and wipes its files (cleaners
and file readers are forked from the runner, but run only this file's code and are not dumpable: no job process
can read their memory).

Files (siblings in this folder, each stdlib only): runner.py (this: the Runner, which holds the test specs and
answers the host, and serve/main), protocol.py (the reply record and the memfd payloads), zygotes.py (the zygotes
and the runner's end of their channels), job_lockdown.py (what a job process does between the fork and the
program), job_process.py (a running job process seen from the runner: pipes, limits, verdict), cleanup.py (after a
job: its uid's processes killed, its files wiped, fetched files read).

Protocol with a zygote: {"id", "role", "uid", "cwd", "limits"} plus descriptors -> {"id", "pid"} (or
{"id", "pid", "spawn_error"}), then {"id", "pid", "status", "cpu_ms", "maxrss_kb"} when the process exits. A reply
whose id is not the job's, or a zygote that is gone, is a fault of the sandbox (SandboxFault): the job ends as
sandbox_error, the runner says it is not ready and exits, and the host replaces the sandbox. A failure while
starting a job (input that cannot be encoded, a file that cannot be written) ends that job alone.

Protocol with the host: a request {"id", "op", "job"} (sandboxes/types.py, Job.to_wire) is answered by one reply
record built by reply() below, whose keys are REPLY_KEYS; each key's type, meaning and origin is documented once,
in sandboxes/types.py (Reply), which decodes them (Result.from_wire).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import usage  # noqa: E402
import wire  # noqa: E402
from cleanup import (  # noqa: E402
    _become,
    _empty,
    _kill_every_process_as,
    _kill_quietly,
    _only,
    _pids_of_uid,
    _read_job_files,
    _wipe_owned,
)
from job_lockdown import (  # noqa: E402
    DEFAULT_LIMITS,
    SCRATCH,
    SHARED_ROOTS,
    WRITABLE_ROOTS,
    enter_job,
    job_env,
    place_fds,
)
from job_process import CandidateSlot, Proc  # noqa: E402
from protocol import VERSION, SandboxFault, reply, write_payload  # noqa: E402
from zygotes import Zygote, zygote_main  # noqa: E402

JUDGE_MEMORY_MB = 2048


ACCEPT_TIMEOUT_S = 15.0  # the host connects within milliseconds of the socket appearing


# Lint jobs node_lint.py takes (eslint); the others are Python's (pylint). The runner is stdlib-only, so this mirrors
# Language.linter of sandboxes/languages.py (tests/test_language_registry_units.py checks that they agree).
ESLINT_LANGUAGES = ("javascript", "typescript")


class Runner:
    def __init__(self, uid_base: int, oom_control: str | None) -> None:
        self.cand_uid = uid_base + 1
        self.judge_uid = uid_base + 2
        self.dirs = {self.cand_uid: os.path.join(SCRATCH, "c"), self.judge_uid: os.path.join(SCRATCH, "j")}
        self.oom_control = oom_control
        self.children: dict[int, int | None] = {}  # our own children -> exit status once reaped
        self.jobs_done = 0
        self.used_uids: set[int] = set()
        # Orphans of jobs (daemons, forked helpers nobody waited for) are reaped here as sub-reaper; their CPU and
        # peak memory are kept so that measuring jobs (inside/measure.py) count work moved into them.
        self.orphan_cpu_ms = 0.0
        self.orphan_maxrss_kb = 0
        # The candidate's home is root-owned and sticky (like /tmp), so the runner can see at a glance whether a
        # job left files; the judge's home belongs to the judge alone (the candidate must not read it).
        for root in SHARED_ROOTS:  # like /tmp: any job uid may create files, none may touch another's (sticky)
            os.chmod(root, 0o1777)  # Docker gives a tmpfs the mode of the image's directory (/mnt: 0755)
        cand_home = self.dirs[self.cand_uid]
        os.makedirs(cand_home, exist_ok=True)
        os.chmod(cand_home, 0o1777)
        judge_home = self.dirs[self.judge_uid]
        os.makedirs(judge_home, mode=0o700, exist_ok=True)
        os.chmod(judge_home, 0o700)  # before chown: without CAP_FOWNER root cannot chmod what it gave away
        os.chown(judge_home, self.judge_uid, self.judge_uid)
        import node_lint  # JavaScript/TypeScript quality: a warm eslint under its own uid, started on first use

        self.node_linter = node_lint.NodeLinter(uid_base + 3, os.path.join(SCRATCH, "l"), enter_job, place_fds,
                                                job_env, self._fork, self._wait_child)
        # Python quality: a warm pylint server under its own uid too (node_lint.py says why), started on first use.
        server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lint_server.py")
        self.py_linter = node_lint.NodeLinter(uid_base + 4, os.path.join(SCRATCH, "p"), enter_job, place_fds, job_env,
                                              self._fork, self._wait_child, argv=[sys.executable, "-s", server],
                                              name="pylint")
        self._started_zygotes: list[Zygote] = []
        self.zygote = self._start_zygote("zygote")
        self.lint_zygote = self._start_zygote("lint zygote")
        self.judge_zygote = self._start_zygote("judge zygote")
        # Repo tasks' test processes: pytest is imported into it on the first repo job (repo_judge.py); forked now,
        # like every zygote, before any job data exists in the runner's memory.
        self.pytest_zygote = self._start_zygote("pytest zygote")
        self.pytest_warm = False
        # io items' cases (cases.py): forked from a zygote that imported nothing more than the runner has now
        self.lean_zygote = self._start_zygote("lean zygote", lean=True)
        self.zygotes = (self.zygote, self.lint_zygote, self.judge_zygote, self.lean_zygote)
        # The lint zygote imports and exercises pylint only if the pylint server cannot run (warm_linters).
        self.lint_warm_id = 0
        self.lint_warm = False

    # -- process bookkeeping

    def _fork(self) -> int:
        pid = os.fork()
        if pid:
            self.children[pid] = None
        return pid

    def _start_zygote(self, name: str, lean: bool = False) -> Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = self._fork()
        if pid == 0:
            for fd in (ours, *(z.sock for z in self._started_zygotes)):
                fd.close()  # the runner's ends, ours and the earlier zygotes'
            zygote_main(theirs, lean=lean)
            os._exit(0)
        theirs.close()
        self._started_zygotes.append(Zygote(name, ours, pid))
        return self._started_zygotes[-1]

    def broken_zygote(self) -> str | None:
        """What is wrong when a zygote has exited (killed, crashed): then no job can run here."""
        self.reap()
        for z in self.zygotes:
            if self.children.get(z.pid) is not None or z.pid not in self.children:
                return f"the {z.name} ended"
        return None

    def wait_for_request(self, conn: socket.socket) -> str | None:
        """Block until the host sends something; returns what broke instead if a zygote's channel stirs first
        (an idle zygote says nothing: it has ended)."""
        r, _, _ = select.select([conn, *(z.sock for z in self.zygotes)], [], [])
        if any(z.sock in r for z in self.zygotes):
            return self.broken_zygote() or "a zygote spoke out of turn"
        return None

    def watch_owner(self, conn: socket.socket) -> None:
        """Fork the owner watchdog: it holds the host's connection and, when the host hangs up or dies, ends the
        runner (and so the whole sandbox), also in the middle of a job."""
        runner_pid = os.getpid()
        if self._fork() == 0:
            try:
                keep = conn.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, 65536)
                poller = select.poll()
                poller.register(keep, select.POLLRDHUP)
                while not any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, ev in poller.poll()):
                    pass
                os.kill(runner_pid, signal.SIGTERM)
            finally:
                os._exit(0)

    def fault_result(self, fault: str, oom_before: int) -> dict:
        """The result of a job during which the machinery failed. When the kernel's OOM killer struck meanwhile,
        the job exhausted the sandbox's memory (only it and the machinery ran): that is the job's failure."""
        trace = traceback.format_exc()[-3000:]
        if self._oom_kills() > oom_before:
            return reply("memory_limit", error="the job exhausted the sandbox's memory", trace=trace)
        return reply("sandbox_error", error=fault, trace=trace)

    def reap(self) -> None:
        """Collect every exited child, including orphans we inherit as sub-reaper (daemons of jobs)."""
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                self.children[pid] = status
            else:
                self.orphan_cpu_ms += (ru.ru_utime + ru.ru_stime) * 1000.0
                self.orphan_maxrss_kb = max(self.orphan_maxrss_kb, ru.ru_maxrss)

    def _wait_child(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            self.reap()
            status = self.children.get(pid)
            if status is not None:
                del self.children[pid]
                return status
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0002)

    def clean_uid(self, uid: int, expected: set[str] | frozenset[str] = frozenset(), keep: int = 0) -> bool:
        """Kill every process of uid and wipe the files it owns. True when nothing is left behind. expected: names
        in uid's home that are not its own (root's read-only files of a cases job, cases.py). keep: a process of
        uid that may stay (a locked case zygote, locked_cases.py): when it is the only one, only the files are
        wiped (it starts nothing unasked, so none can appear meanwhile); when any other is left, it is killed with
        the rest."""
        others = [p for p in _pids_of_uid(uid) if p != keep]
        if (uid == self.cand_uid and not others and all(_empty(root) for root in SHARED_ROOTS)
                and _only(self.dirs[uid], expected)):
            return True  # nothing running, nothing written: no cleaner needed (the common case)
        wipe_only = bool(keep) and not others
        pid = self._fork()
        if pid == 0:
            try:
                if wipe_only:
                    _become(uid)
                else:
                    _kill_every_process_as(uid, zombies=True)
                home = self.dirs[uid]
                if os.stat(home).st_uid == uid:
                    os.chmod(home, 0o700)
                for root in WRITABLE_ROOTS:
                    _wipe_owned(root, uid, keep=(home,))
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        status = self._wait_child(pid, 5.0)
        return status == 0 and not [p for p in _pids_of_uid(uid) if not wipe_only or p != keep]

    def stop_uid(self, uid: int) -> bool:
        """Kill every process of uid now; True when none is left. A killed job's result waits for it, so that what
        the job forked out of its process group (setsid) does not compete for the CPU with the runner until the
        clean-up that follows the reply (which still checks and wipes); repo and session steps end with it."""
        if not _pids_of_uid(uid):
            return True
        pid = self._fork()
        if pid == 0:
            try:
                os._exit(0 if _kill_every_process_as(uid, zombies=False) else 1)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        status = self._wait_child(pid, 5.0)
        return status == 0 and not _pids_of_uid(uid)

    # -- zygote calls

    def spawn(self, zygote: Zygote, req: dict, fds: list[int]) -> tuple[int, dict]:
        """Ask a zygote for a process; returns (job id, its first reply). The fds are closed here either way."""
        job_id = self.request_spawn(zygote, req, fds)
        return job_id, zygote.reply(job_id)

    def request_spawn(self, zygote: Zygote, req: dict, fds: list[int]) -> int:
        """Send a zygote a spawn request without waiting for its reply (zygote.reply(job id) collects it), so that
        two zygotes can set up their processes at the same time. The fds are closed here either way."""
        try:
            return zygote.send(req, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def start_case_zygote(self, program: dict, env: dict | None, limits: dict,
                          deadline: float) -> tuple[Zygote, int, dict] | None:
        """A case zygote (_case_zygote) forked by the lean zygote for one cases job's program: (its channel, the
        lean zygote's job id for it, its ready message, whose "prepared" says the cases' requests may come without
        a payload and "locked" that it locked itself down as the job: locked_cases.py), or None when it answered
        no ready message by the deadline, or could not lock down (killed; the cases then fork from the lean
        zygote, as before). end_case_zygote ends it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        os.set_inheritable(ours.fileno(), False)
        req = {"role": "case_zygote", "uid": self.cand_uid, "cwd": self.dirs[self.cand_uid], "limits": limits}
        payload = write_payload({"program": program, "env": env, "prepare": True, "lock": True})
        job_id, first = self.spawn(self.lean_zygote, req, [theirs.detach(), payload])
        if "spawn_error" in first:
            ours.close()
            return None
        case_zygote = Zygote("case zygote", ours, int(first["pid"]))
        r, _, _ = select.select([ours], [], [], max(0.0, deadline - time.monotonic()))
        ready = case_zygote.reply(0) if r else None
        if ready is None or "unusable" in ready:
            self.end_case_zygote(case_zygote, job_id, kill=True)
            return None
        return case_zygote, job_id, ready

    def end_case_zygote(self, case_zygote: Zygote, job_id: int, kill: bool = False) -> None:
        """Close its channel (it exits) and collect the zygote's report on it, so that the channel stays in step."""
        if kill:
            try:
                os.kill(case_zygote.pid, signal.SIGKILL)
            except OSError:
                pass
        case_zygote.sock.close()
        self.wait_exit(self.lean_zygote, job_id, 10.0)

    def wait_exit(self, zygote: Zygote, job_id: int, timeout: float) -> dict:
        """The zygote's exit report for job_id (its process was killed or is about to end)."""
        r, _, _ = select.select([zygote.sock], [], [], timeout)
        if not r:
            raise SandboxFault(f"a process of the {zygote.name} did not end after SIGKILL")
        return zygote.reply(job_id)

    # -- jobs

    def handle(self, conn: socket.socket | None, msg: dict) -> dict:
        op = msg.get("op")
        if op == "ping":
            return {"ok": True, "version": VERSION, "pid": os.getpid(), "jobs_done": self.jobs_done}
        if op == "warm_lint":
            if not self.lint_warm:
                if not self.lint_warm_id:
                    self.lint_warm_id = self.lint_zygote.send({"warm": "lint"})
                self.lint_zygote.reply(self.lint_warm_id)
                self.lint_warm = True
            return {"ok": True}
        if op == "health":
            return self.health_check()
        return reply(**self.job_reply(op, msg.get("job") or {}))

    def job_reply(self, op: str | None, job: dict) -> dict:
        """The answer to one job, as the op's own code builds it (handle checks its keys)."""
        limits = {**DEFAULT_LIMITS, **(job.get("limits") or {})}
        self.jobs_done += 1
        if op == "run":
            return self.accounted(job, lambda: self.run_job(job, limits, self.zygote))
        if op == "cases":  # every io case of one program (cases.py)
            import cases

            return self.accounted(job, lambda: cases.cases_job(self, job, limits, Proc, reply))
        if op == "lint" and job.get("language") in ESLINT_LANGUAGES:
            return self.node_linter.lint(job["code"], job["language"], float(limits["wall_s"]))
        if op == "lint":
            try:
                return self.py_linter.lint(job["code"], "python", float(limits["wall_s"]), job.get("roots"))
            except (RuntimeError, OSError):  # the server did not start: a fork of the lint zygote lints it
                pass
            if not self.lint_warm:
                self.handle(None, {"op": "warm_lint"})
            return self.run_job({"program": {"lint": True, "code": job["code"], "roots": job.get("roots")}}, limits,
                                self.lint_zygote)
        if op == "judge":
            return self.accounted(job, lambda: self.judge_job(job, limits))
        if op == "measure":
            import measure

            return measure.measure_job(self, job, limits)
        if op == "repo":  # a patch graded by a repository's own tests
            import repo_judge

            return repo_judge.repo_job(self, job, limits)
        if op == "session":  # one command of an agent session (session_exec.py)
            import session_exec

            return session_exec.session_job(self, job, limits)
        return reply("sandbox_error", error=f"unknown op {op!r}")

    def accounted(self, job: dict, run) -> dict:
        """job["account"]: the result also carries "usage", everything the job's processes spent, counted as a
        measuring run counts it (measure.py): orphans reaped and files weighed before the reply, not after."""
        if not job.get("account"):
            return run()
        import measure

        return measure.accounted(self, run)

    def warm_linters(self) -> None:
        """Ready means warm: the pylint server is up before the first job (failing that, the lint zygote is warm)."""
        try:
            self.py_linter.start()
        except (RuntimeError, OSError):
            self.handle(None, {"op": "warm_lint"})

    def after_job(self) -> bool:
        clean = True
        for uid in self.used_uids:
            clean = self.clean_uid(uid) and clean
        return clean

    def _oom_kills(self) -> int:
        if not self.oom_control:
            return 0
        try:
            with open(self.oom_control) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def health_check(self) -> dict:
        """Fork a real job through every zygote and check its answer: what the host asks after a sandbox_error."""
        nonce = os.urandom(8).hex()
        limits = {**DEFAULT_LIMITS, "wall_s": 10.0, "total_s": 10.0}
        for zygote in (self.zygote, self.lint_zygote):
            res = self.run_job({"program": {"code": f"print({nonce!r})"}}, limits, zygote)
            if res.get("status") != "ok" or res.get("stdout") != nonce + "\n":
                return {"ok": False, "error": f"a job of the {zygote.name} failed: {res.get('status')}"}
        spec = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": nonce}]}
        res = self.judge_job({"candidate": {"code": f"def f():\n    return {nonce!r}\n", "module": "solution"},
                              "judge": spec}, limits)
        passed = [e.get("passed") for e in res.get("events", []) if e.get("event") == "case"]
        if res.get("status") != "ok" or passed != [True]:
            return {"ok": False, "error": f"a judge job failed: {res.get('status')}"}
        return {"ok": True}

    def run_job(self, job: dict, limits: dict, zygote: Zygote) -> dict:
        """Run one program to completion under limits."""
        proc = Proc(self, zygote, self.cand_uid, self.dirs[self.cand_uid], limits)
        proc.start(job["program"], job.get("stdin") or "", job.get("files"), job.get("env"))
        proc.wait_until(time.monotonic() + float(limits["wall_s"]))
        result = proc.result()
        if job.get("fetch_files"):
            result["files"] = self.fetch_files(self.cand_uid, self.dirs[self.cand_uid], job["fetch_files"])
        return result

    def fetch_files(self, uid: int, cwd: str, paths: list[str]) -> dict:
        """Read files the job left, as the job's uid (never as root): regular files only, the last path component
        never followed if it is a link, FIFOs and devices skipped without blocking, sizes capped. Values are
        base64; a missing or refused file is absent."""
        r, w = os.pipe()
        pid = self._fork()
        if pid == 0:
            try:
                os.close(r)
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.chdir(cwd)
                wire.write_fd(w, _read_job_files(paths))
            finally:
                os._exit(0)
        os.close(w)
        reader = wire.FdReader(r)
        os.set_blocking(r, False)
        frames: list = []
        deadline = time.monotonic() + 5.0
        while not frames and not reader.eof and time.monotonic() < deadline:
            select.select([r], [], [], 0.1)
            frames = reader.feed()
        os.close(r)
        _kill_quietly(pid)
        self._wait_child(pid, 2.0)
        return frames[0] if frames else {}

    def judge_job(self, job: dict, limits: dict) -> dict:
        """Candidate module in one process, the tests in a judge process, talking through the runner."""
        started = time.monotonic()
        total_deadline = started + float(limits["total_s"])
        oom_before = self._oom_kills()
        files_before, files_peak = usage.files_written_kb(), 0  # tmpfs pages the job holds (usage.py)
        cand = CandidateSlot(self, {**limits, "cpu_s": limits["total_s"]}, job["candidate"])
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # Both processes are set up at the same time, each by its own zygote; the judge learns the candidate's pid
        # on the verdict socket once the zygote has said it (judge.main).
        to_cand, from_cand = cand.spawn(wait=False)
        if job["judge"].get("kind") == "pytest":  # the only judge that writes files (its test module, tmp)
            self.used_uids.add(self.judge_uid)
        judge_id = self.request_judge(job, limits, theirs, [to_cand, from_cand])
        theirs.close()
        os.close(to_cand)
        os.close(from_cand)
        cand.spawned()
        marks = {"candidate_spawned_ms": (time.monotonic() - started) * 1000}
        judge = self.judge_spawned(judge_id)
        if judge[2]:
            try:
                wire.send(ours, {"pid": cand.pid})
            except OSError:
                pass  # the judge is gone already: its channel's end says so below
        events: list[dict] = []
        done: dict | None = None
        judge_error = None
        ours.setblocking(False)
        reader = wire.FdReader(ours.fileno())
        while done is None:
            now = time.monotonic()
            if now > total_deadline:
                judge_error = "timeout"
                break
            cand.pump(min(total_deadline - now, 0.05), extra=[ours.fileno()])
            files_peak = max(files_peak, usage.files_written_kb() - files_before)
            try:
                frames = reader.feed()
            except ValueError as e:
                judge_error = f"judge protocol: {e}"
                break
            for frame in frames:
                kind = frame.get("event")
                if kind == "respawn":
                    prev = cand.finish_current("timeout")
                    to_c, from_c = cand.spawn()
                    ours.setblocking(True)
                    wire.send(ours, {"pid": cand.pid, "prev": prev}, [to_c, from_c])
                    ours.setblocking(False)
                    os.close(to_c)
                    os.close(from_c)
                elif kind == "done":
                    done = frame
                    marks["judge_done_ms"] = (time.monotonic() - started) * 1000
                else:
                    if kind == "load":
                        marks["loaded_ms"] = (time.monotonic() - started) * 1000
                    events.append(frame)
            if reader.eof and done is None:
                judge_error = "judge exited without a verdict"
                break
        # A judge that closed its socket is exiting on its own: its own exit status says how, not our kill.
        exiting = bool(judge_error and judge_error != "timeout")
        if judge[2] and not exiting:
            _kill_quietly(judge[1])  # now, so that both processes end at the same time
        cand.finish_current("ok")
        status = self.end_judge(*judge, exiting=exiting, killed=not exiting)
        if _pids_of_uid(self.judge_uid):  # the judge left processes: the full clean-up, as for any job uid
            self.used_uids.add(self.judge_uid)
        ours.close()
        res = cand.result()
        res["wall_ms"] = (time.monotonic() - started) * 1000.0
        res["events"] = events
        res["timings"] = {k: round(v, 3) for k, v in marks.items()}
        res["files_kb"] = files_peak
        if judge_error == "timeout":
            res["status"] = "timeout"
            res["error"] = "whole job exceeded total_s"
        elif judge_error:
            res["status"], res["error"] = self._judge_death(judge_error, status, oom_before)
        else:
            assert done is not None  # the loop ends on a verdict, a timeout or a judge_error
            if done.get("spec_error"):
                res["spec_error"] = done["spec_error"]
            if done.get("candidate_fault"):  # the program exhausted what it shares with the judge (judge.py)
                res["status"], res["error"] = str(done["candidate_fault"]), str(done.get("error"))[:2000]
            elif done.get("error"):
                res["status"] = "sandbox_error"
                res["error"] = str(done["error"])[:300]
                res["trace"] = str(done.get("trace") or "")[-3000:]
        return res

    def _judge_death(self, why: str, status: int | None, oom_before: int) -> tuple[str, str]:
        """Why the judge ended without a verdict. Its channel faults are its own to handle (judge.py: SIGPIPE
        ignored, any bytes decoded safely), so the one thing the candidate can still do to it is exhaust the
        sandbox's memory: the OOM killer takes candidate processes first (oom_score_adj 1000 against the
        machinery's own), then the judge. A judge SIGKILLed while the sandbox's OOM counter moved (or, without a
        counter to read, SIGKILLed at all: nothing else sends it) is the program's memory_limit; any other end (a
        crash, an exit without a verdict) is a fault of ours."""
        killed = status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if killed and (self.oom_control is None or self._oom_kills() > oom_before):
            return "memory_limit", "the program exhausted the sandbox's memory (the judge was OOM-killed)"
        return "sandbox_error", f"{why} (judge status {status})"

    def request_judge(self, job: dict, limits: dict, vsock: socket.socket, chan: list[int]) -> int:
        """Ask the judge zygote for the judge process of a judge job; judge_spawned(job id) collects the answer.
        Its own copies of vsock and chan are made here; the caller keeps and closes its own. cand_pid 0: the
        candidate's pid follows on vsock, as the first frame (judge.main)."""
        judge_limits = {**limits, "memory_mb": max(JUDGE_MEMORY_MB, int(limits["memory_mb"])),
                        "cpu_s": float(limits["total_s"]) + 1, "nproc": 16, "nofile": 256}
        payload = {"spec": job["judge"], "cand_pid": 0, "case_timeout": float(limits["wall_s"])}
        devnull = os.open(os.devnull, os.O_RDWR)
        fds = [devnull, os.dup(devnull), os.dup(devnull), os.dup(vsock.fileno()), *map(os.dup, chan),
               write_payload(payload)]
        req = {"role": "judge", "uid": self.judge_uid, "cwd": self.dirs[self.judge_uid], "limits": judge_limits}
        return self.request_spawn(self.judge_zygote, req, fds)

    def judge_spawned(self, job_id: int) -> tuple[int, int, bool]:
        """(job id, pid, whether it runs) of the judge process request_judge asked for."""
        reply = self.judge_zygote.reply(job_id)
        return job_id, reply["pid"], "spawn_error" not in reply

    def end_judge(self, job_id: int, pid: int, running: bool, exiting: bool = False,
                  killed: bool = False) -> int | None:
        """Kill the judge and collect the zygote's report on it (so that its channel stays in step). A judge that
        is `exiting` on its own gets a second to do so, so that its own exit status is what is reported. killed:
        the caller sent the SIGKILL already (the zygote has not reported it yet, so the pid is still the judge's)."""
        if not running:
            return None
        if exiting:
            r, _, _ = select.select([self.judge_zygote.sock], [], [], 1.0)
            if r:
                return self.judge_zygote.reply(job_id).get("status")
        if not killed:
            _kill_quietly(pid)
        return self.wait_exit(self.judge_zygote, job_id, 10.0).get("status")


def _set_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def serve(sock_path: str, uid_base: int, oom_control: str | None) -> None:
    os.umask(0o077)
    _set_subreaper()  # the runner is the sandbox's pid 1 under both backends; this covers being started otherwise
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sock_dir = os.path.dirname(sock_path)
    os.chmod(sock_dir, 0o700)  # jobs must never reach the control socket
    for path in (sock_path, sock_path + ".ready"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    import seccomp

    seccomp.prepare()  # the warm linter's processes are forked from here: build the filter once
    runner = Runner(uid_base, oom_control)
    import gc

    gc.freeze()  # forked cleaners then copy fewer pages for the garbage collector
    runner.warm_linters()  # ready means warm: the linter is loaded before the first job
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    os.chmod(sock_path, 0o600)
    server.listen(1)
    with open(sock_path + ".ready", "w") as f:
        f.write(str(os.getpid()))
    # One connection for the sandbox's whole life: the host that started it. Nobody within ACCEPT_TIMEOUT_S, or the
    # connection gone (the host closed it or died): nothing is left to serve, and the sandbox ends with the runner.
    server.settimeout(ACCEPT_TIMEOUT_S)
    try:
        conn, _ = server.accept()
    except OSError:
        os._exit(0)
    server.close()
    conn.settimeout(None)
    runner.watch_owner(conn)
    # Protocol: the runner announces {"ready"} whenever it can take a job (after start-up and after the previous
    # job's clean-up), so that clean-up never delays a result and a sandbox that could not be cleaned, or whose
    # machinery broke, is never handed another job. Every result carries the id of the request it answers.
    _send_or_exit(conn, {"ready": True, "version": VERSION, "pid": os.getpid()})
    while True:
        broken = runner.wait_for_request(conn)
        if broken:  # while idle: say nothing (the host is not listening), hang up; the host replaces the sandbox
            os._exit(4)
        try:
            msg = wire.read_request(conn)
        except (wire.ChannelClosed, OSError, ValueError):
            os._exit(0)
        runner.used_uids.clear()
        oom_before = runner._oom_kills()
        fault = None
        try:
            res = runner.handle(conn, msg)
        except Exception as e:  # noqa: BLE001 - a fault of ours: say so, never a verdict
            fault = str(e) if isinstance(e, SandboxFault) else "the sandbox's runner failed"
            res = runner.fault_result(fault, oom_before)
        res["id"] = msg.get("id") if isinstance(msg, dict) else None
        _send_or_exit(conn, res)
        if fault is None:
            fault = None if runner.after_job() else "a job process survived clean-up"
            runner.reap()
            fault = fault or runner.broken_zygote()
        if fault:
            _send_or_exit(conn, {"ready": False, "error": fault})
            os._exit(3)  # let the host replace this sandbox
        _send_or_exit(conn, {"ready": True, "jobs_done": runner.jobs_done})


def _send_or_exit(conn: socket.socket, frame: dict) -> None:
    try:
        wire.send(conn, frame)
    except OSError:
        os._exit(0)  # the host is gone


def _detect_oom_control() -> str | None:
    path = "/sys/fs/cgroup/memory/memory.oom_control"
    return path if os.path.exists(path) else None


def main(argv: list[str]) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default="/run/rewardbox/runner.sock")
    p.add_argument("--uid-base", type=int, default=10000)
    p.add_argument("--oom-control", default=None, help="memory cgroup oom_control file (auto-detected)")
    a = p.parse_args(argv)
    serve(a.socket, a.uid_base, a.oom_control or _detect_oom_control())


if __name__ == "__main__":
    main(sys.argv[1:])
