"""Backends host the in-sandbox runner: Docker containers or bubblewrap namespaces. See choose_backend()."""

from __future__ import annotations

import shutil

from ..targets import DEFAULT_TARGET, SandboxTarget
from .base import Backend, SandboxHandle, SandboxSpec

__all__ = ["Backend", "SandboxHandle", "SandboxSpec", "choose_backend", "NoSandboxAvailable", "UnsupportedTarget"]


class NoSandboxAvailable(RuntimeError):
    """Neither backend can run here. rewardbox never falls back to running code unsandboxed."""


class UnsupportedTarget(ValueError):
    """The target cannot run on this backend (a user's own image on bubblewrap): the request's fault, a 4xx."""


INSTALL_HINT = (
    "rewardbox needs an isolation backend and found none.\n"
    "  Docker:     apt-get install docker.io && dockerd &   (then: make image)\n"
    "  Bubblewrap: apt-get install bubblewrap mmdebstrap    (then: make image)\n"
    "Set REWARDBOX_BACKEND=docker|bubblewrap to choose one explicitly."
)


def docker_available() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no engine answers"
        return False


def bubblewrap_available() -> bool:
    return shutil.which("bwrap") is not None


def choose_backend(name: str = "auto", *, image: str | None = None,
                   target: SandboxTarget = DEFAULT_TARGET) -> Backend:
    """docker | bubblewrap | auto (docker when an engine answers, else bubblewrap, else refuse), started from
    `target` (default: rewardbox's own image). `image`: the Docker image of the default target (default: the
    current tag of sandboxes/image); bubblewrap's root filesystem is target.rootfs, else under
    sandboxes.image.cache_dir(). A user's own image (target.foreign) runs on Docker only: UnsupportedTarget."""
    name = (name or "auto").lower()
    if name in ("docker", "auto") and (name == "docker" or docker_available()):
        from .docker_backend import DockerBackend

        return DockerBackend(image, target)
    if name in ("bubblewrap", "bwrap", "auto") and bubblewrap_available():
        if target.foreign or (target.docker_image is not None and target.rootfs is None):
            raise UnsupportedTarget(f"environment.image {target.docker_image!r}: a user's own image runs on the "
                                    "Docker backend only (this server runs bubblewrap)")
        from .bwrap_backend import BubblewrapBackend

        return BubblewrapBackend(target.rootfs)
    if name not in ("docker", "bubblewrap", "bwrap", "auto"):
        raise NoSandboxAvailable(f"unknown backend {name!r}; use docker, bubblewrap or auto")
    raise NoSandboxAvailable(INSTALL_HINT)
