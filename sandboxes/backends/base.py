"""What every backend provides: start a sandbox running the runner, tell whether it died of OOM, destroy it."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

RUNNER_DIR = Path(__file__).resolve().parent.parent / "inside"
LABEL = "rewardbox.sandbox"


@dataclass(frozen=True)
class SandboxSpec:
    """Limits of a whole sandbox (the runner's per-job rlimits sit inside these)."""

    memory_mb: int = 1536  # whole sandbox, memory = memory+swap; jobs are OOM-killed first
    cpus: float = 1.0  # CPU quota
    pids: int = 256  # all processes of the sandbox
    tmpfs_mb: int = 64  # each of /tmp and /scratch
    tmpfs_inodes: int = 4096


class SandboxHandle(Protocol):
    id: str
    socket_path: str

    async def died_of_oom(self) -> bool: ...

    async def destroy(self) -> None: ...


class Backend(Protocol):
    name: str

    async def start(self, uid_base: int, spec: SandboxSpec) -> SandboxHandle: ...

    async def remove_stale(self) -> int: ...

    def image_id(self) -> str: ...


SOCKETS_ROOT = Path(tempfile.gettempdir()) / "rewardbox-sockets"


def socket_root() -> Path:
    """This process's directory of sandbox socket dirs (root-only): /tmp/rewardbox-sockets/<pid>."""
    SOCKETS_ROOT.mkdir(mode=0o700, exist_ok=True)
    own = SOCKETS_ROOT / str(os.getpid())
    own.mkdir(mode=0o700, exist_ok=True)
    return own


def remove_stale_socket_dirs() -> int:
    """Socket dirs of rewardbox processes that no longer run (they died without closing their pools)."""
    removed = 0
    if SOCKETS_ROOT.is_dir():
        for entry in SOCKETS_ROOT.iterdir():
            if not entry.name.isdigit() or owner_alive(f"{os.uname().nodename}:{entry.name}"):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


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


def runner_command(uid_base: int, oom_control: str | None = None) -> list[str]:
    # Not -I: it would ignore PYTHONHASHSEED. The environment is ours alone (RUNNER_ENV; nothing of the host's).
    cmd = ["/usr/bin/python3", "-s", "/opt/rewardbox/runner.py", "--socket", "/run/rewardbox/runner.sock",
           "--uid-base", str(uid_base)]
    if oom_control:
        cmd += ["--oom-control", oom_control]
    return cmd


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
