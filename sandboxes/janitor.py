"""The janitor: what a rewardbox process leaves on the host when it dies without closing its pools goes with it.

A process killed hard (SIGKILL, the OOM killer) cannot clean up. Its sandboxes end by themselves (the runner's owner
watchdog; bubblewrap's --die-with-parent), but their traces stayed until another rewardbox process started on the
same host and swept them (remove_stale): exited containers, socket folders, empty cgroups, on a host that restarts
servers often, piling up (issue 27). So every process that starts sandboxes starts one janitor
(sandboxes.backends.base.start_janitor), in a session of its own. It waits for its owner to end, by any means, and
then removes exactly what carries the owner's tag (`host:pid`), never anything of a live process:
- the Docker containers labelled `rewardbox.owner=<tag>` (they also remove themselves once their runner ends:
  auto_remove; this catches one created but never started, or whose runner is still waiting for its owner);
- the socket folders whose `owner` file holds the tag, with the sandboxes' socket and mount-point folders inside;
- the bubblewrap cgroups named after those folders (`<folder>-<random>`), once their processes are gone.
After a clean stop there is nothing left to remove, and it just ends.

Run as a script (`python -P janitor.py ...`): stdlib only, plus the Docker SDK imported only if an owner died.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import time
from pathlib import Path

OWNER_FILE = "owner"  # as in sandboxes/backends/base.py
CGROUP_PARENTS = (Path("/sys/fs/cgroup/rewardbox"), Path("/sys/fs/cgroup/memory/rewardbox"),
                  Path("/sys/fs/cgroup/pids/rewardbox"))
SWEEPS_S = (0.0, 2.0, 5.0, 20.0)  # after the death: a container create in flight lands within seconds


def wait_for_death(pid: int) -> None:
    """Return once process `pid` (this janitor's parent) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or a kernel without pidfds: watch for being re-parented
        fd = -1
    try:
        while os.getppid() == pid:
            if fd >= 0:
                select.select([fd], [], [])  # readable once the process has exited
            else:
                time.sleep(0.5)
    finally:
        if fd >= 0:
            os.close(fd)


def alive(pid: int) -> bool:
    """Whether a live process has this pid (a zombie, the owner's corpse not yet reaped by its parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def owned_folders(sockets: Path, tag: str) -> list[Path]:
    found = []
    try:
        entries = list(sockets.iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            if (entry / OWNER_FILE).read_text() == tag:
                found.append(entry)
        except OSError:
            continue
    return found


def remove_cgroups(prefixes: set[str]) -> int:
    """Cgroups named `<prefix>-...` (empty once their processes are gone; the caller tries again later)."""
    left = 0
    for parent in CGROUP_PARENTS:
        try:
            children = [c for c in parent.iterdir() if c.is_dir() and c.name.split("-sbx-")[0] in prefixes]
        except OSError:
            continue
        for child in children:
            try:
                child.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left += 1
    return left


def remove_containers(tag: str) -> int:
    """Containers labelled with the owner's tag, whatever their state. 0 when there is no Docker engine."""
    try:
        import docker
        from docker.errors import APIError, NotFound
    except ImportError:
        return 0
    try:
        client = docker.from_env(timeout=30)
        containers = client.containers.list(all=True, sparse=True, filters={"label": f"rewardbox.owner={tag}"})
    except Exception:  # noqa: BLE001 - no engine here (a bubblewrap host), or it is not answering: nothing to do
        return 0
    removed = 0
    for c in containers:
        try:
            c.remove(force=True)
            removed += 1
        except (NotFound, APIError):  # gone meanwhile, or its removal is already under way (auto_remove)
            pass
    client.close()
    return removed


def clean(sockets: Path, tag: str) -> None:
    pid = int(tag.rpartition(":")[2])
    start = time.monotonic()
    prefixes: set[str] = set()
    for at in SWEEPS_S:
        time.sleep(max(0.0, start + at - time.monotonic()))
        if alive(pid):
            return  # a process with the owner's pid runs (the pid was reused): what carries the tag may be its own
        remove_containers(tag)
        folders = owned_folders(sockets, tag)
        prefixes |= {f.name for f in folders}
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        if not remove_cgroups(prefixes) and at >= SWEEPS_S[2]:
            break


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--owner-pid", type=int, required=True)
    p.add_argument("--owner-tag", required=True)
    p.add_argument("--sockets", type=Path, required=True)
    a = p.parse_args()
    wait_for_death(a.owner_pid)
    clean(a.sockets, a.owner_tag)


if __name__ == "__main__":
    main()
