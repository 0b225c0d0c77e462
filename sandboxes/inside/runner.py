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
  * case zygote: forked by the zygote for one cases job of a Python program (cases.py), with that job's program
    only; it compiles it once (runs none of it) and forks every case of the job (_case_zygote), then exits.
- linter servers (node_lint.py): pylint (lint_server.py) and, on first use, eslint, each under its own uid with
  the job rlimits and seccomp (no job can read, signal or feed them). pylint lints each program in a fork of its
  warm process, so nothing a program does to the linter's state reaches the next; eslint builds a fresh Linter per
  program. Restarted every 500 programs and after any failure.
- owner watchdog: holds the host's connection and ends the runner when the host hangs up (its owner died), so
  that no sandbox outlives the process that started it.
After every job a cleaner running as each job uid kills every process of that uid and wipes its files (cleaners
and file readers are forked from the runner, but run only this file's code and are not dumpable: no job process
can read their memory).

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
import fcntl
import importlib
import marshal
import os
import resource
import select
import signal
import socket
import stat
import sys
import time
import traceback
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import landlock  # noqa: E402
import usage  # noqa: E402
import wire  # noqa: E402

VERSION = "1"
SCRATCH = "/scratch"
# The job's writable places, each a tmpfs of the sandbox, wiped after every job. /mnt: SandboxFusion users' programs
# write there (`open("/mnt/b", "w")`) and fetch it back (fetch_files), as they could on SandboxFusion's host.
SHARED_ROOTS = ("/tmp", "/mnt")
WRITABLE_ROOTS = (*SHARED_ROOTS, SCRATCH)
DEFAULT_LIMITS = {
    "wall_s": 10.0,  # wall-clock limit of one process (or one test case in judge jobs)
    "total_s": 30.0,  # wall-clock cap of the whole job
    "cpu_s": 10.0,  # RLIMIT_CPU per process
    "memory_mb": 512,  # RLIMIT_AS per process
    "output_bytes": 1 << 20,  # cap on each of stdout / stderr
    "file_size_mb": 16,  # RLIMIT_FSIZE
    "nofile": 64,  # RLIMIT_NOFILE
    "nproc": 64,  # RLIMIT_NPROC (per uid)
}
MEMORY_MARKERS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")
JUDGE_MEMORY_MB = 2048
SPAWN_FAILED = 125
ACCEPT_TIMEOUT_S = 15.0  # the host connects within milliseconds of the socket appearing
# Job processes (and the judge and linters, which handle the program) run at nice 10: in a container, where the
# scheduler shares the CPU by weight, the runner and its zygotes (nice 0) then still get the CPU promptly when a job
# keeps up to nproc processes busy, so a deadline is enforced on time. A job cannot lower it again (no
# CAP_SYS_NICE). CPU time, which efficiency is scored on, does not depend on it.
JOB_NICE = 10
JOB_OOM_ADJ = 1000  # job processes; the runner, zygotes, judge and linter keep the sandbox's own (lowest) score
# Lint jobs node_lint.py takes (eslint); the others are Python's (pylint). The runner is stdlib-only, so this mirrors
# Language.linter of sandboxes/languages.py (tests/test_language_registry_units.py checks that they agree).
ESLINT_LANGUAGES = ("javascript", "typescript")


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


# ---------------------------------------------------------------------------------------------- job processes


def enter_job(uid: int, limits: dict, cwd: str, oom_adj: int | None = None) -> None:
    """In a freshly forked child: become an unprivileged job process. Irreversible.

    oom_adj: job processes pass JOB_OOM_ADJ, the kernel's first choice when the sandbox runs out of memory (raised
    while still root; the Landlock domain keeps them from lowering it again). The judge and the linter keep the
    machinery's score. Signal dispositions are inherited from the zygote, which reset them once at start-up."""
    os.setsid()
    if oom_adj is not None:
        _set_oom_adj(oom_adj)
    os.setpriority(os.PRIO_PROCESS, 0, JOB_NICE)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.chdir(cwd)
    mem = int(limits["memory_mb"]) << 20
    cpu = max(1, int(float(limits["cpu_s"]) + 0.999))
    fsize = int(limits["file_size_mb"]) << 20
    for res, value in (
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_NOFILE, (int(limits["nofile"]),) * 2),
        (resource.RLIMIT_NPROC, (int(limits["nproc"]),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_MEMLOCK, (0, 0)),
        (resource.RLIMIT_MSGQUEUE, (0, 0)),
    ):
        resource.setrlimit(res, value)
    os.umask(0o077)
    import seccomp

    seccomp.install()  # also sets no_new_privs, which Landlock needs
    landlock.restrict(WRITABLE_ROOTS)


def _set_oom_adj(value: int) -> None:
    # os-level calls: in every job process, Python's text I/O stack would cost ~0.4 ms of the job's CPU time
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def _default_signals() -> None:
    for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)


def place_fds(fds: list[int]) -> None:
    """Make fds[i] the descriptor i and close every other descriptor."""
    tmp = [os.dup(fd) for fd in fds]  # dup first so that placing one cannot clobber another
    for i, fd in enumerate(tmp):
        os.dup2(fd, i, inheritable=True)
    os.closerange(len(fds), 65536)


def job_env(extra: dict | None, cwd: str) -> dict:  # noqa: D103
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    env.update(extra or {})
    return env


def run_program(program: dict, env: dict) -> None:
    """Run the job's program in this (already unprivileged) process. Never returns."""
    if "argv" in program:
        argv = [str(a) for a in program["argv"]]
        try:
            os.execve(argv[0] if "/" in argv[0] else _which(argv[0], env), argv, env)  # ./main: the cwd's
        except (OSError, ValueError, UnicodeError) as e:
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise SpawnError(f"could not execute {argv[0][:200]!r}: {reason}") from None
    os.environ.update(env)  # the zygote cleared its environment once
    if program.get("host"):
        import candidate_host

        candidate_host.serve(program["code"], program.get("module", "solution"))
        os._exit(0)
    if program.get("lint"):
        import lint

        lint.main(program["code"], program.get("roots"))
        os._exit(0)
    _run_python_main(program["code"], program.get("filename", "main.py"))


def _which(name: str, env: dict) -> str:
    for d in env["PATH"].split(":"):
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(name)


# The program of a cases job, compiled once by its case zygote (below) for all its cases: (source, path, code).
_PRELOADED: tuple[str, str, object] | None = None
PRELOAD_MAX_SOURCE = 1 << 20  # larger sources compile in each case, as before (the case's limits bound that)


def _compile_main(code: str, path: str) -> object:
    """The one place a program's source is compiled, so that a case zygote's code object is what the case would
    have compiled itself (compile() inherits this module's future flags)."""
    return compile(code, path, "exec")


def _run_python_main(code: str, filename: str) -> None:
    """Execute source as __main__ without starting an interpreter, with Python's own exit semantics."""
    import atexit
    import builtins
    import threading

    # As the interpreter does at start-up: a write to a closed pipe raises BrokenPipeError rather than killing
    # the program (SIGXFSZ stays default: a file over RLIMIT_FSIZE ends the job as output_limit).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    sys.path[:] = [os.getcwd()] + [p for p in sys.path if p != HERE]
    for name in [m for m in sys.modules if m in ("wire", "seccomp", "runner", "__main__")]:
        del sys.modules[name]
    sys.argv = [filename]
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - rebinding the standard streams of this process
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    main = type(sys)("__main__")
    main.__file__ = os.path.join(os.getcwd(), filename)
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    code_status = 0
    try:
        pre = _PRELOADED  # compiled by the case zygote from this very source and path: the same code object
        compiled = pre[2] if pre is not None and pre[1] == main.__file__ and pre[0] == code \
            else _compile_main(code, main.__file__)
        exec(compiled, main.__dict__)  # type: ignore[arg-type]
    except SystemExit as e:
        code_status = _exit_code(e)
    except BaseException as e:  # noqa: BLE001 - as the interpreter prints it: from the program's first frame on
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
        code_status = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as the interpreter does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except SystemExit as e:
        code_status = _exit_code(e)
    except BaseException:
        code_status = code_status or 1
    os._exit(code_status)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------------------------- zygote


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


class SpawnError(Exception):
    """Setting up one job failed in its own process; the job ends, the sandbox goes on. str() is safe to show."""


def zygote_main(ctl: socket.socket) -> None:
    """Fork one process per request; report its pid, then its exit status and rusage (see the module docstring)."""
    import atexit  # noqa: F401 - imported once here so that job processes start warm
    import gc
    import threading  # noqa: F401

    import candidate_host  # noqa: F401
    import judge  # noqa: F401
    import seccomp

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
        pid = os.fork()
        if pid == 0:
            os.close(err_r)
            ctl.close()
            if req.get("role") == "case_zygote":
                _case_zygote(req, fds, err_w)
            _zygote_child(req, fds, err_w)
        os.close(err_w)
        for fd in fds:
            os.close(fd)
        error = b""
        while chunk := os.read(err_r, 4096):
            error += chunk
        os.close(err_r)
        if error:
            os.waitpid(pid, 0)
            wire.send(ctl, {"id": req["id"], "pid": pid, "spawn_error": error.decode(errors="replace")})
            continue
        wire.send(ctl, {"id": req["id"], "pid": pid})
        _, status, ru = os.wait4(pid, 0)
        wire.send(ctl, {"id": req["id"], "pid": pid, "status": status,
                        "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1000.0, "maxrss_kb": ru.ru_maxrss})


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
        payload = read_payload(payload_fd)
        os.close(payload_fd)
        if req.get("role") == "judge":
            _judge_child(req, payload, err_fd)
        cwd = req["cwd"]
        enter_job(req["uid"], req["limits"], cwd, oom_adj=JOB_OOM_ADJ)
        env = job_env(payload.get("env"), cwd)
        write_job_files(cwd, payload.get("files") or {})
        program = payload["program"]
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
    """A zygote for the cases of one Python program (cases.py; fds: its channel, the payload memfd): compile the
    program once, then fork every case from here, each set up as a job process of its own (_zygote_child), so a
    case skips the compile. Root, like the zygote, and it never runs the program: compile() runs none of its code
    (its imports happen in each case), so every case starts from the same pristine code object and no case can
    reach this process (another uid) nor leave anything in it. Tells the runner {"id": 0, "preloaded", "cpu_ms"}
    (its compile CPU, the program's cost) once compiled. A source that does not compile is left to each case,
    which fails on it exactly as before. Never returns."""
    global _PRELOADED
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
            _PRELOADED = (code, path, _compile_main(code, path))
        except BaseException:  # noqa: BLE001, S110 - SyntaxError, MemoryError...: each case compiles it itself
            pass
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        after = resource.getrusage(resource.RUSAGE_SELF)
        ready = {"id": 0, "preloaded": _PRELOADED is not None,
                 "cpu_ms": (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000.0}
    del payload, program, code
    gc.collect()
    gc.freeze()  # the code object too: the cases' collectors leave it alone, fewer pages copied
    try:
        wire.send(ctl, ready)
    except OSError:
        os._exit(0)
    _serve_spawns(ctl)
    os._exit(0)


def _own_standard_streams(fds: list[int], uid: int) -> None:
    """Give the job the pipes of its stdin, stdout and stderr (root made them, mode 0600), so that a program may
    reopen them as /dev/stdout or /proc/self/fd/1 like anywhere else. Pipes only: never a device node."""
    for fd in fds:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.fchown(fd, uid, uid)


def _setup_failure(e: BaseException) -> str:
    detail = f": {e.strerror}" if isinstance(e, OSError) and e.strerror else ""
    return f"job set-up failed: {type(e).__name__}{detail}"


def write_job_files(cwd: str, files: dict) -> None:
    """The job's files, written as the job's uid; a name or content that cannot be written ends the job."""
    for rel, content in files.items():
        try:
            path = os.path.join(cwd, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if isinstance(content, dict):  # {"b64": ..., "exec": bool}: binary content, executable or not
                import base64

                data = base64.b64decode(content["b64"])
            else:
                data = str(content).encode()
            mode = 0o700 if isinstance(content, dict) and content.get("exec") else 0o600
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode), "wb") as f:
                f.write(data)
        except (OSError, ValueError, TypeError, KeyError, UnicodeError) as e:
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise SpawnError(f"could not write the job's file {rel[:200]!r}: {reason}") from None


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


# ---------------------------------------------------------------------------------------------- runner


class SandboxFault(Exception):
    """The machinery failed (a zygote is gone, a reply does not belong to the job): this sandbox cannot be trusted
    with another job. str() is safe to show; the traceback goes to the host's log only."""


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
            raise SandboxFault(f"the {self.name} is gone") from None
        return self.next_id

    def reply(self, job_id: int) -> dict:
        """The next frame, which must be about job_id: anything else means the channel is out of step."""
        try:
            msg = wire.recv(self.sock)
        except (wire.ChannelClosed, OSError, ValueError):
            raise SandboxFault(f"the {self.name} is gone") from None
        if not isinstance(msg, dict) or msg.get("id") != job_id:
            raise SandboxFault(f"the {self.name} answered out of step")
        return msg


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
        self.zygotes = (self.zygote, self.lint_zygote, self.judge_zygote)
        # The lint zygote imports and exercises pylint only if the pylint server cannot run (warm_linters).
        self.lint_warm_id = 0
        self.lint_warm = False

    # -- process bookkeeping

    def _fork(self) -> int:
        pid = os.fork()
        if pid:
            self.children[pid] = None
        return pid

    def _start_zygote(self, name: str) -> Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = self._fork()
        if pid == 0:
            for fd in (ours, *(z.sock for z in self._started_zygotes)):
                fd.close()  # the runner's ends, ours and the earlier zygotes'
            zygote_main(theirs)
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

    def clean_uid(self, uid: int, expected: set[str] | frozenset[str] = frozenset()) -> bool:
        """Kill every process of uid and wipe the files it owns. True when nothing is left behind. expected: names
        in uid's home that are not its own (root's read-only files of a cases job, cases.py)."""
        if (uid == self.cand_uid and all(_empty(root) for root in SHARED_ROOTS)
                and _only(self.dirs[uid], expected) and not _pids_of_uid(uid)):  # the cheaper checks first
            return True  # nothing running, nothing written: no cleaner needed (the common case)
        pid = self._fork()
        if pid == 0:
            try:
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
        return status == 0 and not _pids_of_uid(uid)

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

    def start_case_zygote(self, program: dict, limits: dict, deadline: float) -> tuple[Zygote, int, dict] | None:
        """A case zygote (_case_zygote) forked by the zygote for one cases job's Python program: (its channel, the
        zygote's job id for it, its ready message), or None when it answered no ready message by the deadline
        (killed; the cases then fork from the zygote, as before). end_case_zygote ends it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        os.set_inheritable(ours.fileno(), False)
        req = {"role": "case_zygote", "uid": self.cand_uid, "cwd": self.dirs[self.cand_uid], "limits": limits}
        job_id, first = self.spawn(self.zygote, req, [theirs.detach(), write_payload({"program": program})])
        if "spawn_error" in first:
            ours.close()
            return None
        case_zygote = Zygote("case zygote", ours, int(first["pid"]))
        r, _, _ = select.select([ours], [], [], max(0.0, deadline - time.monotonic()))
        ready = case_zygote.reply(0) if r else None
        if ready is None:
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
        self.wait_exit(self.zygote, job_id, 10.0)

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


def _kill_every_process_as(uid: int, zombies: bool) -> bool:
    """In a forked child of the runner: become uid and SIGKILL every process of it; True when none is left.
    kill(-1) from within the uid reaches every process of it in one pass of the kernel's task list, so a fork
    racing it either is signalled or fails. With zombies, also wait until the runner has reaped them."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # kill(-1)'s return value says nothing here (it reports success whenever other processes exist, signalled or
    # not), so look in /proc until no process of this uid is left.
    for _ in range(2000):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        if not _pids_of_uid(uid, zombies=zombies):
            return True
        time.sleep(0.0005)  # killed ones linger as zombies until the runner reaps them
    return False


def _kill_quietly(pid: int) -> None:
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass


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

    def start(self, program: dict, stdin: str, files: dict | None, env: dict | None, extra_fds=(),
              wait: bool = True, stdin_file: int | None = None) -> None:
        """Spawn the process (extra_fds become its fds 3, 4, ...; they are closed here). Input that cannot be
        encoded ends the job here, before anything runs. wait=False: only the request is sent; spawned() waits
        for the zygote's answer. stdin_file: a read-only descriptor of a file holding the input (cases.py), given
        as fd 0 instead of a pipe the runner feeds (closed here)."""
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
        payload = write_payload({"program": program, "files": files, "env": env})
        in_r, in_w = (stdin_file, None) if stdin_file is not None else os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (in_w, out_r, err_r):
            if fd is not None:
                os.set_blocking(fd, False)
        self.fds = {out_r: "stdout", err_r: "stderr"}
        self.stdin_w = in_w
        req = {"role": "job", "uid": self.uid, "cwd": self.cwd, "limits": self.limits}
        self.job_id = self.runner.request_spawn(self.zygote, req, [in_r, out_w, err_w, *extra_fds, payload])
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
            if self.killed_for != "ok":  # not the routine end of a judge's candidate: the clean-up suffices there
                self.runner.stop_uid(self.uid)  # its escaped descendants too (a Proc's uid runs nothing else)

    def wait_until(self, deadline: float) -> None:
        """Pump until the process exits and its pipes are drained, killing it at the deadline."""
        if self.spawn_error:
            self.exit = {"status": SPAWN_FAILED << 8, "cpu_ms": 0.0, "maxrss_kb": 0}
        while self.exit is None or self.fds:
            now = time.monotonic()
            if now >= deadline:
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


def _wipe_owned(root: str, uid: int, keep: tuple[str, ...]) -> None:
    """Remove everything below root that uid owns, except the dirs in keep (run as uid: links are removed,
    never followed, so planted symlinks cannot redirect the wipe).

    Iterative and relative to the working directory (the cleaner is a throw-away process, free to chdir):
    neither the depth of a planted tree nor its path length (past PATH_MAX) can make a part of it survive."""
    keep_ids = set()
    for path in keep:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        keep_ids.add((st.st_dev, st.st_ino))
    try:
        os.chdir(root)
    except OSError:
        return
    pending = [_listdir_here()]  # per level: the names still to visit
    entered: list[tuple[str, bool]] = []  # per level below root: (name, remove it on the way back)
    while pending:
        if not pending[-1]:
            pending.pop()
            if entered:
                name, remove = entered.pop()
                os.chdir("..")
                if remove:
                    try:
                        os.rmdir(name)
                    except OSError:
                        pass
            continue
        name = pending[-1].pop()
        try:
            st = os.lstat(name)
        except OSError:
            continue
        owned = st.st_uid == uid
        if stat.S_ISDIR(st.st_mode):
            if owned:
                try:
                    os.chmod(name, 0o700)
                except OSError:
                    pass
            try:
                os.chdir(name)  # a directory, not a link (lstat); every process of uid is dead by now
            except OSError:
                continue
            entered.append((name, owned and (st.st_dev, st.st_ino) not in keep_ids))
            pending.append(_listdir_here())
        elif owned:
            try:
                os.unlink(name)
            except OSError:
                pass


def _listdir_here() -> list[str]:
    try:
        return os.listdir(".")
    except OSError:
        return []


FETCH_FILE_CAP = 1 << 20
FETCH_TOTAL_CAP = 8 << 20


def _read_job_files(paths: list[str]) -> dict:
    import base64
    import stat

    out, total = {}, 0
    for rel in paths[:64]:
        if not isinstance(rel, str) or ".." in rel.split("/"):
            continue
        if os.path.isabs(rel) and not any(rel.startswith(root + "/") for root in SHARED_ROOTS):
            continue
        try:
            fd = os.open(rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            data = os.read(fd, min(FETCH_FILE_CAP, FETCH_TOTAL_CAP - total))
            total += len(data)
            out[rel] = base64.b64encode(data).decode()
        finally:
            os.close(fd)
    return out


def _empty(path: str) -> bool:
    with os.scandir(path) as it:
        return next(it, None) is None


def _only(path: str, names: set[str] | frozenset[str]) -> bool:
    """path holds nothing but names (each a regular file of root's, as written), or nothing when names is empty."""
    if not names:
        return _empty(path)
    with os.scandir(path) as it:
        for entry in it:
            if entry.name not in names:
                return False
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
                return False
    return True


def _pids_of_uid(uid: int, zombies: bool = False) -> list[int]:
    """Every process whose real uid is uid, from /proc/PID/status (not the owner of /proc/PID, which a process
    that makes itself non-dumpable turns into root). os-level reads of bytes: the runner scans after every job,
    and text files cost it ~3x the CPU."""
    pids = []
    me = str(os.getpid())
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == me:
            continue
        try:
            fd = os.open(f"/proc/{name}/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            text = os.read(fd, 4096)  # State and Uid are among the first lines (Name: escapes newlines)
        except OSError:
            continue
        finally:
            os.close(fd)
        state = b""
        for line in text.split(b"\n"):
            if line.startswith(b"State:"):
                state = line.split()[1]
            elif line.startswith(b"Uid:"):
                if int(line.split()[1]) == uid and (zombies or state != b"Z"):
                    pids.append(int(name))
                break
    return pids


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
            msg = wire.read_blob(conn, wire.recv(conn))
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

