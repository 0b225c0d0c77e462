"""What every backend provides: start a sandbox running the runner, tell whether it died of OOM, destroy it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

RUNNER_DIR = Path(__file__).resolve().parent.parent / "inside"
JANITOR = Path(__file__).resolve().parent.parent / "janitor.py"
LABEL = "rewardbox.sandbox"


@dataclass(frozen=True)
class SandboxSpec:
    """Limits of a whole sandbox (the runner's per-job rlimits sit inside these)."""

    memory_mb: int = 1536  # whole sandbox, memory = memory+swap; jobs are OOM-killed first
    cpus: float = 1.0  # CPU quota
    pids: int = 256  # all processes of the sandbox
    tmpfs_mb: int = 64  # each of /tmp, /mnt and /scratch
    tmpfs_inodes: int = 4096


class SandboxHandle(Protocol):
    id: str
    socket_path: str

    async def alive(self) -> bool:
        """Whether the sandbox still runs (asked while its runner starts: one that died is never waited for)."""
        ...

    async def died_of_oom(self) -> bool: ...

    async def destroy(self) -> None: ...


class Backend(Protocol):
    name: str

    async def start(self, uid_base: int, spec: SandboxSpec) -> SandboxHandle: ...

    async def remove_stale(self) -> int: ...

    def image_id(self) -> str: ...


SOCKETS_ROOT = Path(tempfile.gettempdir()) / "rewardbox-sockets"
STAGED_RUNNERS = Path(tempfile.gettempdir()) / "rewardbox-runner"
OWNER_FILE = "owner"
_own_roots: dict[int, Path] = {}  # per process id: a forked child gets a folder of its own

# What a sandbox can learn about the host from its mount table is the host-side path of each bind mount. So those
# paths carry no facts: socket folders have random names (the owner's pid is in a file inside, which no job can
# read), and the in-sandbox code is bound from a copy named by its content, not from the checkout.


def socket_root() -> Path:
    """This process's directory of sandbox socket dirs (root-only): /tmp/rewardbox-sockets/<random>, holding an
    `owner` file with owner_tag() (for remove_stale_socket_dirs)."""
    own = _own_roots.get(os.getpid())
    if own is None or not own.is_dir():
        SOCKETS_ROOT.mkdir(mode=0o700, exist_ok=True)
        own = Path(tempfile.mkdtemp(prefix="o-", dir=SOCKETS_ROOT))
        (own / OWNER_FILE).write_text(owner_tag())
        _own_roots[os.getpid()] = own
        start_janitor()
    return own


def new_socket_dir() -> str:
    """A fresh private folder for one sandbox's socket, in socket_root()."""
    for _ in range(3):
        try:
            return tempfile.mkdtemp(prefix="sbx-", dir=socket_root())
        except FileNotFoundError:  # release_socket_root() of a pool closing in this process took it just now
            _own_roots.pop(os.getpid(), None)
    return tempfile.mkdtemp(prefix="sbx-", dir=socket_root())


def release_socket_root() -> None:
    """Remove this process's socket folder once no sandbox uses it (a clean stop leaves nothing behind)."""
    own = _own_roots.get(os.getpid())
    if own is None:
        return
    try:
        if {p.name for p in own.iterdir()} <= {OWNER_FILE}:
            (own / OWNER_FILE).unlink(missing_ok=True)
            try:
                own.rmdir()
                _own_roots.pop(os.getpid(), None)
            except OSError:  # another pool of this process started a sandbox meanwhile: the folder stays
                (own / OWNER_FILE).write_text(owner_tag())
    except OSError:
        pass


def remove_stale_socket_dirs() -> int:
    """Socket dirs of rewardbox processes that no longer run (they died without closing their pools)."""
    removed = 0
    if SOCKETS_ROOT.is_dir():
        for entry in SOCKETS_ROOT.iterdir():
            if entry.name.isdigit():  # the layout of earlier versions: named after the owner's pid
                tag = f"{os.uname().nodename}:{entry.name}"
            else:
                try:
                    tag = (entry / OWNER_FILE).read_text()
                except OSError:
                    continue  # being created right now, or not ours
            if owner_alive(tag):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def staged_runner_dir() -> str:
    """The in-sandbox code, copied to /tmp/rewardbox-runner/<content hash> (made once, atomically): what the
    backends bind at /opt/rewardbox, so that no sandbox sees where the checkout lives."""
    import hashlib

    files = sorted(p for p in RUNNER_DIR.iterdir() if p.is_file() and not p.name.startswith("."))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    target = STAGED_RUNNERS / digest.hexdigest()[:16]
    if target.is_dir() and all((target / p.name).is_file() for p in files):
        return str(target)
    STAGED_RUNNERS.mkdir(mode=0o700, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".stage-", dir=STAGED_RUNNERS))
    try:
        for path in files:
            shutil.copyfile(path, work / path.name)
            (work / path.name).chmod(0o644)
        work.chmod(0o755)  # jobs read it (compile.py, candidate_host.js run as the job's uid)
        try:
            work.rename(target)
        except OSError:  # another process staged the same content first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return str(target)


# Job processes are forked from the runner's interpreter, so its hash seed is theirs: fixed, so that set and dict
# orders (and so outputs) are the same in every sandbox and on every replay.
RUNNER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
              "PYTHONDONTWRITEBYTECODE": "1"}


def runner_digest() -> str:
    """Content hash of the in-sandbox code (runner, judge, codec, ...): the runner version stored with rollouts."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(RUNNER_DIR.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


# A foreign image (a user's own, SandboxTarget.foreign) gets the base root filesystem bound read-only here: the
# runner runs on its interpreter, through its own dynamic loader and libraries, whatever the image holds.
FOREIGN_BASE = "/opt/rewardbox-base"
# Real paths only: the base's own links (/lib64/ld-linux..., /lib) are absolute and would lead into the image.
FOREIGN_LIBS = f"{FOREIGN_BASE}/usr/lib/x86_64-linux-gnu:{FOREIGN_BASE}/usr/lib"
FOREIGN_ENV = {"PYTHONHOME": f"{FOREIGN_BASE}/usr", "REWARDBOX_BASE": FOREIGN_BASE, "REWARDBOX_BASE_LIBS": FOREIGN_LIBS}


def foreign_loader() -> list[str]:
    """How a binary of the base root filesystem starts in a foreign image: its own loader and libraries, never
    the image's (whose glibc may be older, or absent)."""
    return [f"{FOREIGN_BASE}/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "--library-path", FOREIGN_LIBS]


def runner_command(uid_base: int, oom_control: str | None = None, foreign: bool = False) -> list[str]:
    # Not -I: it would ignore PYTHONHASHSEED. The environment is ours alone (RUNNER_ENV; nothing of the host's).
    python = [*foreign_loader(), f"{FOREIGN_BASE}/usr/bin/python3.11"] if foreign else ["/usr/bin/python3"]
    cmd = [*python, "-s", "/opt/rewardbox/runner.py", "--socket", "/run/rewardbox/runner.sock",
           "--uid-base", str(uid_base)]
    if oom_control:
        cmd += ["--oom-control", oom_control]
    return cmd


_janitors: dict[int, subprocess.Popen] = {}  # per process id, like _own_roots


def start_janitor() -> None:
    """Once per process: the janitor (sandboxes/janitor.py) that removes this process's sandboxes, socket folders
    and cgroups when it dies without closing its pools (SIGKILL, OOM), so that nothing of it depends on another
    rewardbox process starting later."""
    running = _janitors.get(os.getpid())
    if running is not None and running.poll() is None:
        return
    # -P: the script's folder (sandboxes/, whose types.py would shadow the stdlib's) is not put on sys.path.
    # A session of its own: a signal to the owner's process group (Ctrl-C, a supervisor) leaves it to do its job.
    _janitors[os.getpid()] = subprocess.Popen(
        [sys.executable, "-P", "-s", str(JANITOR), "--owner-pid", str(os.getpid()), "--owner-tag", owner_tag(),
         "--sockets", str(SOCKETS_ROOT)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", start_new_session=True)


def owner_tag() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


def owner_alive(tag: str) -> bool:
    host, _, pid = tag.rpartition(":")
    if host != os.uname().nodename or not pid.isdigit():
        return True  # another machine's sandbox: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
