"""A case zygote locked down as the job it serves (stdlib only; runner.py's head has the whole).

A cases job runs one program on many inputs, and its case zygote (zygotes._case_zygote) holds that one program
for that one job. Locked down once, as every case would lock itself down (job uid, rlimits, nice, OOM score,
seccomp, Landlock: job_lockdown.enter_job), it starts each case with none of those steps: a fork that runs the
prepared Python program (job_lockdown.prepare_main), or a vfork and exec of a compiled program (posix_spawn: no
copy of a Python process). Measured on a small C++ case: ~1.8 ms of CPU in the case's process before, ~1.1 ms for
the binary spawned alone.

Why no case gains over another: a case starts in exactly the state it would have reached locking itself down.
The zygote shares the cases' uid, so a case can signal it, stop it, or change what the kernel lets any process of
the uid change (rlimits by prlimit, nice, scheduling policy, CPU affinity, I/O priority); it can neither read nor
change its memory (not dumpable, set explicitly; ptrace and process_vm_* denied by seccomp), so it cannot
change what the zygote reports (wait4's status and rusage, from the kernel) nor what it starts next. The zygote
checks that state before each case, when the clean-up has left no other process of the uid. A case that kills or
stops the zygote, changes that state, or leaves a process behind (the clean-up then kills the zygote with
the rest; files alone are wiped without it) loses it: the runner runs that case again if its end was not
reported, and the rest, from the lean zygote, each locking itself down as before (cases.py).

The zygote's own limits are the job's with room for itself: nproc one more (it is one of the uid's processes: a
case's limit reads one higher, for the same room); CPU: a Python case lowers its own limit to the job's right after
the fork, while a spawned program inherits the zygote's, so a spawner stops serving (the runner goes on without
it) once its own CPU reaches half of that limit."""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import socket

import job_lockdown
import wire
from job_lockdown import JOB_OOM_ADJ, _which, cpu_limit_s, enter_job, place_fds
from spawn_reports import SPAWN_FAILED, report_exit, setup_error

_libc = ctypes.CDLL(None, use_errno=True)
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)
IOPRIO_WHO_PROCESS = 1
PR_SET_DUMPABLE = 4
LOCK_HEADROOM = 64 << 20  # address space the zygote keeps free for its own loop under the job's memory limit
UNBOUNDED_CPU_S = 1 << 20  # a Python case zygote's own limit (each case takes the job's: _fork_case)


def lock(req: dict, program: dict, env: dict | None) -> tuple | None:
    """Lock this case zygote down as the job (irreversible). Returns what each case needs: ("python", cpu) for a
    prepared Python program, ("spawn", path, argv, env, cpu) for an exec'd one; None (nothing changed) when this
    zygote cannot serve locked (too little memory for itself under the job's limit, a binary not found)."""
    limits, cwd = req["limits"], req["cwd"]
    if _vm_bytes() + LOCK_HEADROOM > int(limits["memory_mb"]) << 20:
        return None
    cpu = cpu_limit_s(limits)  # as enter_job sets it
    if "argv" in program:
        argv = [str(a) for a in program["argv"]]
        full_env = job_lockdown.job_env(env, cwd)
        try:
            path = argv[0] if "/" in argv[0] else _which(argv[0], full_env)
        except (OSError, ValueError, UnicodeError):
            return None  # each case reports it, as before
        target: tuple = ("spawn", path, argv, full_env, cpu)
    elif job_lockdown.prepared is not None:
        target = ("python", cpu)
    else:
        return None
    _close_on_exec_all()  # a spawned program gets its three descriptors and nothing of ours
    own = {**limits, "nproc": int(limits["nproc"]) + 1}
    if target[0] == "python":
        own["cpu_s"] = UNBOUNDED_CPU_S
    enter_job(req["uid"], own, cwd, oom_adj=JOB_OOM_ADJ)
    # not dumpable, whatever fs.suid_dumpable says: no process of the uid may read or write its memory, descriptors
    # or environment through /proc (the uid change alone leaves it dumpable where that sysctl is 1)
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")
    return target


def serve(ctl: socket.socket, target: tuple) -> None:
    """The locked zygote's loop: one case per request ({"id"} and the case's stdin, stdout, stderr), answered as
    any zygote answers (the pid, or spawn_error; then the exit report). Exits when the runner hangs up, and a
    spawner whose own CPU reached half of the job's limit exits before the next case (nothing may be imported here
    any more: sys.path is the program's). Never returns."""
    os.set_inheritable(ctl.fileno(), False)
    state = _own_state()
    while True:
        try:
            req, fds = wire.recv_with_fds(ctl)
        except (wire.ChannelClosed, OSError, ValueError):
            os._exit(0)
        if _own_state() != state:  # a case changed what the next would inherit: the runner goes on without us
            os._exit(0)
        if target[0] == "spawn":
            pid, error = _spawn_case(target, fds)
        else:
            pid, error = _fork_case(target[1], fds)
        for fd in fds:
            os.close(fd)
        if error:
            wire.send(ctl, {"id": req["id"], "pid": pid, "spawn_error": error})
            continue
        wire.send(ctl, {"id": req["id"], "pid": pid})
        report_exit(ctl, req["id"], pid)
        if target[0] == "spawn":
            ru = resource.getrusage(resource.RUSAGE_SELF)
            if (ru.ru_utime + ru.ru_stime) * 2 >= target[4]:
                os._exit(0)


def _spawn_case(target: tuple, fds: list[int]) -> tuple[int, str]:
    """posix_spawn the program with the case's descriptors as 0, 1, 2 in a session of its own."""
    _, path, argv, env, _ = target
    for fd in fds:
        os.set_inheritable(fd, False)  # received inheritable: only their copies as 0-2 may reach the program
    try:
        pid = os.posix_spawn(path, argv, env, setsid=True,
                             file_actions=[(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds[:3])])
    except OSError as e:  # as job_lockdown.run_program words a failed exec
        return 0, f"could not execute {argv[0][:200]!r}: {e.strerror or type(e).__name__}"
    return pid, ""


def _fork_case(cpu: int, fds: list[int]) -> tuple[int, str]:
    """Fork a case of the prepared Python program: descriptors in place, its own session and CPU limit, run.
    A failure before the program's first line comes back on the error pipe (one line), as in zygotes."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        err_fd = err_w
        try:
            os.close(err_r)
            place_fds(fds[:3] + [err_w])
            err_fd = 3
            fcntl.fcntl(err_fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
            os.setsid()
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            os.close(err_fd)
            job_lockdown.run_prepared_main()
        except BaseException as e:  # noqa: BLE001 - report any set-up failure, then die
            try:
                os.write(err_fd, job_lockdown._setup_failure(e).encode(errors="replace")[:2000])
            except OSError:
                pass
        os._exit(SPAWN_FAILED)
    os.close(err_w)
    return pid, setup_error(err_r, pid)


RLIMITS = tuple(getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_"))


def _own_state() -> tuple:
    """What a case inherits from this zygote and another process of the uid can change: rlimits (prlimit), nice,
    scheduling policy, CPU affinity, I/O priority. Read before each case, when the clean-up has left no other
    process of the uid (so nothing can change it between this check and the fork)."""
    return (tuple(resource.getrlimit(r) for r in RLIMITS), os.getpriority(os.PRIO_PROCESS, 0),
            os.sched_getscheduler(0), os.sched_getparam(0).sched_priority, tuple(sorted(os.sched_getaffinity(0))),
            _ioprio())


def _ioprio() -> int:
    return int(_libc.syscall(IOPRIO_GET, IOPRIO_WHO_PROCESS, 0)) if IOPRIO_GET is not None else 0


def _vm_bytes() -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmSize:"):
                return int(line.split()[1]) << 10
    return 0


def _close_on_exec_all() -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:  # the listing's own descriptor, closed by now
                pass
