"""After a job (stdlib only; runner.py's head has the whole): every process of the job's uid killed (found from
/proc/PID/status, which a process cannot disguise), its files wiped from the writable places, and the files a
job asked to fetch read with caps. These run in processes forked from the runner that execute only this code."""

from __future__ import annotations

import os
import signal
import stat
import time

from job_lockdown import SHARED_ROOTS


def _kill_every_process_as(uid: int, zombies: bool) -> bool:
    """In a forked child of the runner: become uid and SIGKILL every process of it; True when none is left.
    kill(-1) from within the uid reaches every process of it in one pass of the kernel's task list, so a fork
    racing it either is signalled or fails. With zombies, also wait until the runner has reaped them."""
    _become(uid)
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


def _become(uid: int) -> None:
    """In a forked child of the runner: drop to uid, for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _kill_quietly(pid: int) -> None:
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass


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
