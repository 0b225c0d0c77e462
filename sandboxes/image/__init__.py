"""The sandbox image: tag, cache locations and the offline build (``build.sh``).

The same content is available two ways: a root filesystem directory for the bubblewrap backend
(``rootfs_dir()``) and, where a Docker engine answers, the image ``image_name()``.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parent
IMAGE_REPO = "rewardbox-sandbox"
BUILD_SCRIPT = IMAGE_DIR / "build.sh"
# Order matters: build.sh hashes the same files in the same order.
_TAG_INPUTS = ("Dockerfile", "build.sh", "requirements.txt", "npm_install.py", "node/package.json",
               "node/package-lock.json")
DEFAULT_CACHE = Path.home() / ".cache" / "rewardbox"
_cache = DEFAULT_CACHE  # set by the service from its settings (REWARDBOX_CACHE): use_cache_dir()


def image_tag() -> str:
    """First 12 hex chars of sha256 over the build inputs (_TAG_INPUTS)."""
    digest = hashlib.sha256()
    for name in _TAG_INPUTS:
        digest.update((IMAGE_DIR / name).read_bytes())
    return digest.hexdigest()[:12]


def image_name() -> str:
    """Docker image reference for the current tag."""
    return f"{IMAGE_REPO}:{image_tag()}"


def use_cache_dir(path: Path | None) -> None:
    """Where this process keeps root filesystems and downloads from now on (None: ``~/.cache/rewardbox``)."""
    global _cache
    _cache = path or DEFAULT_CACHE


def cache_dir() -> Path:
    """The folder set by use_cache_dir(), else ``~/.cache/rewardbox``."""
    return _cache


def rootfs_dir() -> Path:
    """Root filesystem directory for the current tag (use only when ``rootfs_ready()``)."""
    return cache_dir() / "rootfs" / image_tag()


def _ready_marker() -> Path:
    root = rootfs_dir()
    return root.with_name(root.name + ".ready")


def rootfs_ready() -> bool:
    """True once build.sh has finished the rootfs for the current tag (marker file written last)."""
    return _ready_marker().is_file() and rootfs_dir().is_dir()


def build(quiet: bool = False) -> str:
    """Run build.sh (a no-op when cached) and return the tag it built.

    Raises ``RuntimeError`` with the build log when it fails.
    """
    proc = subprocess.run(  # build.sh reads its cache folder from its environment
        ["env", f"REWARDBOX_CACHE={cache_dir()}", "bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        log = (proc.stderr or "") if quiet else "(build output above)"
        raise RuntimeError(f"sandbox image build failed (exit {proc.returncode}): {log[-4000:]}")
    lines = proc.stdout.split()
    return lines[-1] if lines else image_tag()
