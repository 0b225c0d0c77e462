"""Repository archives: check an uploaded .tar.gz and rewrite it in the one form sandboxes accept.

An upload is refused whole (nothing of it is kept) when any member is unsafe or a limit is exceeded: an absolute
path, a `..` component, a link pointing outside the repository (or a path through a link), a device or FIFO,
more bytes, files or path depth than allowed. A hard link becomes a copy of its target. An archive whose entries
all sit under one top-level folder (sdists, GitHub archives) is unpacked into that folder's contents.

The normalized form is a deterministic tar.gz of directories, regular files (mode 0644, or 0755 when executable)
and links that stay inside, sorted, with no owners or times: what sandboxes/inside/repo_workspace.py loads.
The repository's id is the sha256 of the archive as uploaded.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import tarfile
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class ArchiveLimits:
    archive_bytes: int = 32 << 20  # the .tar.gz as uploaded
    unpacked_bytes: int = 32 << 20  # all file contents (the sandbox's /scratch holds the workspace: see README)
    files: int = 2500  # files, directories and links
    depth: int = 32  # path components


class BadArchive(ValueError):
    """What is wrong with the archive, for the client; `status` is 413 for a limit, 400 for anything else."""

    def __init__(self, problem: str, status: int = 400) -> None:
        super().__init__(problem)
        self.status = status


@dataclass(frozen=True)
class Normalized:
    id: str  # sha256 of the uploaded archive
    data: bytes  # the normalized tar.gz
    archive_bytes: int
    unpacked_bytes: int
    files: int
    stripped: str | None  # the top-level folder that was removed, if any


@dataclass(frozen=True)
class _Member:
    kind: str  # "d" | "f" | "l"
    data: bytes = b""  # file content or link target
    executable: bool = False


def normalize(archive: bytes, limits: ArchiveLimits) -> Normalized:
    if len(archive) > limits.archive_bytes:
        raise BadArchive(f"archive: {len(archive)} bytes, more than the limit of {limits.archive_bytes}", 413)
    members = _read(archive, limits)
    members, stripped = _strip_top_folder(members)
    if not members:
        raise BadArchive("archive: no files")
    _check_links(members)
    unpacked = sum(len(m.data) for m in members.values() if m.kind == "f")
    return Normalized(id=hashlib.sha256(archive).hexdigest(), data=_write(members), archive_bytes=len(archive),
                      unpacked_bytes=unpacked, files=len(members), stripped=stripped)


def _read(archive: bytes, limits: ArchiveLimits) -> dict[str, _Member]:
    members: dict[str, _Member] = {}
    unpacked = 0
    try:
        tar = tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise BadArchive(f"archive: not a gzip-compressed tar ({e})") from None
    try:
        for info in tar:
            if len(members) >= limits.files:
                raise BadArchive(f"archive: more than {limits.files} entries", 413)
            path = _clean(info.name, limits)
            if info.isdir():
                member = _Member("d")
            elif info.isreg():
                unpacked += info.size
                if unpacked > limits.unpacked_bytes:
                    raise BadArchive(f"archive: unpacks to more than {limits.unpacked_bytes} bytes", 413)
                f = tar.extractfile(info)
                member = _Member("f", f.read() if f else b"", bool(info.mode & 0o111))
            elif info.issym():
                member = _Member("l", info.linkname.encode())
                if info.linkname.startswith("/") or not info.linkname:
                    raise BadArchive(f"archive: link {path} -> {info.linkname!r} points outside the repository")
            elif info.islnk():  # a hard link: a copy of an earlier file of the archive
                try:
                    target = members.get(_clean(info.linkname, limits))
                except BadArchive:
                    target = None
                if target is None or target.kind != "f":
                    raise BadArchive(f"archive: hard link {path} -> {info.linkname!r} points outside the repository "
                                     "(or to no file of it)")
                unpacked += len(target.data)
                if unpacked > limits.unpacked_bytes:
                    raise BadArchive(f"archive: unpacks to more than {limits.unpacked_bytes} bytes", 413)
                member = target
            elif info.ischr() or info.isblk() or info.isfifo():
                raise BadArchive(f"archive: {path} is a device or FIFO")
            else:
                raise BadArchive(f"archive: {path} is of an unsupported type")
            previous = members.get(path)
            if previous is not None and not (previous.kind == member.kind == "d"):
                raise BadArchive(f"archive: {path} appears twice")
            members[path] = member
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise BadArchive(f"archive: unreadable ({e})") from None
    finally:
        tar.close()
    return members


def _clean(name: str, limits: ArchiveLimits) -> str:
    if "\0" in name:
        raise BadArchive("archive: a member name contains a NUL byte")
    if name.startswith("/"):
        raise BadArchive(f"archive: absolute path {name[:200]!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadArchive(f"archive: path {name[:200]!r} leaves the repository (..)")
    if not parts:
        raise BadArchive(f"archive: empty member name {name[:200]!r}")
    if len(parts) > limits.depth:
        raise BadArchive(f"archive: path {name[:200]!r} is deeper than {limits.depth} components", 413)
    return "/".join(parts)


def _strip_top_folder(members: dict[str, _Member]) -> tuple[dict[str, _Member], str | None]:
    tops = {path.split("/", 1)[0] for path in members}
    if len(tops) != 1:
        return members, None
    top = tops.pop()
    if members.get(top, _Member("d")).kind != "d" or not any("/" in p for p in members):
        return members, None
    return {p.split("/", 1)[1]: m for p, m in members.items() if "/" in p}, top


def _check_links(members: dict[str, _Member]) -> None:
    for path, member in members.items():
        parent = posixpath.dirname(path)
        while parent:  # nothing may be reached through a link (a link to a directory elsewhere)
            if members.get(parent, _Member("d")).kind != "d":
                raise BadArchive(f"archive: {path} lies below {parent}, which is not a directory")
            parent = posixpath.dirname(parent)
        if member.kind == "l":
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.data.decode()))
            if target == ".." or target.startswith("../") or target.startswith("/"):
                raise BadArchive(f"archive: link {path} -> {member.data.decode()!r} points outside the repository")


def _write(members: dict[str, _Member]) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, member in sorted(members.items()):
                info = tarfile.TarInfo(path)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if member.kind == "d":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif member.kind == "l":
                    info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, member.data.decode()
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(member.data), 0o755 if member.executable else 0o644
                    tar.addfile(info, io.BytesIO(member.data))
    return out.getvalue()
