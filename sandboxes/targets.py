"""Where a sandbox is started from: rewardbox's own image, an environment built from a spec, or a user's image.

A pool serves one target; the service keeps one pool per target in use (service/environments). The default target
(every field unset) is today's sandbox image (`sandboxes.image.image_name()`, `sandboxes.image.rootfs_dir()`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxTarget:
    """What a sandbox runs on, and how jobs in it find the task's tools."""

    key: str = "default"  # names the pool and its metrics: "default", an environment id, or "image:<name:tag>"
    docker_image: str | None = None  # None: the default sandbox image
    rootfs: str | None = None  # bubblewrap root filesystem; None: the default one (no user image on bubblewrap)
    foreign: bool = False  # an image rewardbox did not build: the runner brings its own interpreter, read-only
    python: str = "/usr/bin/python3"  # the interpreter a repository's tests and a session's `python` run with
    repo_path: str | None = None  # where a user's image holds the repository (e.g. /testbed); None: the item's snapshot
    wheels: str | None = None  # in-sandbox folder of the environment's wheels (offline `pip install` in sessions)

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_TARGET


DEFAULT_TARGET = SandboxTarget()
