"""Docker backend: one hardened, long-lived container per sandbox, running the runner as its init process."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid

import docker
from docker.errors import NotFound

from ..image import image_name, rootfs_dir, rootfs_ready
from ..targets import DEFAULT_TARGET, SandboxTarget
from .base import (
    FOREIGN_BASE,
    FOREIGN_ENV,
    LABEL,
    RUNNER_ENV,
    SandboxSpec,
    new_socket_dir,
    owner_alive,
    owner_tag,
    remove_stale_socket_dirs,
    runner_command,
    staged_runner_dir,
)

# The runner needs exactly these: switch to the job uids, kill their leftovers, give them their scratch dir.
RUNNER_CAPS = ["SETUID", "SETGID", "KILL", "CHOWN"]


class DockerSandbox:
    def __init__(self, client: docker.DockerClient, container_id: str, sock_dir: str) -> None:
        self.client = client
        self.id = container_id[:12]
        self.container_id = container_id
        self.sock_dir = sock_dir
        self.socket_path = os.path.join(sock_dir, "runner.sock")
        self.started_at = int(time.time()) - 60  # the events filter names the container: a wide window costs nothing

    async def alive(self) -> bool:
        def check() -> bool:
            try:
                state = self.client.api.inspect_container(self.container_id).get("State", {})
            except NotFound:
                return False  # it ended and removed itself (auto_remove)
            return state.get("Status") not in ("exited", "dead", "removing")

        return await asyncio.to_thread(check)

    async def died_of_oom(self) -> bool:
        def check() -> bool:
            try:
                c = self.client.containers.get(self.container_id)
            except NotFound:
                return self._oom_event()
            state = c.attrs.get("State", {})
            return bool(state.get("OOMKilled"))

        return await asyncio.to_thread(check)

    def _oom_event(self) -> bool:
        """A container that removed itself (auto_remove) keeps no state: the engine's events still say whether the
        kernel's OOM killer struck in it."""
        try:
            events = self.client.events(since=self.started_at, until=int(time.time()) + 1, decode=True,
                                        filters={"container": self.container_id, "event": "oom"})
            try:
                return any(True for _ in events)
            finally:
                events.close()
        except docker.errors.DockerException:
            return False

    async def destroy(self) -> None:
        def remove() -> None:
            try:
                self.client.api.remove_container(self.container_id, force=True)  # SIGKILL, never a grace period
            except NotFound:
                pass
            except docker.errors.APIError as e:
                if "already in progress" not in str(e):
                    raise

        await asyncio.to_thread(remove)
        shutil.rmtree(self.sock_dir, ignore_errors=True)


class DockerBackend:
    name = "docker"

    def __init__(self, image: str | None = None, target: SandboxTarget = DEFAULT_TARGET) -> None:
        self.client = docker.from_env(timeout=60)
        self.target = target
        self.image = image or target.docker_image or image_name()
        # Tells this backend's containers from those of other pools in the same process (same owner tag):
        # remove_own() must never take another pool's live sandboxes with it.
        self.instance = uuid.uuid4().hex[:12]

    def image_id(self) -> str:
        try:
            return self.client.images.get(self.image).id
        except NotFound:
            return "missing"

    def check_image(self) -> None:
        try:
            self.client.images.get(self.image)
        except NotFound:
            raise RuntimeError(f"sandbox image {self.image} not found: run `make image`") from None
        if self.target.foreign and not rootfs_ready():
            raise RuntimeError(f"a user's own image runs rewardbox's runner on the base root filesystem "
                               f"{rootfs_dir()}, which is not built: run `make image`")

    def _foreign_mounts(self) -> dict:
        """The base root filesystem, read-only, for the runner's own interpreter in a user's image."""
        return {str(rootfs_dir()): {"bind": FOREIGN_BASE, "mode": "ro"}} if self.target.foreign else {}

    async def start(self, uid_base: int, spec: SandboxSpec) -> DockerSandbox:
        sock_dir = new_socket_dir()
        runner_dir = staged_runner_dir()
        tmpfs_opts = f"rw,nosuid,nodev,noexec,size={spec.tmpfs_mb}m,nr_inodes={spec.tmpfs_inodes}"

        def run() -> str:
            container = self.client.containers.run(
                self.image,
                # As the entrypoint: a user's image may set one, and the runner is the container's init, nothing else.
                entrypoint=runner_command(uid_base, "/sys/fs/cgroup/memory/memory.oom_control", self.target.foreign),
                name=f"rewardbox-{uuid.uuid4().hex[:12]}",
                detach=True,
                # Nothing of it stays once its runner ends, also when its owner died without removing it (the
                # runner's owner watchdog ends it): no pile of exited containers on a host whose servers restart.
                auto_remove=True,
                labels={LABEL: "1", "rewardbox.owner": owner_tag(), "rewardbox.backend": self.instance},
                network_mode="none",
                ipc_mode="none",
                read_only=True,
                # /scratch holds the job's working directory, where compiled programs run: explicitly exec
                # (Docker adds noexec to a tmpfs whose options do not say exec).
                tmpfs={"/tmp": tmpfs_opts + ",mode=1777", "/mnt": tmpfs_opts + ",mode=1777",
                       "/scratch": tmpfs_opts.replace(",noexec", ",exec") + ",mode=755"},
                mem_limit=f"{spec.memory_mb}m",
                memswap_limit=f"{spec.memory_mb}m",
                pids_limit=spec.pids,
                nano_cpus=int(spec.cpus * 1e9),
                cap_drop=["ALL"],
                cap_add=RUNNER_CAPS,
                security_opt=["no-new-privileges"],
                log_config={"type": "none"},  # a job printing forever must not fill the host disk
                volumes={runner_dir: {"bind": "/opt/rewardbox", "mode": "ro"},
                         sock_dir: {"bind": "/run/rewardbox", "mode": "rw"}, **self._foreign_mounts()},
                environment={**RUNNER_ENV, **(FOREIGN_ENV if self.target.foreign else {})},
                user="0:0",
                hostname="sandbox",
                # Nothing of the host's: no name server or search domain of its resolv.conf, no cgroup path.
                dns=["127.0.0.1"],
                dns_search=["."],
                cgroupns="private",
                working_dir="/",
                ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
            )
            return container.id

        try:
            container_id = await asyncio.to_thread(run)
        except Exception:
            shutil.rmtree(sock_dir, ignore_errors=True)
            raise
        return DockerSandbox(self.client, container_id, sock_dir)

    async def remove_stale(self) -> int:
        """Remove sandboxes left by a crashed rewardbox process on this host."""

        def sweep() -> int:
            removed = remove_stale_socket_dirs()
            # sparse: no inspect per container, which fails when another process removes one meanwhile
            for c in self.client.containers.list(all=True, sparse=True, filters={"label": LABEL}):
                if not owner_alive((c.attrs.get("Labels") or {}).get("rewardbox.owner", "")):
                    try:
                        c.remove(force=True)
                    except NotFound:
                        continue
                    removed += 1
            return removed

        return await asyncio.to_thread(sweep)

    async def remove_own(self) -> int:
        """Remove this backend's containers (e.g. one whose start was cancelled by close()), and no one else's."""

        def sweep() -> int:
            removed = 0
            own = [f"rewardbox.owner={owner_tag()}", f"rewardbox.backend={self.instance}"]
            for _ in range(100):  # until none is left: a removal already under way (a cancelled destroy) must end
                containers = self.client.containers.list(all=True, sparse=True, filters={"label": own})
                if not containers:
                    break
                for c in containers:
                    try:
                        c.remove(force=True)
                        removed += 1
                    except NotFound:
                        pass
                    except docker.errors.APIError as e:
                        if "already in progress" not in str(e):
                            raise
                time.sleep(0.1)
            return removed

        return await asyncio.to_thread(sweep)
