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

from rewardbox.names import wire


@dataclass(frozen=True)
class ArchiveLimits:
    archive_bytes: int = 32 << 20  # the .tar.gz as uploaded
    unpacked_bytes: int = 32 << 20  # all file contents (the sandbox's /scratch holds the workspace: see README)
    files: int = 2500  # files, directories and links
    depth: int = 32  # path components
    header_bytes: int = 64 << 10  # one member's headers: its ustar block plus pax / GNU extensions (see _Bounded)


class BadArchive(ValueError):
    """What is wrong with the archive, for the client; `status` is 413 for a limit, 400 for anything else."""

    def __init__(self, problem: str, status: int = 400) -> None:
        super().__init__(wire(problem))  # a member name that is not UTF-8 arrives git-quoted (rewardbox/names.py)
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


# The header types whose content tarfile reads whole into memory, named for the client.
_EXTENSIONS = {b"x": "pax extended header", b"X": "pax extended header (Solaris)", b"g": "pax global header",
               b"L": "GNU long name", b"K": "GNU long link name", b"S": "GNU sparse header"}


class _Bounded(io.RawIOBase):
    """The decompressed tar stream as tarfile sees it, with every header bounded before tarfile reads it.

    tarfile reads a pax ('x', 'g') or GNU ('L', 'K') extension whole (`fileobj.read(size)`, size from the
    archive), follows chains of them by recursion, and reads sparse maps block by block, all inside one
    `next()`: a 255 KiB upload declaring a 500 MiB pax header took the API process to 652 MiB. So while
    tarfile looks for the next member (`reading_headers`), everything it reads counts against
    `limits.header_bytes`, and a read that would pass it is refused before anything is read: the header's
    content is never decompressed, let alone held. Member data is read by the caller in chunks, and the
    whole stream is bounded by what the limits allow (data plus headers of every member).
    Chosen over a separate pre-scan of the 512-byte blocks because it cannot disagree with tarfile about where
    a header starts (pax `size` records, base-256 sizes, sparse maps): it sits under tarfile's own reads.
    """

    def __init__(self, gz: gzip.GzipFile, limits: ArchiveLimits) -> None:
        super().__init__()
        self.gz, self.limits = gz, limits
        self.stream_cap = limits.unpacked_bytes + (limits.files + 1) * (limits.header_bytes + 1024)
        self.reading_headers = False
        self.header_used = 0
        self.header_kind = b""  # the type flag of the last header block tarfile read

    def start_member(self) -> None:
        self.reading_headers, self.header_used, self.header_kind = True, 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise BadArchive("archive: unreadable (an unbounded read)")
        if self.reading_headers:
            if self.header_used + size > self.limits.header_bytes:
                what = _EXTENSIONS.get(self.header_kind, "member header")
                raise BadArchive(f"archive: headers of one member pass the limit of {self.limits.header_bytes} "
                                 f"bytes: a {what} asks for {size} bytes after {self.header_used}", 413)
            self.header_used += size
        if self.gz.tell() + size > self.stream_cap:
            raise BadArchive(f"archive: unpacks to more than {self.stream_cap} bytes of tar stream", 413)
        data = self.gz.read(size)
        if self.reading_headers and size == tarfile.BLOCKSIZE and data[156:157] in _EXTENSIONS:
            self.header_kind = data[156:157]  # (a header, or content that looks like one: only the message differs)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        here = self.gz.tell()
        target = offset if whence == io.SEEK_SET else here + offset if whence == io.SEEK_CUR else -1
        if target < 0 or target > self.stream_cap:
            raise BadArchive(f"archive: unpacks to more than {self.stream_cap} bytes of tar stream", 413)
        return self.gz.seek(target)

    def tell(self) -> int:
        return self.gz.tell()


def _read(archive: bytes, limits: ArchiveLimits) -> dict[str, _Member]:
    members: dict[str, _Member] = {}
    unpacked = 0
    stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(archive), mode="rb"), limits)
    stream.start_member()
    try:
        tar = tarfile.open(fileobj=stream, mode="r:")  # reads the first member's headers
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise BadArchive(f"archive: not a gzip-compressed tar ({e})") from None
    except RecursionError:
        raise BadArchive("archive: a chain of extension headers too long to read", 413) from None
    try:
        while True:
            stream.start_member()
            info = tar.next()
            stream.reading_headers = False
            if info is None:
                break
            if len(members) >= limits.files:
                raise BadArchive(f"archive: more than {limits.files} entries", 413)
            path = _clean(info.name, limits)
            if info.isdir():
                member = _Member("d")
            elif info.isreg():
                unpacked += info.size
                if unpacked > limits.unpacked_bytes:
                    raise BadArchive(f"archive: unpacks to more than {limits.unpacked_bytes} bytes", 413)
                if info.sparse is not None:
                    raise BadArchive(f"archive: {path} is a sparse file, which is not supported")
                member = _Member("f", _content(tar, info), bool(info.mode & 0o111))
            elif info.issym():
                member = _Member("l", info.linkname.encode("utf-8", "surrogateescape"))
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
    except RecursionError:
        raise BadArchive("archive: a chain of extension headers too long to read", 413) from None
    finally:
        tar.close()
    return members


def _content(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    """A member's bytes, read in chunks: one read of the whole member would ask _Bounded for more than a header."""
    f = tar.extractfile(info)
    if f is None:
        return b""
    return b"".join(iter(lambda: f.read(1 << 16), b""))


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
            link = member.data.decode("utf-8", "surrogateescape")  # a link target is bytes, like a name
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
            if target == ".." or target.startswith("../") or target.startswith("/"):
                raise BadArchive(f"archive: link {path} -> {link!r} points outside the repository")


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
                    info.type, info.mode = tarfile.SYMTYPE, 0o777
                    info.linkname = member.data.decode("utf-8", "surrogateescape")
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(member.data), 0o755 if member.executable else 0o644
                    tar.addfile(info, io.BytesIO(member.data))
    return out.getvalue()


def archive_files(archive: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz, with one top-level folder stripped as the service does."""
    normalized = normalize(archive, ArchiveLimits(archive_bytes=1 << 40, unpacked_bytes=1 << 40, files=1 << 30))
    files = {}
    with tarfile.open(fileobj=io.BytesIO(normalized.data), mode="r:gz") as tar:
        for member in tar:
            if member.isreg():
                data = tar.extractfile(member)
                assert data is not None  # a regular member always has its data
                files[member.name] = data.read()
    return files
