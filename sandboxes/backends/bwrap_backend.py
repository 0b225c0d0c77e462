"""Bubblewrap backend: the same runner under bwrap namespaces, for hosts without a Docker engine.

The root filesystem is the sandbox image's (built offline by sandboxes/image/build.sh), bound read-only.
New pid, ipc, uts, net (loopback only) and mount namespaces; tmpfs /tmp, /mnt and /scratch with size and inode
caps; the runner keeps only the capabilities it needs. Memory and pids are capped by a cgroup when the host lets us
create one (root on cgroup v1 or v2); the runner's rlimits apply either way. Requires root: the runner must
switch between distinct unprivileged uids, which an unprivileged user namespace cannot map.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from ..image import image_tag, rootfs_dir, rootfs_ready
from .base import (
    RUNNER_ENV,
    SOCKETS_ROOT,
    SandboxSpec,
    new_socket_dir,
    remove_stale_socket_dirs,
    runner_command,
    staged_runner_dir,
)

CGROUP_V1 = Path("/sys/fs/cgroup")
OOM_FILE = "/run/rewardbox/oom_control"  # inside the sandbox
_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x00020000, 0x2, 0x4, 0x4000, 0x40000


def _mount_scratch_tmpfs(mounts: list[tuple[bytes, bytes]]) -> None:
    """In the child, before it execs bwrap: a private mount namespace holding the sandbox's three tmpfs, which bwrap
    then binds to /tmp, /mnt and /scratch. bwrap's own --tmpfs cannot cap inodes (nr_inodes); mounted here, they
    can. Nothing reaches the host's mount table, and the mounts go with the sandbox's last process."""
    if _libc.unshare(CLONE_NEWNS) != 0 or _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "private mount namespace")
    for target, options in mounts:
        if _libc.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            raise OSError(ctypes.get_errno(), f"tmpfs on {target!r}")


class Cgroup:
    """A per-sandbox memory+pids cgroup (v1 or v2), or nothing where the host does not allow it."""

    def __init__(self, name: str, spec: SandboxSpec) -> None:
        self.paths: list[Path] = []
        self.v2 = (CGROUP_V1 / "cgroup.controllers").exists()
        try:
            if self.v2:
                parent = CGROUP_V1 / "rewardbox"
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
                path = parent / name
                path.mkdir()
                (path / "memory.max").write_text(str(spec.memory_mb << 20))
                (path / "memory.swap.max").write_text("0")
                (path / "pids.max").write_text(str(spec.pids))
                self.paths = [path]
            else:
                mem = CGROUP_V1 / "memory" / "rewardbox" / name
                pids = CGROUP_V1 / "pids" / "rewardbox" / name
                mem.mkdir(parents=True)
                self.paths.append(mem)
                (mem / "memory.limit_in_bytes").write_text(str(spec.memory_mb << 20))
                try:
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(spec.memory_mb << 20))
                except OSError:
                    pass  # no swap accounting: memory.limit alone
                pids.mkdir(parents=True)
                self.paths.append(pids)
                (pids / "pids.max").write_text(str(spec.pids))
        except OSError:
            self.remove()
            self.paths = []

    def enter(self) -> None:
        """Move the calling process (the child before exec) into the cgroup."""
        for path in self.paths:
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def oom_file(self) -> str | None:
        """The file whose "oom_kill N" line counts the kernel's OOM kills in this cgroup, if any."""
        for path in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                if (path / name).exists():
                    return str(path / name)
        return None

    def oom_kills(self) -> int:
        for path in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    for line in (path / name).read_text().splitlines():
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
                except OSError:
                    continue
        return 0

    def remove(self) -> None:
        for path in self.paths:
            try:
                path.rmdir()
            except OSError:
                pass


class BubblewrapSandbox:
    def __init__(self, proc: subprocess.Popen, sock_dir: str, cgroup: Cgroup) -> None:
        self.proc = proc
        self.id = f"bwrap-{proc.pid}"
        self.sock_dir = sock_dir
        self.socket_path = os.path.join(sock_dir, "runner.sock")
        self.cgroup = cgroup

    async def alive(self) -> bool:
        return self.proc.poll() is None  # bwrap ends with the runner, and the runner with bwrap (--die-with-parent)

    async def died_of_oom(self) -> bool:
        return self.cgroup.oom_kills() > 0

    async def destroy(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await asyncio.to_thread(self.proc.wait)
        for _ in range(50):  # the cgroup can only go once its processes are gone
            self.cgroup.remove()
            if not any(p.exists() for p in self.cgroup.paths):
                break
            await asyncio.sleep(0.02)
        shutil.rmtree(self.sock_dir, ignore_errors=True)
        shutil.rmtree(self.sock_dir + "-fs", ignore_errors=True)  # empty mount points: the tmpfs went with it


class BubblewrapBackend:
    name = "bubblewrap"

    def __init__(self, rootfs: str | Path | None = None) -> None:
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.rootfs = str(rootfs) if rootfs else None  # None: the default image's (sandboxes.image.rootfs_dir())

    def root(self) -> str:
        return self.rootfs or str(rootfs_dir())

    def image_id(self) -> str:
        return f"rootfs:{self.rootfs}" if self.rootfs else f"rootfs:{image_tag()}"

    def check_image(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("the bubblewrap backend needs root (distinct job uids); use the docker backend")
        if self.rootfs is not None:
            if not os.path.isdir(self.rootfs):
                raise RuntimeError(f"environment root filesystem {self.rootfs} not found")
        elif not rootfs_ready():
            raise RuntimeError(f"sandbox root filesystem {rootfs_dir()} not built: run `make image`")

    def command(self, uid_base: int, spec: SandboxSpec, sock_dir: str, oom_file: str | None = None) -> list[str]:
        """The bwrap command line; /tmp, /mnt and /scratch come from sock_dir + "-fs" (see _mount_scratch_tmpfs)."""
        # The runner tells a job killed by the kernel's OOM killer (memory_limit) from the cgroup's counter,
        # bound read-only into its private (0700) socket directory.
        oom = ["--ro-bind", oom_file, OOM_FILE] if oom_file else []
        return [
            self.bwrap,
            "--ro-bind", self.root(), "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--bind", os.path.join(sock_dir + "-fs", "tmp"), "/tmp",
            "--bind", os.path.join(sock_dir + "-fs", "mnt"), "/mnt",
            "--bind", os.path.join(sock_dir + "-fs", "scratch"), "/scratch",
            "--ro-bind", staged_runner_dir(), "/opt/rewardbox",
            "--bind", sock_dir, "/run/rewardbox", *oom,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
            "--hostname", "sandbox",
            # The runner is the sandbox's pid 1 (no bwrap monitor there, whose command line names host paths): when
            # it exits, every process of the sandbox goes with it.
            "--as-pid-1", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL",
            *[arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN") for arg in ("--cap-add", cap)],
            "--clearenv", *[arg for name, value in RUNNER_ENV.items() for arg in ("--setenv", name, value)],
            "--chdir", "/",
            *runner_command(uid_base, OOM_FILE if oom_file else None),
        ]

    async def start(self, uid_base: int, spec: SandboxSpec) -> BubblewrapSandbox:
        sock_dir = new_socket_dir()
        # Named after the owner's socket folder: the janitor of a dead owner finds its cgroups (sandboxes/janitor.py).
        cgroup = Cgroup(f"{os.path.basename(os.path.dirname(sock_dir))}-sbx-{uuid.uuid4().hex[:12]}", spec)
        mounts = []
        for name, mode in (("tmp", "1777"), ("mnt", "1777"), ("scratch", "0755")):
            target = os.path.join(sock_dir + "-fs", name)
            os.makedirs(target, mode=0o700)
            options = f"size={spec.tmpfs_mb}m,nr_inodes={spec.tmpfs_inodes},mode={mode}"
            mounts.append((target.encode(), options.encode()))

        def child_setup() -> None:
            os.setsid()
            cgroup.enter()
            _mount_scratch_tmpfs(mounts)

        with open(os.path.join(sock_dir, "runner.log"), "wb") as log:  # the runner's own faults, for debugging
            proc = await asyncio.to_thread(
                subprocess.Popen,
                self.command(uid_base, spec, sock_dir, cgroup.oom_file()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=child_setup,  # noqa: PLW1509 - only os and libc calls between fork and exec
            )
        return BubblewrapSandbox(proc, sock_dir, cgroup)

    async def remove_stale(self) -> int:
        """bwrap sandboxes die with their parent (--die-with-parent): only cgroups and socket dirs can be left. A
        cgroup goes when the socket folder it is named after is gone (its owner died: remove_stale_socket_dirs);
        those of live processes, being set up right now, stay."""
        removed = remove_stale_socket_dirs()
        live = {p.name for p in SOCKETS_ROOT.iterdir()} if SOCKETS_ROOT.is_dir() else set()
        for parent in (CGROUP_V1 / "rewardbox", CGROUP_V1 / "memory" / "rewardbox", CGROUP_V1 / "pids" / "rewardbox"):
            if parent.is_dir():
                for child in parent.iterdir():
                    owner, named, _ = child.name.partition("-sbx-")
                    if child.is_dir() and (not named or owner not in live):  # not named: an earlier version's
                        try:
                            child.rmdir()
                            removed += 1
                        except OSError:
                            pass
        return removed
