"""A SWE-bench-like user image, built locally for the tests (no registry, no network): a conda-style interpreter
at /opt/miniconda3/envs/testbed/bin/python holding pytest, one benchmark task's repository at /testbed, a shell and
a few coreutils, and nothing of rewardbox's (no /usr/bin/python3, no /opt/rewardbox, no GNU patch).

Its files come from the base root filesystem (sandboxes.image.rootfs_dir()), so the image is tagged by that
filesystem's tag, this file and the task: built once, reused while they stay the same (~20 s, ~60 MB).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

from sandboxes.image import image_tag, rootfs_dir

REPO = "rewardbox-test-swebench"
ENV = "/opt/miniconda3/envs/testbed"
PYTHON = f"{ENV}/bin/python"
TESTBED = "/testbed"
LIBDIR = "usr/lib/x86_64-linux-gnu"
TOOLS = ("dash", "ls", "cat", "echo", "env", "true", "mkdir", "rm", "cp", "head", "wc", "sleep")
PACKAGES = ("_pytest", "pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "__pycache__"}


def image_ref(task: dict) -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes() + image_tag().encode() + task["archive"])
    return f"{REPO}:{digest.hexdigest()[:12]}"


def _libs(binary: Path, root: Path) -> set[str]:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if "=>" in line and "vdso" not in line}


def _add_tree(tar: tarfile.TarFile, src: Path, dest: str, skip: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    for here, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in skip]
        rel = os.path.relpath(here, src)
        base = dest if rel == "." else f"{dest}/{rel}"
        tar.add(here, base, recursive=False)
        for name in files:
            if name.endswith(".pyc"):
                continue
            tar.add(os.path.join(here, name), f"{base}/{name}", recursive=False)


def build(task: dict) -> str:
    """Build (once) the image holding `task`'s repository at /testbed; returns its reference."""
    ref = image_ref(task)
    if subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False).returncode == 0:
        return ref
    from service.compat.swebench import archive_files

    root = rootfs_dir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)

        def directory(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def data(name: str, content: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))

        for d in ("usr", "usr/bin", "usr/lib", LIBDIR, "usr/lib64", "etc", "opt", "opt/miniconda3",
                  "opt/miniconda3/envs", ENV[1:], f"{ENV[1:]}/bin", f"{ENV[1:]}/lib", f"{ENV[1:]}/lib/python3",
                  "root", "testbed"):
            directory(d)
        directory("tmp", 0o1777)
        link("bin", "usr/bin")
        link("lib", "usr/lib")
        link("lib64", "usr/lib64")
        link("usr/lib64/ld-linux-x86-64.so.2", f"/{LIBDIR}/ld-linux-x86-64.so.2")
        libs = {"ld-linux-x86-64.so.2"}
        for tool in TOOLS:
            tar.add(root / "usr/bin" / tool, f"usr/bin/{tool}")
            libs |= _libs(root / "usr/bin" / tool, root)
        link("usr/bin/sh", "dash")
        python = root / "usr/bin/python3.11"
        tar.add(python, f"{ENV[1:]}/bin/python3.11")
        link(f"{ENV[1:]}/bin/python", "python3.11")
        libs |= _libs(python, root)
        dynload = root / "usr/lib/python3.11/lib-dynload"
        for ext in dynload.iterdir():
            libs |= _libs(ext, root)
        for name in sorted(libs):
            tar.add(os.path.realpath(root / LIBDIR / name), f"{LIBDIR}/{name}")
        _add_tree(tar, root / "usr/lib/python3.11", f"{ENV[1:]}/lib/python3.11", STDLIB_SKIP)
        site = root / "usr/local/lib/python3.11/dist-packages"
        for name in PACKAGES:
            if (site / name).is_dir():
                _add_tree(tar, site / name, f"{ENV[1:]}/lib/python3/dist-packages/{name}", {"__pycache__"})
            else:
                tar.add(site / name, f"{ENV[1:]}/lib/python3/dist-packages/{name}")
        data("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        for rel, content in sorted(archive_files(task["archive"]).items()):
            data(f"testbed/{rel}", content)
    subprocess.run(["docker", "import", "-", ref], input=buf.getvalue(), capture_output=True, check=True)
    return ref
