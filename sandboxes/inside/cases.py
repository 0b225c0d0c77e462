"""io cases of one program as one job (stdlib only; runs in the runner, trusted).

The host sends the program once with the stdin of every case (never the expected outputs: the host compares); the
runner forks one process per case from the zygote, as a run job does, under that case's limits, and answers once
with every case's record. So a case costs a fork and its own run, not a host round trip and a job's set-up.
A Python program's cases fork from a case zygote that compiled the program once (zygotes._case_zygote; its
compile CPU joins the job's cpu_ms), so a case skips the compile; that zygote, and a compiled program's, is locked
down as the job once (locked_cases.py), so a case skips the lock-down too (a compiled program's is a posix_spawn).
Reply timings = {"compiled_once", "compile_cpu_ms", "locked_zygote": how many cases the locked zygote started}.
The stdins arrive as views of one memfd the host sent (wire.read_request), each copied into its case's memfd.

Each case's stdin is a sealed memfd (fd 0), not a pipe: the program reads it directly, and no case can change
it. Between two cases of the item the runner kills every process of the job uid and wipes the files it owns, as it
does between jobs (Runner.clean_uid; it costs a few directory checks and one /proc scan when the case left
nothing): a case cannot leave a process or a file that a later case of the same item sees.

Per case: wall_s bounds the case, cpu_s and memory_mb its process (rlimits); total_s bounds the whole job, and a
case the job has no time left for is not run (status timeout, with an error naming the cap). The output caps are
per case and stream. The reply is one frame: when the cases' output so far leaves no room for one more case's worst,
the job answers with the cases it ran, and the host sends the rest in another job (graders/io_cases.py).

Reply: status "ok" (the job ran; each case's own status is in its record), cases = one record per case run (the
first ones, in order) with the
keys of a run job's reply (status, exit_code, signal, wall_ms, cpu_ms, peak_memory_kb, stdout, stderr,
stdout_truncated, stderr_truncated, error); cpu_ms summed and peak_memory_kb the largest over the cases, so that an
accounted job's usage (measure.accounted) counts all of them.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import time
from collections.abc import Callable

import usage
from zygotes import ZygoteLost

# The reply is one frame (wire.MAX_FRAME, 64 MiB) of JSON, where a byte of output takes up to 6 characters (\u0000).
REPLY_BUDGET = 48 << 20
JSON_WORST = 6  # per byte of output (a code point of 4 bytes: 12 characters, 3 per byte)


def cases_job(runner, job: dict, limits: dict, proc_class, reply) -> dict:
    """runner: the Runner; proc_class, reply: job_process.Proc and protocol.reply, handed in by the runner."""
    uid, cwd = runner.cand_uid, runner.dirs[runner.cand_uid]
    program, files, env = job["program"], job.get("files"), job.get("env")
    stdins = list(job.get("stdins") or [])
    shared = _write_shared(cwd, files) if files and len(stdins) > 1 else []
    try:
        return _run_cases(runner, proc_class, reply, uid, cwd, program, None if shared else files, env, stdins,
                          limits, set(shared))
    finally:
        for name in shared:
            os.unlink(os.path.join(cwd, name))


def _run_cases(runner, proc_class, reply, uid: int, cwd: str, program: dict, files: dict | None, env: dict | None,
               stdins: list, limits: dict, shared: set[str]) -> dict:
    deadline = time.monotonic() + float(limits["total_s"])
    started = None
    if len(stdins) > 1 and (_compiled_once(program) or ("argv" in program and not files)):
        started = runner.start_case_zygote(program, env, limits,
                                           min(deadline, time.monotonic() + float(limits["wall_s"])))
    if started is not None and "argv" in program and not started[2].get("locked"):
        runner.end_case_zygote(started[0], started[1], kill=True)  # an exec'd program's serves only locked
        started = None
    if started is None:
        res, _ = _each_case(runner, proc_class, reply, runner.lean_zygote, uid, cwd, program, files, env, stdins,
                            limits, shared, deadline)
        res["timings"] = {"compiled_once": 0, "locked_zygote": 0}
        return res
    case_zygote, job_id, ready = started
    locked = bool(ready.get("locked"))
    ended: list[bool] = []

    def lose() -> None:  # the locked zygote is lost (a case killed, stopped or changed it, or left a process)
        if not ended:
            ended.append(True)
            runner.stop_uid(uid)
            runner.end_case_zygote(case_zygote, job_id, kill=True)

    try:  # prepared: the case zygote holds the program and its environment (files: shared, or none)
        res, unlocked = _each_case(runner, proc_class, reply, case_zygote, uid, cwd, program, files, env, stdins,
                                   limits, shared, deadline, prepared=bool(ready.get("prepared")) and not files,
                                   lose=lose if locked else None)
    finally:
        if not ended:
            runner.end_case_zygote(case_zygote, job_id, kill=locked)  # a case may have stopped a locked one
    res["cpu_ms"] += float(ready.get("cpu_ms", 0.0))  # the compile, done once for all the cases: the program's
    res["timings"] = {"compiled_once": 1 if ready.get("preloaded") else 0, "compile_cpu_ms": ready.get("cpu_ms"),
                      "locked_zygote": len(res["cases"]) - unlocked if locked else 0}
    return res


def _compiled_once(program: dict) -> bool:
    """A Python program run as __main__ (not an executable, nor our own in-sandbox programs): its cases fork from
    a case zygote that compiled it once (runner._case_zygote)."""
    return isinstance(program.get("code"), str) and not program.keys() & {"argv", "host", "lint"}


def _each_case(runner, proc_class, reply, zygote, uid: int, cwd: str, program: dict, files: dict | None,
               env: dict | None, stdins: list, limits: dict, shared: set[str], deadline: float,
               prepared: bool = False, lose: Callable[[], None] | None = None) -> tuple[dict, int]:
    """The job's reply, and how many cases ran from an unlocked zygote. lose: given when zygote is a locked case
    zygote (locked_cases.py), called when a case loses it (killed, stopped or changed it, or left a process behind,
    which the clean-up killed it with); that case then runs again, and the rest run, from the lean zygote, each
    locking itself down."""
    reply_left = REPLY_BUDGET
    worst_case = 2 * int(limits["output_bytes"]) * JSON_WORST + 4096  # one case's record, encoded, at most
    records: list[dict] = []
    files_kb = 0
    left_behind = False
    unlocked = 0
    for stdin in stdins:
        now = time.monotonic()
        if now >= deadline:
            records.append(reply("timeout", error="the job's total time (all its cases) ran out before this case"))
            continue
        if left_behind:  # a process of an earlier case survived clean-up: this case cannot start clean
            records.append(reply("killed", error="a process of an earlier case survived clean-up"))
            continue
        if records and reply_left < worst_case:  # its output might not fit this reply: the rest in another job
            break
        files_before = usage.files_written_kb()
        case_deadline = min(now + float(limits["wall_s"]), deadline)
        try:
            record = _one_case(runner, proc_class, zygote, uid, cwd, program, files, env, stdin, limits,
                               case_deadline, prepared, lose is not None)
        except ZygoteLost as e:
            if lose is None or e.zygote is not zygote:
                raise
            lose()
            zygote, prepared, lose = runner.lean_zygote, False, None
            case_deadline = min(time.monotonic() + float(limits["wall_s"]), deadline)  # the case's own time again
            record = _one_case(runner, proc_class, zygote, uid, cwd, program, files, env, stdin, limits,
                               case_deadline, prepared, False)
        if lose is None:
            unlocked += 1
        reply_left -= _encoded(record["stdout"]) + _encoded(record["stderr"]) + 4096
        files_kb = max(files_kb, usage.files_written_kb() - files_before)
        records.append(record)
        # the next case starts with no process and no file of this one (the shared files are root's: untouched);
        # a locked zygote may stay only when nothing else is left (else the clean-up kills it too)
        left_behind = not runner.clean_uid(uid, expected=shared, keep=zygote.pid if lose is not None else 0)
        runner.reap()
    return reply("ok", cases=records, cpu_ms=sum(r.get("cpu_ms", 0.0) for r in records),
                 peak_memory_kb=max((r.get("peak_memory_kb", 0) for r in records), default=0),
                 wall_ms=sum(r.get("wall_ms", 0.0) for r in records), files_kb=files_kb), unlocked


def _one_case(runner, proc_class, zygote, uid: int, cwd: str, program: dict, files: dict | None, env: dict | None,
              stdin, limits: dict, case_deadline: float, prepared: bool, locked: bool) -> dict:
    """Run one case to its end; its run record. A locked zygote's answers are awaited no longer than the case's
    deadline (a case can stop that zygote): ZygoteLost then."""
    proc = proc_class(runner, zygote, uid, cwd, limits)
    runner.used_uids.add(uid)
    try:
        try:
            data = stdin if isinstance(stdin, memoryview) else str(stdin).encode()  # raw from the host, or JSON's
        except UnicodeError:  # Proc refuses it as it refuses a run job's (the host's validation stops it first)
            proc.start(program, str(stdin), files, env)
        else:
            proc.start(program, "", files, env, stdin_file=_input_file(data), prepared=prepared, locked=locked,
                       wait=not locked)
            if locked:
                ready, _, _ = select.select([zygote.sock], [], [], max(0.0, case_deadline - time.monotonic()))
                if not ready:
                    raise ZygoteLost(zygote, "did not answer")
                proc.spawned()
        proc.wait_until(case_deadline)
    except ZygoteLost:
        proc.abandon()
        raise
    return proc.result()


def _input_file(data: bytes | memoryview) -> int:
    """The case's stdin as a sealed anonymous file at offset 0: the program reads it at its own pace, with no pipe
    for the runner to feed (a 1 MB input took ~16 rounds of poll and write), and cannot change it."""
    fd = os.memfd_create("rewardbox-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_SEAL)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_shared(cwd: str, files: dict) -> list[str]:
    """The program's files (a compiled binary), written once for all the cases, owned by root and read-only for
    the job: in the sticky working directory a case can run and read them, but neither change, replace nor
    remove them, so every case runs the same program and its own clean-up stays the fast path. Only plain names;
    [] (each case then writes the files itself, as a run job does) for anything else."""
    import base64

    if any(not isinstance(n, str) or not n or "/" in n or n in (".", "..") for n in files):
        return []
    written: list[str] = []
    try:
        for name, content in files.items():
            executable = isinstance(content, dict) and content.get("exec")
            data = base64.b64decode(content["b64"]) if isinstance(content, dict) else str(content).encode()
            fd = os.open(os.path.join(cwd, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o755 if executable else 0o644)
            written.append(name)
            with open(fd, "wb") as f:
                os.fchmod(fd, 0o755 if executable else 0o644)  # the runner's umask (077) cut the mode given
                f.write(data)
    except (OSError, ValueError, TypeError, KeyError, UnicodeError):
        for name in written:
            os.unlink(os.path.join(cwd, name))
        return []
    return written



def _encoded(text: str) -> int:
    """Characters text takes in the reply's JSON at most: the worst case for a short text, the exact count for a
    long one (control characters escape to 6, an astral character to 12)."""
    if len(text) <= 1 << 16:
        return len(text) * 2 * JSON_WORST
    return len(json.dumps(text))
