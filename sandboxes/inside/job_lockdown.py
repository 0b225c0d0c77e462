"""What a job process does to itself between the fork and the program (stdlib only; runner.py's head has the whole).

In order: the OOM score to the maximum, default signals, the job's descriptors in place, the job uid (no way back),
rlimits, nice, the seccomp filter and a Landlock domain limited to the job's writable places; then the program,
exec'd or, for Python, run as __main__ in the forked interpreter. Nothing here trusts the program: it runs last."""

from __future__ import annotations

import _signal
import atexit  # here, not in each job process: a first import there costs it ~90 page faults
import os
import resource
import signal
import stat
import sys
import traceback
import types

import landlock
import seccomp

SCRATCH = "/scratch"


# The job's writable places, each a tmpfs of the sandbox, wiped after every job. /mnt: SandboxFusion users' programs
# write there (`open("/mnt/b", "w")`) and fetch it back (fetch_files), as they could on SandboxFusion's host.
SHARED_ROOTS = ("/tmp", "/mnt")


WRITABLE_ROOTS = (*SHARED_ROOTS, SCRATCH)


HERE = os.path.dirname(os.path.abspath(__file__))  # this folder: its modules are ours, never a program's
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


# Job processes (and the judge and linters, which handle the program) run at nice 10: in a container, where the
# scheduler shares the CPU by weight, the runner and its zygotes (nice 0) then still get the CPU promptly when a job
# keeps up to nproc processes busy, so a deadline is enforced on time. A job cannot lower it again (no
# CAP_SYS_NICE). CPU time, which efficiency is scored on, does not depend on it.
JOB_NICE = 10


_SIGPIPE = int(signal.SIGPIPE)


JOB_OOM_ADJ = 1000  # job processes; the runner, zygotes, judge and linter keep the sandbox's own (lowest) score


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
    cpu = cpu_limit_s(limits)
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

    seccomp.install()  # also sets no_new_privs, which Landlock needs
    landlock.restrict(WRITABLE_ROOTS)


def cpu_limit_s(limits: dict) -> int:
    """RLIMIT_CPU's soft limit for a job process (whole seconds, at least 1; the hard limit is one more)."""
    return max(1, int(float(limits["cpu_s"]) + 0.999))


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
    _run_python_main(program["code"], program.get("filename", "main.py"), ours=bool(program.get("ours")))


def _which(name: str, env: dict) -> str:
    for d in env["PATH"].split(":"):
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(name)


# The program of a cases job, compiled once by its case zygote (below) for all its cases: (source, path, code).
preloaded: tuple[str, str, object] | None = None


PRELOAD_MAX_SOURCE = 1 << 20  # larger sources compile in each case, as before (the case's limits bound that)


def _compile_main(code: str, path: str) -> object:
    """The one place a program's source is compiled, so that a case zygote's code object is what the case would
    have compiled itself (compile() inherits this module's future flags)."""
    return compile(code, path, "exec")


# The runner's own machinery: never importable by a program, ours included (a program of ours imports the in-sandbox
# libraries it was started for, e.g. repo_judge's reporter, which the warm process holds already).
MACHINERY = ("runner", "protocol", "zygotes", "job_lockdown", "job_process", "cleanup", "wire", "seccomp",
             "locked_cases", "spawn_reports")


def _run_python_main(code: str, filename: str, ours: bool = False) -> None:
    """Execute source as __main__ without starting an interpreter, with Python's own exit semantics. A candidate's
    program (ours False) imports its own modules, never one loaded from this folder; a program of ours keeps the
    in-sandbox libraries the warm process holds, the runner's machinery aside."""
    cwd = os.getcwd()
    main, path = _enter_main(filename, ours, cwd), os.path.join(cwd, filename)
    pre = preloaded  # compiled by the case zygote from this very source and path: the same code object
    try:
        compiled = pre[2] if pre is not None and pre[1] == path and pre[0] == code else _compile_main(code, path)
    except BaseException as e:  # noqa: BLE001 - a SyntaxError, as the interpreter reports it
        _run_main(None, main, failed=e)
    _run_main(compiled, main)


# A case zygote's program, ready to run in each case: (code object, __main__ module, its standard streams), made by
# prepare_main.
prepared: tuple[object, types.ModuleType, tuple] | None = None


def prepare_main(filename: str, cwd: str) -> None:
    """In a case zygote, once: what every case of its preloaded candidate program does before the program's first
    line (_enter_main), so that a case forked from it only locks down and runs (run_prepared_main). Each case
    gets its own copy of all of it (fork), and none of it is the program's: the program has not run."""
    global prepared
    assert preloaded is not None
    main = _enter_main(filename, False, cwd)
    if preloaded[1] != main.__file__:
        raise ValueError("the program's path changed")
    prepared = (preloaded[2], main, _case_streams())


def _case_streams() -> tuple:
    """The standard streams a case's program gets, made once here over descriptors of the kinds each case's are
    (stdin a memfd at offset 0, stdout and stderr pipes), so that every attribute they take from the descriptor
    when made (seekable, buffer size, tty or not, position) is what a case's own would take; a case's descriptors
    then replace 0, 1, 2 under them. Made in each case, they cost it ~55 page faults of CPU."""
    stdin = os.memfd_create("rewardbox-stdin", os.MFD_CLOEXEC)
    r, w = os.pipe()
    for fd, target in ((stdin, 0), (w, 1), (w, 2)):
        os.dup2(fd, target)
    for fd in (stdin, r, w):
        os.close(fd)
    streams = sys.stdin, sys.stdout, sys.stderr = _standard_streams()  # bound here: a case rebinds the same ones
    return streams


def _standard_streams() -> tuple:
    """Fresh standard streams over this process's descriptors 0-2, as the interpreter makes them."""
    return (open(0, closefd=False),  # noqa: SIM115 - the standard streams of this process
            open(1, "w", closefd=False),  # noqa: SIM115
            open(2, "w", closefd=False, errors="backslashreplace"))  # noqa: SIM115


def run_prepared_main() -> None:
    """In a case forked from a case zygote (prepare_main), locked down: run the program. Never returns."""
    assert prepared is not None
    _run_main(*prepared)


def _enter_main(filename: str, ours: bool, cwd: str) -> types.ModuleType:
    """sys as a fresh interpreter's for the program (path, modules, argv), and an empty __main__ module."""
    import builtins

    sys.path[:] = [cwd] + [p for p in sys.path if p not in (HERE, cwd)]
    for name in [m for m, mod in list(sys.modules.items())
                 if m == "__main__" or m in MACHINERY
                 or (not ours and os.path.dirname(getattr(mod, "__file__", None) or "") == HERE)]:
        del sys.modules[name]
    sys.argv = [filename]
    main = types.ModuleType("__main__")
    main.__file__ = os.path.join(cwd, filename)
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main


def _run_main(compiled: object, main: types.ModuleType, streams: tuple | None = None,
              failed: BaseException | None = None) -> None:
    """Run compiled in main with the interpreter's exit semantics and fresh standard streams (streams: made for
    this process's descriptors 0-2 already, _case_streams); failed: the error compiling it (reported as the
    interpreter would). Never returns."""
    # As the interpreter does at start-up: a write to a closed pipe raises BrokenPipeError rather than killing
    # the program (SIGXFSZ stays default: a file over RLIMIT_FSIZE ends the job as output_limit).
    _signal.signal(_SIGPIPE, _signal.SIG_IGN)  # signal.signal's enum conversions: ~20 page faults per process
    sys.stdin, sys.stdout, sys.stderr = streams or _standard_streams()
    code_status = 0
    try:
        if failed is not None:
            raise failed
        exec(compiled, main.__dict__)  # type: ignore[arg-type]
    except SystemExit as e:
        code_status = _exit_code(e)
    except BaseException as e:  # noqa: BLE001 - as the interpreter prints it: from the program's first frame on
        tb = None if failed is not None else (e.__traceback__.tb_next if e.__traceback__ else None)
        traceback.print_exception(type(e), e, tb)
        code_status = 1
    try:
        threading = sys.modules.get("threading")  # as the interpreter: only when the program imported it
        if threading is not None:
            threading._shutdown()  # join non-daemon threads
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


class SpawnError(Exception):
    """Setting up one job failed in its own process; the job ends, the sandbox goes on. str() is safe to show."""


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
