"""Zygotes: the processes every job process is forked from (stdlib only; runner.py's head has the whole).

A zygote is forked at start-up, before any job data exists, and never receives any: a spawn request carries only
descriptors and non-secret parameters, and the job's data travels in a memfd only the forked child reads. The case
zygote of a Python io job compiles the program once (runs none of it) and forks each case from that. Zygote is the
runner's end of one zygote's channel; a reply out of step, or a zygote gone, is a SandboxFault."""

from __future__ import annotations

import fcntl
import importlib
import os
import resource
import socket
import sys
import traceback
from collections.abc import Sequence

import job_lockdown
import landlock
import locked_cases
import seccomp
import wire
from job_lockdown import (
    JOB_OOM_ADJ,
    PRELOAD_MAX_SOURCE,
    WRITABLE_ROOTS,
    SpawnError,
    _compile_main,
    _default_signals,
    _own_standard_streams,
    _setup_failure,
    enter_job,
    job_env,
    place_fds,
    run_program,
    write_job_files,
)
from protocol import SandboxFault, read_payload
from spawn_reports import SPAWN_FAILED, report_exit, setup_error


def zygote_main(ctl: socket.socket, lean: bool = False) -> None:
    """Fork one process per request; report its pid, then its exit status and rusage (see the module docstring).
    No zygote imports threading (its at-fork hook would cost every forked process ~0.3 ms of CPU, counted as the
    program's; a program that uses threads imports it, as in a fresh interpreter). lean: the lean zygote, which
    imports nothing more than the runner had, for the cases of io items (cases.py)."""
    import gc

    if not lean:  # imported once here so that job processes start warm
        import candidate_host  # noqa: F401
        import judge  # noqa: F401

    seccomp.prepare()
    landlock.prepare(WRITABLE_ROOTS)
    _default_signals()
    os.environ.clear()
    gc.freeze()  # keep the collector off the inherited heap, so forked children copy fewer pages
    _serve_spawns(ctl)


def _serve_spawns(ctl: socket.socket) -> None:
    """A zygote's loop: one forked process per request (the zygote's, and a case zygote's)."""
    while True:
        try:
            req, fds = wire.recv_with_fds(ctl)
        except (wire.ChannelClosed, OSError, ValueError):
            os._exit(0)
        if req.get("warm"):  # preload a module for this zygote's jobs (lint, repo_reporter): warm_up() once
            importlib.import_module(req["warm"]).warm_up()
            wire.send(ctl, {"id": req.get("id"), "warm": True})
            continue
        if req.get("role") == "job":
            _own_standard_streams(fds[:3], req["uid"])  # here, not in the child: its CPU time is the job's
        err_r, err_w = os.pipe()
        pid = _fork(bool(req.get("exec")) and req.get("role") == "job")
        if pid == 0:
            os.close(err_r)
            ctl.close()
            if req.get("role") == "case_zygote":
                _case_zygote(req, fds, err_w)
            _zygote_child(req, fds, err_w)
        os.close(err_w)
        for fd in fds:
            os.close(fd)
        error = setup_error(err_r, pid)
        if error:
            wire.send(ctl, {"id": req["id"], "pid": pid, "spawn_error": error})
            continue
        wire.send(ctl, {"id": req["id"], "pid": pid})
        report_exit(ctl, req["id"], pid)


_libc_fork = None  # libc's fork(), called with the GIL held (PyDLL), made once per zygote


def _fork(exec_only: bool) -> int:
    """os.fork(), or for a process that will exec a binary (a compiled program's run or io case) libc's fork()
    directly: the child then skips CPython's after-fork work (thread and import state, at-fork hooks), ~0.4 ms of
    CPU in every such process, which counts as the program's. Sound only because the zygote is single-threaded
    (no lock can be held by another thread at the fork) and the child runs nothing of Python's state afterwards
    but the lock-down, then execve (_zygote_child refuses a Python program sent as exec). Any other case: os.fork."""
    global _libc_fork
    threading = sys.modules.get("threading")  # not imported (the lean zygote): single-threaded, no at-fork hooks
    if not exec_only or threading is None or threading.active_count() != 1:
        return os.fork()
    if _libc_fork is None:
        import ctypes

        _libc_fork = ctypes.PyDLL(None, use_errno=True).fork
        _libc_fork.restype = ctypes.c_int
        _libc_fork.argtypes = []
    pid = _libc_fork()
    if pid < 0:
        import ctypes

        raise OSError(ctypes.get_errno(), "fork")
    return int(pid)


def _zygote_child(req: dict, fds: list[int], err_w: int) -> None:
    """In the forked child: descriptors in place (the payload memfd last), read this job's own data, set up, run.
    A set-up failure is reported on the error pipe as one short line (no traceback, no path of ours)."""
    err_fd = err_w
    try:
        ruleset = landlock.prepare(WRITABLE_ROOTS)
        place_fds(fds + [err_w] + ([ruleset] if ruleset is not None else []))
        err_fd, payload_fd = len(fds), len(fds) - 1
        fcntl.fcntl(err_fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        if ruleset is not None:
            landlock.adopt(err_fd + 1)
        if req.get("prepared"):  # a case of a case zygote that holds the program ready (no payload: fds 0-2)
            if job_lockdown.prepared is None:
                raise SpawnError("job set-up failed: no program prepared")
            enter_job(req["uid"], req["limits"], req["cwd"], oom_adj=JOB_OOM_ADJ)
            os.close(err_fd)
            job_lockdown.run_prepared_main()
        payload = read_payload(payload_fd)
        os.close(payload_fd)
        if req.get("role") == "judge":
            _judge_child(req, payload, err_fd)
        cwd = req["cwd"]
        enter_job(req["uid"], req["limits"], cwd, oom_adj=JOB_OOM_ADJ)
        env = job_env(payload.get("env"), cwd)
        write_job_files(cwd, payload.get("files") or {})
        program = payload["program"]
        if req.get("exec") and "argv" not in program:  # forked for an exec (_fork): no Python program may run here
            raise SpawnError("job set-up failed: a program to exec has no argv")
        if "argv" not in program:
            os.close(err_fd)  # python jobs: set-up done; exec'd jobs close it through CLOEXEC
        run_program(program, env)
    except BaseException as e:  # noqa: BLE001 - report any set-up failure, then die
        message = str(e) if isinstance(e, SpawnError) else _setup_failure(e)
        try:
            os.write(err_fd, message.encode(errors="replace")[:2000])
        except OSError:  # set-up was done: a failure of our in-sandbox program (lint, candidate host)
            os.write(2, f"internal error: {type(e).__name__}: {e}\n".encode(errors="replace")[-2000:])
    os._exit(SPAWN_FAILED)


def _case_zygote(req: dict, fds: list[int], err_w: int) -> None:
    """A zygote for the cases of one program (cases.py; fds: its channel, the payload memfd). A Python program is
    compiled once here and prepared (job_lockdown.prepare_main), so a case skips the compile and the set-up before
    the program's first line; compile() runs none of its code (its imports happen in each case), so every case
    starts from the same pristine code object. Then, asked to ("lock"), it locks itself down as the job and starts
    the cases itself (locked_cases.py): nothing of the job's data lives on in it, and it exits with the job.
    Tells the runner {"id": 0, "preloaded", "cpu_ms", "prepared", "locked"} once ready (cpu_ms: its compile CPU,
    the program's cost). A source that does not compile is left to each case, which fails on it exactly as
    before; a zygote that cannot lock down answers {"unusable"} and exits. Never returns."""
    import gc

    try:
        ctl = socket.socket(fileno=fds[0])
        payload = read_payload(fds[1])
        os.close(fds[1])
    except BaseException as e:  # noqa: BLE001
        os.write(err_w, _setup_failure(e).encode(errors="replace"))
        os._exit(SPAWN_FAILED)
    os.close(err_w)  # set up: the zygote answers the runner with this pid
    program, ready = payload.get("program") or {}, {"id": 0, "preloaded": False, "cpu_ms": 0.0}
    code = program.get("code")
    if isinstance(code, str) and len(code) <= PRELOAD_MAX_SOURCE and not program.keys() & {"argv", "host", "lint"}:
        path = os.path.join(req["cwd"], str(program.get("filename", "main.py")))
        mem = int(req["limits"]["memory_mb"]) << 20
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        before = resource.getrusage(resource.RUSAGE_SELF)
        try:  # within the job's memory: a source whose compile needs more fails in each case, as before
            resource.setrlimit(resource.RLIMIT_AS, (mem, hard))
            job_lockdown.preloaded = (code, path, _compile_main(code, path))
        except BaseException:  # noqa: BLE001, S110 - SyntaxError, MemoryError...: each case compiles it itself
            pass
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        after = resource.getrusage(resource.RUSAGE_SELF)
        ready = {"id": 0, "preloaded": job_lockdown.preloaded is not None,
                 "cpu_ms": (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000.0}
        if job_lockdown.preloaded is not None and payload.get("prepare"):
            # what every case would do before the program's first line, done once: the environment, sys.path,
            # our modules out of sys.modules, a fresh __main__; each case then only locks down and runs it
            # (job_lockdown.run_prepared_main; the runner's requests then carry no payload: "prepared")
            try:
                os.environ.update(job_env(payload.get("env"), req["cwd"]))
                job_lockdown.prepare_main(str(program.get("filename", "main.py")), req["cwd"])
                ready["prepared"] = True
            except Exception:  # noqa: BLE001, S110 - each case then sets itself up from its payload, as before
                job_lockdown.prepared = None
    locked = None
    if payload.get("lock"):  # every case's lock-down done once, here (locked_cases.py)
        try:
            locked = locked_cases.lock(req, program, payload.get("env"))
        except BaseException as e:  # noqa: BLE001 - half locked: this zygote can serve nothing; the runner goes on
            wire.send(ctl, {"id": 0, "unusable": _setup_failure(e)})  # without it
            os._exit(SPAWN_FAILED)
        ready["locked"] = locked is not None
    del payload, program, code
    gc.collect()
    gc.freeze()  # the code object too: the cases' collectors leave it alone, fewer pages copied
    try:
        wire.send(ctl, ready)
    except OSError:
        os._exit(0)
    if locked is not None:
        locked_cases.serve(ctl, locked)
    _serve_spawns(ctl)
    os._exit(0)


def _judge_child(req: dict, payload: dict, err_fd: int) -> None:
    """Judge process (judge zygote's child; fds 3, 4, 5: verdict socket, to and from the candidate): drop to the
    judge uid and run the tests. Never returns."""
    cwd = req["cwd"]
    enter_job(req["uid"], req["limits"], cwd)  # a failure here is a spawn error, reported by the caller
    os.environ.update(job_env(None, cwd))
    os.close(err_fd)
    try:
        import judge

        judge.main(payload["spec"], socket.socket(fileno=3), 4, 5, payload["cand_pid"], payload["case_timeout"])
    except BaseException:  # noqa: BLE001
        try:
            wire.send(socket.socket(fileno=3), {"event": "done", "error": "the judge failed",
                                                "trace": traceback.format_exc()[-3000:]})
        except BaseException:  # noqa: BLE001
            pass
    os._exit(0)


class ZygoteLost(SandboxFault):
    """A zygote's channel failed: a fault of the sandbox, except for a locked case zygote, which a case of the job
    it serves can kill (cases.py then goes on without it)."""

    def __init__(self, zygote: Zygote, what: str) -> None:
        super().__init__(f"the {zygote.name} {what}")
        self.zygote = zygote


class Zygote:
    """The runner's end of one zygote: its channel and pid, and the id of every spawn request."""

    def __init__(self, name: str, sock: socket.socket, pid: int) -> None:
        self.name, self.sock, self.pid = name, sock, pid
        self.next_id = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, req: dict, fds: Sequence[int] = ()) -> int:
        self.next_id += 1
        try:
            wire.send(self.sock, {**req, "id": self.next_id}, list(fds))
        except OSError:
            raise ZygoteLost(self, "is gone") from None
        return self.next_id

    def reply(self, job_id: int) -> dict:
        """The next frame, which must be about job_id: anything else means the channel is out of step."""
        try:
            msg = wire.recv(self.sock)
        except (wire.ChannelClosed, OSError, ValueError):
            raise ZygoteLost(self, "is gone") from None
        if not isinstance(msg, dict) or msg.get("id") != job_id:
            raise ZygoteLost(self, "answered out of step")
        return msg
