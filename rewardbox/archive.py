"""Repository archives from the client side: the .tar.gz that `POST /repos` takes, made deterministically.

    repo_id = Client(url).upload_repo(repo_archive({"pkg/mod.py": b"...", "tests/test_mod.py": b"..."}))

The same bytes for the same files, so an upload of an unchanged repository gets the same id (the sha256 of the
archive) and the server keeps one copy. The server checks and normalizes every upload on its side
(service/repos/archive.py); nothing here is trusted by it.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path


def repo_archive(files: dict[str, bytes], top: str = "repo") -> bytes:
    """A .tar.gz of files (relative path -> content) under one top folder, with no times or owners."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def directory_files(root: str | Path, skip: tuple[str, ...] = (".git", "__pycache__", ".venv")) -> dict[str, bytes]:
    """Every regular file under root (relative POSIX path -> content), leaving out folders named in skip."""
    base = Path(root)
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*"))
            if p.is_file() and not p.is_symlink() and not set(p.relative_to(base).parts) & set(skip)}
