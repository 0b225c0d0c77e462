"""SWE-bench-like user images with an OLD Python and an old pytest, built locally for the tests: Debian bullseye
(minbase, Python 3.9) made by mmdebstrap from the Debian mirror, pytest 5.4.3 with pluggy 0.13 or pytest 7.4.4 with
pluggy 1.0 installed from pinned PyPI wheels, the interpreter at /opt/miniconda3/envs/testbed/bin/python (a link to
the system's python3.9, as a conda env's `bin/python` is), and one benchmark task's repository at /testbed.

Most SWE-bench instance images hold Python 3.6-3.9 and pytest 5-7: pytest 5 is the reporter's floor (with Python
3.7), pytest 7 with pluggy 1.0 the last before the hook and configuration APIs rewardbox's own pytest 9 uses
(tests/test_old_python_image.py runs on both).

The base (Debian + pytest, ~30 s, ~110 MB each) is a tarball cached under the rewardbox cache, keyed by this file and
the pytest; the image per task is that tarball plus /testbed, `docker import`ed once (tagged by both)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from sandboxes.image import cache_dir

REPO = "rewardbox-test-oldpy"
SUITE = "bullseye"
PYVER = "3.9"
ENV = "/opt/miniconda3/envs/testbed"
PYTHON = f"{ENV}/bin/python"
TESTBED = "/testbed"
# pytest and its dependencies as pip resolves them for Python 3.9, pinned (pure wheels, no resolution here).
WHEELS = {
    "5.4.3": ("pytest==5.4.3", "pluggy==0.13.1", "py==1.11.0", "packaging==20.9", "pyparsing==2.4.7",
              "attrs==21.4.0", "more-itertools==8.14.0", "wcwidth==0.2.13"),
    "7.4.4": ("pytest==7.4.4", "pluggy==1.0.0", "iniconfig==2.0.0", "packaging==23.2", "exceptiongroup==1.2.0",
              "tomli==2.0.1"),
}
PYTESTS = tuple(WHEELS)
SITE = f"usr/local/lib/python{PYVER}/dist-packages"


def mirror() -> str:
    return os.environ.get("REWARDBOX_DEBIAN_MIRROR", "http://deb.debian.org/debian").rstrip("/")


def mirror_problem() -> str | None:
    """Why the Debian mirror cannot serve the suite (None: it can): the only reason the tests may skip."""
    url = f"{mirror()}/dists/{SUITE}/Release"
    try:
        with urllib.request.urlopen(url, timeout=15) as r:  # noqa: S310 - our own configured mirror
            r.read(1)
    except OSError as e:
        return f"the Debian mirror does not serve {SUITE} ({url}: {e}); set REWARDBOX_DEBIAN_MIRROR"
    return None  # mmdebstrap missing is no reason: `make image` needs it too, the build fails naming it


def _key(pytest: str) -> str:
    return hashlib.sha256(Path(__file__).read_bytes() + pytest.encode()).hexdigest()[:12]


def base_tar(pytest: str) -> Path:
    """Debian SUITE minbase + python3, that pytest installed, the conda-style interpreter link: built once."""
    out = cache_dir() / "test-images" / f"oldpy-{SUITE}-pytest{pytest}-{_key(pytest)}.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        wheels = Path(tmp) / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "--only-binary=:all:", "--python-version", PYVER, "--implementation", "py", "--abi", "none",
                        "--platform", "any", "-d", str(wheels), *WHEELS[pytest]], check=True, capture_output=True)
        # The hooks run under sh with $1 the root; pip is the host's (pure wheels: nothing to build), the bytecode
        # is compiled by the image's own interpreter (unchecked-hash: the image's file times change on import).
        install = (f'"{sys.executable}" -m pip install -q --disable-pip-version-check --no-deps --no-compile '
                   f'--no-index --target "$1/{SITE}" {wheels}/*.whl && rm -rf "$1/{SITE}/bin"')
        compile_ = (f'chroot "$1" /usr/bin/python{PYVER} -m compileall -q --invalidation-mode unchecked-hash '
                    f'/{SITE} /usr/lib/python{PYVER} >/dev/null || true')
        link = f'mkdir -p "$1{ENV}/bin" "$1{TESTBED}" && ln -s /usr/bin/python{PYVER} "$1{PYTHON}"'
        part = Path(tmp) / "base.tar"
        subprocess.run(["mmdebstrap", "--variant=minbase", "--include=python3", "--quiet",
                        "--aptopt=Apt::Install-Recommends \"false\"",
                        "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
                        "--dpkgopt=path-exclude=/usr/share/locale/*",
                        f"--customize-hook={install}", f"--customize-hook={compile_}", f"--customize-hook={link}",
                        SUITE, str(part), f"deb {mirror()} {SUITE} main"], check=True, capture_output=True)
        part.rename(out)
    for stale in out.parent.glob(f"oldpy-{SUITE}-pytest{pytest}-*.tar"):  # of earlier versions of this file
        if stale != out:
            stale.unlink(missing_ok=True)
    return out


def image_ref(task: dict, pytest: str) -> str:
    digest = hashlib.sha256(_key(pytest).encode() + task["archive"])
    return f"{REPO}:{digest.hexdigest()[:12]}"


def build(task: dict, pytest: str) -> str:
    """Build (once) the image with that pytest holding `task`'s repository at /testbed; returns its reference."""
    ref = image_ref(task, pytest)
    if subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False).returncode == 0:
        return ref
    from service.compat.swebench import archive_files

    with tempfile.TemporaryFile() as buf:
        with tarfile.open(base_tar(pytest)) as base, tarfile.open(fileobj=buf, mode="w") as tar:
            for member in base:
                if member.name.lstrip("./").startswith("dev/"):
                    continue  # docker provides /dev
                tar.addfile(member, base.extractfile(member) if member.isfile() else None)
            for rel, content in sorted(archive_files(task["archive"]).items()):
                info = tarfile.TarInfo(f"./testbed/{rel}")
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
        buf.seek(0)
        subprocess.run(["docker", "import", "-", ref], stdin=buf, capture_output=True, check=True)
    return ref
