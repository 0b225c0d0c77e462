"""Build one task environment from an `EnvironmentSpec`: a bubblewrap root filesystem and a Docker image.

How (one pass, both backends from the same content):
  1. An overlay over the base sandbox rootfs (`sandboxes.image.rootfs_dir()`): lower = base (read-only), upper =
     this environment's changes. Nothing the build does can touch the base.
  2. Debian packages: `apt-get update && apt-get install` inside bubblewrap over the overlay (pid namespace, the
     host's network for the Debian mirror only while apt runs, a memory limit and a deadline).
  3. Python: the host's pip downloads wheels for the image's CPython 3.11 on manylinux x86_64 (compiled wheels
     allowed, dependencies resolved) and installs them with `--no-index --target` into the image's dist-packages.
     Why the host's pip and not the image's (Debian's python3-pip, there for sessions): the host's pip already
     carries this machine's registry setup (CA bundle of the proxy, constraints), and the wheels it fetched are
     kept in the environment (`WHEELS_DIR`) so sessions can `pip install` offline. Sources are never built
     (`--only-binary=:all:`): no build code of a package runs on the host.
  4. npm packages: the host's npm with `--ignore-scripts` (install scripts would run on the host) into a prefix
     Node finds (`/usr/lib/x86_64-linux-gnu/nodejs`, on Debian node's global module path).
  5. Setup commands: `sh -c` inside bubblewrap over the overlay, without network.
  6. `build.sh --finalize` (setuid strip, bytecode, trimming), as for the base image.
  7. Result: the rootfs = hard-link copy of the base + the upper layer (copied with --remove-destination, so a
     changed file never writes through a shared inode); the Docker image = `FROM rewardbox-sandbox:<tag>` +
     `ADD` of the upper layer as a tar (plus `rm` of the few paths the build deleted), tagged only on success.
The caller writes the ready marker after this returns (service/environments/store.py).
"""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sandboxes import image
from service.environments.models import EnvironmentSpec

PYVER = "3.11"
SITE = f"usr/local/lib/python{PYVER}/dist-packages"
WHEELS_DIR = "/opt/rewardbox-env/wheels"  # in the environment: the wheels its pip requirements came from
BASE_FILE = "/opt/rewardbox-env/base"  # in the environment: the tag of the base image it was built on
NODE_DIR = "usr/lib/x86_64-linux-gnu/nodejs"  # first folder of Debian node's global module path (before /usr/share)
ENV_REPO = "rewardbox-env"
# Wheels the image's interpreter can load: CPython 3.11 on glibc x86_64 (bookworm has glibc 2.36). pip does not
# widen a given manylinux tag to older glibcs, so they are all listed; linux_x86_64 (locally built) is not.
_MANYLINUX = ["manylinux_2_36", "manylinux_2_35", "manylinux_2_34", "manylinux_2_31", "manylinux_2_28",
              "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014", "manylinux_2_12",
              "manylinux2010", "manylinux_2_5", "manylinux1"]
PIP_PLATFORM = ["--only-binary=:all:", "--python-version", PYVER, "--implementation", "cp",
                "--abi", "cp311", "--abi", "abi3", "--abi", "none",
                *[a for tag in _MANYLINUX for a in ("--platform", f"{tag}_x86_64")], "--platform", "any"]


class BuildFailed(Exception):
    """A step of the build failed; the log says which and why."""


@dataclass(frozen=True)
class BuildLimits:
    timeout_s: float = 900.0  # the whole build
    memory_mb: int = 4096  # address space of each step run over the overlay
    nice: int = 10  # builds yield the CPU to grading


def docker_image(env_id: str) -> str:
    return f"{ENV_REPO}:{env_id[:12]}"


def docker_ok() -> bool:
    docker = shutil.which("docker")
    return docker is not None and subprocess.run([docker, "info"], capture_output=True, check=False).returncode == 0


def pip_python() -> str:
    """An interpreter with a working pip (REWARDBOX_PIP_PYTHON, else python3 on PATH), as build.sh picks it."""
    for py in (os.environ.get("REWARDBOX_PIP_PYTHON", ""), "python3", "/usr/bin/python3"):
        path = py and shutil.which(py)
        if path and subprocess.run([path, "-m", "pip", "--version"], capture_output=True,
                                   check=False).returncode == 0:
            return path
    raise BuildFailed("no interpreter with pip on this host (set REWARDBOX_PIP_PYTHON)")


class _Run:
    """Runs the build's steps, appending their output to the log, each bounded by the build's deadline."""

    def __init__(self, log: IO[str], limits: BuildLimits) -> None:
        self.log, self.limits = log, limits
        self.start = time.monotonic()
        self.deadline = self.start + limits.timeout_s

    def note(self, text: str) -> None:
        self.log.write(f"[env +{time.monotonic() - self.start:.1f}s] {text}\n")
        self.log.flush()

    def _limit(self) -> None:  # in the child, before exec
        os.nice(self.limits.nice)
        cap = self.limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    def __call__(self, argv: Sequence[str], what: str, *, limited: bool = False, **kw: object) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BuildFailed(f"build time limit ({self.limits.timeout_s:.0f} s) reached before: {what}")
        self.note(what)
        try:
            proc = subprocess.run(list(argv), stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=left, check=False, start_new_session=True,
                                  preexec_fn=self._limit if limited else None, **kw)  # type: ignore[call-overload]
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{what}: build time limit ({self.limits.timeout_s:.0f} s) reached") from None
        if proc.returncode != 0:
            raise BuildFailed(f"{what}: exit status {proc.returncode}")


def _bwrap(root: Path, *, network: bool) -> list[str]:
    """bubblewrap over the overlay as root of the build: own pid/ipc/uts namespaces, the host's resolver only
    when the step may reach the registries."""
    argv = ["bwrap", "--bind", str(root), "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--setenv", "DEBIAN_FRONTEND", "noninteractive", "--setenv", "HOME", "/root", "--setenv", "LANG", "C.UTF-8"]
    if network:
        argv += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        if Path("/etc/ssl/certs/ca-certificates.crt").is_file():  # the proxy's CA, for https mirrors
            argv += ["--ro-bind", "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt"]
    else:
        argv += ["--unshare-net"]
    return argv


def _debian(run: _Run, merged: Path, packages: list[str]) -> None:
    # The base's sources.list names the mirror build.sh took from the host's apt sources.
    apt = ("apt-get -o Acquire::Retries=3 -o APT::Sandbox::User=root update -qq && "
           "apt-get -o APT::Sandbox::User=root install -y -q --no-install-recommends -- \"$@\" && apt-get clean")
    run([*_bwrap(merged, network=True), "sh", "-c", apt, "apt", *packages],
        f"apt-get install {' '.join(packages)}", limited=True)


def _python(run: _Run, merged: Path, work: Path, requirements: list[str]) -> None:
    wheels = merged / WHEELS_DIR.lstrip("/")
    wheels.mkdir(parents=True, exist_ok=True)
    reqs = work / "requirements.txt"
    reqs.write_text("".join(f"{r}\n" for r in requirements))
    py = pip_python()
    # The host's own find-links folder may hold wheels built for its interpreter, not the image's: registries only.
    env = {**os.environ, "PIP_FIND_LINKS": "", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_ROOT_USER_ACTION": "ignore"}
    run([py, "-m", "pip", "download", "-q", *PIP_PLATFORM, "-d", str(wheels), "-r", str(reqs)],
        f"pip download {' '.join(requirements)}", env=env)
    run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), "--no-compile",
         "--upgrade", *PIP_PLATFORM, "--target", str(merged / SITE), "-r", str(reqs)],
        "pip install into the image's dist-packages", env=env)


def _npm(run: _Run, merged: Path, work: Path, packages: list[str]) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise BuildFailed("npm packages asked for but no npm on the build host")
    prefix = work / "npm"
    run([npm, "install", "--prefix", str(prefix), "--ignore-scripts", "--no-audit", "--no-fund",
         "--no-package-lock", "--", *packages], f"npm install {' '.join(packages)}")
    dest = merged / NODE_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for entry in (prefix / "node_modules").iterdir():
        if (dest / entry.name).exists():  # a Debian package's module: kept, said in the log
            run.note(f"npm: {entry.name} already in /{NODE_DIR} (from a Debian package); kept")
        elif not entry.name.startswith("."):
            shutil.move(str(entry), dest / entry.name)


def _setup(run: _Run, merged: Path, commands: list[str]) -> None:
    for i, command in enumerate(commands):
        run([*_bwrap(merged, network=False), "sh", "-ec", command], f"setup[{i}]: {command[:200]}", limited=True)


def _whiteouts(upper: Path) -> list[str]:
    """Paths the build deleted from the base (overlay whiteouts: 0/0 character devices); removed from upper."""
    gone: list[str] = []
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                gone.append("/" + str(path.relative_to(upper)))
                path.unlink()
    return gone


def _docker(run: _Run, env_id: str, upper: Path, gone: list[str], work: Path) -> None:
    ctx = work / "docker"
    ctx.mkdir()
    with tarfile.open(ctx / "layer.tar", "w") as tar:
        for entry in sorted(upper.iterdir()):
            tar.add(entry, arcname=entry.name)
    # The label finds an environment's images (and leftovers of rebuilds) without a registry.
    lines = [f"FROM {image.image_name()}", f"LABEL rewardbox.environment={env_id}",
             f"LABEL rewardbox.base={image.image_tag()}", "ADD layer.tar /"]
    if gone:  # a RUN without network only when the build deleted base files
        lines.append("RUN rm -rf -- " + " ".join(f"'{p}'" for p in gone))
    (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
    run(["docker", "build", "-q", "--network", "none", "-t", docker_image(env_id), str(ctx)],
        f"docker build {docker_image(env_id)} FROM {image.image_name()}")
    # An earlier build of the same environment (interrupted, or in a test's own store) left an untagged image.
    subprocess.run(["docker", "image", "prune", "-f", "--filter", f"label=rewardbox.environment={env_id}"],
                   capture_output=True, check=False)


def build(env_id: str, spec: EnvironmentSpec, dest: Path, log: IO[str], limits: BuildLimits,
          *, with_docker: bool) -> int:
    """Build `spec` into the rootfs `dest` (absent; created by a rename at the end) and, `with_docker`, the
    image `docker_image(env_id)`; returns the bytes the environment adds to the base.
    Raises BuildFailed (the log says why); leaves nothing half-built."""
    run = _Run(log, limits)
    if not image.rootfs_ready():
        raise BuildFailed(f"base rootfs {image.rootfs_dir()} not built (run sandboxes/image/build.sh)")
    base = image.rootfs_dir()
    work = Path(tempfile.mkdtemp(prefix=f".build-{env_id[:12]}-", dir=dest.parent))
    upper, ovl_work, merged = work / "upper", work / "ovl", work / "merged"
    for d in (upper, ovl_work, merged):
        d.mkdir()
    t0 = time.monotonic()
    try:
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={base},upperdir={upper},workdir={ovl_work}", str(merged)], "overlay over the base rootfs")
        try:
            if spec.debian:
                _debian(run, merged, spec.debian)
            if spec.python:
                _python(run, merged, work, spec.python)
            if spec.npm:
                _npm(run, merged, work, spec.npm)
            if spec.setup:
                _setup(run, merged, spec.setup)
            base_file = merged / BASE_FILE.lstrip("/")  # what a job can read to tell which base it runs on
            base_file.parent.mkdir(parents=True, exist_ok=True)
            base_file.write_text(image.image_tag() + "\n")
            run(["bash", str(image.BUILD_SCRIPT), "--finalize", str(merged)],
                "finalize (setuid strip, bytecode, trimming)", limited=True)
        finally:
            subprocess.run(["umount", str(merged)], check=False, capture_output=True)
        gone = _whiteouts(upper)
        run(["cp", "-al", f"{base}/.", str(work / "rootfs")], "hard-link copy of the base rootfs")
        for path in gone:
            target = work / "rootfs" / path.lstrip("/")
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        run(["cp", "-a", "--remove-destination", f"{upper}/.", str(work / "rootfs")], "apply the environment layer")
        if with_docker:
            _docker(run, env_id, upper, gone, work)
        size = tree_bytes(upper)
        os.rename(work / "rootfs", dest)
        run.note(f"built in {time.monotonic() - t0:.1f} s, {size / 1e6:.1f} MB over the base")
        return size
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tree_bytes(root: Path) -> int:
    """Bytes of the files under root."""
    return sum(os.lstat(os.path.join(d, n)).st_size for d, _, names in os.walk(root) for n in names)
