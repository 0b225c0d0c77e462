"""Bubblewrap backend: the same runner under bwrap namespaces, for hosts without a Docker engine.

The root filesystem is the sandbox image's (built offline by sandboxes/image/build.sh), bound read-only.
New pid, ipc, uts, net (loopback only) and mount namespaces; tmpfs /tmp and /scratch with size caps; the
runner keeps only the capabilities it needs. Memory and pids are capped by a cgroup when the host lets us
create one (root on cgroup v1 or v2); the runner's rlimits apply either way. Requires root: the runner must
switch between distinct unprivileged uids, which an unprivileged user namespace cannot map.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

from ..image import image_tag, rootfs_dir, rootfs_ready
from .base import RUNNER_DIR, SandboxSpec, runner_command

CGROUP_V1 = Path("/sys/fs/cgroup")
OOM_FILE = "/run/rewardbox/oom_control"  # inside the sandbox


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


class BubblewrapBackend:
    name = "bubblewrap"

    def __init__(self) -> None:
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.sock_root = Path(tempfile.gettempdir()) / "rewardbox-sockets"

    def image_id(self) -> str:
        return f"rootfs:{image_tag()}"

    def check_image(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("the bubblewrap backend needs root (distinct job uids); use the docker backend")
        if not rootfs_ready():
            raise RuntimeError(f"sandbox root filesystem {rootfs_dir()} not built: run `make image`")

    def command(self, uid_base: int, spec: SandboxSpec, sock_dir: str, oom_file: str | None = None) -> list[str]:
        tmpfs = str(spec.tmpfs_mb << 20)
        # The runner tells a job killed by the kernel's OOM killer (memory_limit) from the cgroup's counter,
        # bound read-only into its private (0700) socket directory.
        oom = ["--ro-bind", oom_file, OOM_FILE] if oom_file else []
        return [
            self.bwrap,
            "--ro-bind", str(rootfs_dir()), "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", tmpfs, "--perms", "1777", "--tmpfs", "/tmp",
            "--size", tmpfs, "--perms", "0755", "--tmpfs", "/scratch",
            "--ro-bind", str(RUNNER_DIR), "/opt/rewardbox",
            "--bind", sock_dir, "/run/rewardbox", *oom,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent", "--new-session",
            "--cap-drop", "ALL",
            *[arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN") for arg in ("--cap-add", cap)],
            "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
            "--chdir", "/",
            *runner_command(uid_base, OOM_FILE if oom_file else None),
        ]

    async def start(self, uid_base: int, spec: SandboxSpec) -> BubblewrapSandbox:
        self.sock_root.mkdir(mode=0o700, exist_ok=True)
        sock_dir = tempfile.mkdtemp(prefix="sbx-", dir=self.sock_root)
        cgroup = Cgroup(f"sbx-{uuid.uuid4().hex[:12]}", spec)

        def child_setup() -> None:
            os.setsid()
            cgroup.enter()

        with open(os.path.join(sock_dir, "runner.log"), "wb") as log:  # the runner's own faults, for debugging
            proc = await asyncio.to_thread(
                subprocess.Popen,
                self.command(uid_base, spec, sock_dir, cgroup.oom_file()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=child_setup,  # noqa: PLW1509 - only os calls between fork and exec
            )
        return BubblewrapSandbox(proc, sock_dir, cgroup)

    async def remove_stale(self) -> int:
        """bwrap sandboxes die with their parent (--die-with-parent): only empty cgroups can be left."""
        removed = 0
        for parent in (CGROUP_V1 / "rewardbox", CGROUP_V1 / "memory" / "rewardbox", CGROUP_V1 / "pids" / "rewardbox"):
            if parent.is_dir():
                for child in parent.iterdir():
                    if child.is_dir():
                        try:
                            child.rmdir()
                            removed += 1
                        except OSError:
                            pass
        return removed
