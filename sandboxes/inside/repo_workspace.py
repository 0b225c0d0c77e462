"""Repository snapshots and workspaces inside the sandbox (stdlib only). Runs in trusted processes only: the
runner, and judge-uid helpers forked from it while no untrusted process of the job is alive.

A snapshot arrives once per sandbox as the host's normalized tar.gz (service/repos/archive.py: regular files,
directories and links that stay inside; one top folder already stripped) and is kept in the runner's memory (LRU
by bytes), never on the sandbox's tmpfs: each job builds its workspace afresh from memory, and nothing of one job
survives into the next. A repo's pure-Python dependencies ship as wheels in its top-level `wheels/` folder; they
are unpacked once, here, from the snapshot (never from a patched workspace) into a site directory that the test
process puts on sys.path. Nothing in them runs at install time: no setup.py, no scripts, and `.pth` files are
never processed (the test process's interpreter finished its site set-up before any job existed).

Every path operation here works on lstat and O_NOFOLLOW: a link planted by a patch is removed or refused, never
followed.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import zipfile
from collections import OrderedDict
from dataclasses import dataclass

WHEELS_DIR = "wheels"
# Files that decide how the tests run, not what the package does: the trusted (snapshot) version always wins.
PROTECTED_NAMES = ("conftest.py", "sitecustomize.py", "usercustomize.py")
PROTECTED_SUFFIXES = (".pth",)
# pytest's configuration files at the repository root, in pytest's own order of precedence (9.x).
ROOT_CONFIGS = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
# Node: files that decide how modules resolve and how test runners are configured (any depth), and vendored
# packages (node_modules/**): a change planting node_modules/chai or a package.json "imports" map would hand the
# tests a fake library.
NODE_PROTECTED_NAMES = ("package.json", ".npmrc", ".babelrc", ".swcrc")
NODE_PROTECTED_PREFIXES = ("jest.config.", "babel.config.", ".babelrc.", ".mocharc.", "vitest.config.", "jest.setup.")
MAX_PATH = 1024


class BadSnapshot(ValueError):
    """The snapshot bytes are not what the host's normalizer produces (a fault of ours, never the program's)."""


class WorkspaceError(ValueError):
    """The change cannot be applied as asked (a path through a link, a directory in the way): the program's."""


@dataclass(frozen=True)
class Entry:
    kind: str  # "f" regular file, "d" directory, "l" symbolic link
    data: bytes = b""  # file content, or the link's target
    executable: bool = False


class Snapshot:
    """One repository at its starting state, in memory: path -> Entry, plus the unpacked wheels."""

    def __init__(self, entries: dict[str, Entry], site: dict[str, bytes]) -> None:
        self.entries = dict(sorted(entries.items()))
        self.site = site
        self.nbytes = sum(len(e.data) for e in entries.values()) + sum(len(d) for d in site.values())
        self.inodes = len(entries) + len(site) + len({os.path.dirname(p) for p in site})
        # A session's git state at the snapshot, made once per runner (sandboxes/inside/session_git.py): None
        # until made, {} where the image has no git.
        self.session_git: dict[str, Entry] | None = None

    def file(self, rel: str) -> bytes | None:
        entry = self.entries.get(rel)
        return entry.data if entry is not None and entry.kind == "f" else None


def clean_rel(name: str) -> str:
    """A safe relative path ("a/b"), or BadSnapshot. Used on every name that arrives in an archive or a wheel."""
    if not name or "\0" in name or name.startswith("/") or len(name) > MAX_PATH:
        raise BadSnapshot(f"unsafe path {name[:200]!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise BadSnapshot(f"unsafe path {name[:200]!r}")
    return "/".join(parts)


def load(data: bytes) -> Snapshot:
    """Parse the host's normalized tar.gz; refuse anything it would never produce."""
    entries: dict[str, Entry] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                rel = clean_rel(member.name)
                if member.isdir():
                    entries[rel] = Entry("d")
                elif member.isreg():
                    f = tar.extractfile(member)
                    entries[rel] = Entry("f", f.read() if f else b"", bool(member.mode & 0o111))
                elif member.issym():
                    target = os.path.normpath(os.path.join(os.path.dirname(rel), member.linkname))
                    if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
                        raise BadSnapshot(f"link {rel} points outside the repository")
                    entries[rel] = Entry("l", member.linkname.encode("utf-8", "surrogateescape"))
                else:
                    raise BadSnapshot(f"{rel}: not a file, directory or link")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise BadSnapshot(f"unreadable snapshot: {e}") from None
    for rel in list(entries):  # parents implied by their children
        parent = os.path.dirname(rel)
        while parent and parent not in entries:
            entries[parent] = Entry("d")
            parent = os.path.dirname(parent)
    return Snapshot(entries, _unpack_wheels(entries))


def load_dir(root: str) -> Snapshot:
    """A repository already in the image (e.g. /testbed): its files, read by the runner (trusted: the image is the
    user's own and no job has run yet). Version control data (.git) and links that leave it are left out."""
    entries: dict[str, Entry] = {}
    root = os.path.normpath(root)
    if not os.path.isdir(root):
        raise BadSnapshot("no such directory")
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (here == root and d == ".git"))
        for name in [*dirs, *sorted(files)]:
            path = os.path.join(here, name)
            rel = clean_rel(os.path.relpath(path, root))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                link = os.readlink(path)
                target = os.path.normpath(os.path.join(os.path.dirname(rel), link))
                if not (link.startswith("/") or target == ".." or target.startswith("../")):
                    entries[rel] = Entry("l", link.encode("utf-8", "surrogateescape"))
                if name in dirs:
                    dirs.remove(name)
            elif stat.S_ISDIR(st.st_mode):
                entries[rel] = Entry("d")
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    entries[rel] = Entry("f", f.read(), bool(st.st_mode & 0o111))
    return Snapshot(entries, _unpack_wheels(entries))


def _unpack_wheels(entries: dict[str, Entry]) -> dict[str, bytes]:
    """Pure-Python wheels from wheels/*.whl, installed the way pip lays them out (purelib/platlib data folded in,
    scripts and headers skipped)."""
    site: dict[str, bytes] = {}
    for rel, entry in entries.items():
        if entry.kind != "f" or os.path.dirname(rel) != WHEELS_DIR or not rel.endswith(".whl"):
            continue
        try:
            with zipfile.ZipFile(io.BytesIO(entry.data)) as whl:
                for info in whl.infolist():
                    if info.is_dir():
                        continue
                    name = clean_rel(info.filename)
                    head, _, rest = name.partition("/")
                    if head.endswith(".data"):
                        kind, _, inner = rest.partition("/")
                        if kind not in ("purelib", "platlib") or not inner:
                            continue
                        name = inner
                    site[name] = whl.read(info)
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise BadSnapshot(f"{rel}: unreadable wheel: {e}") from None
    return site


class Cache:
    """The runner's snapshots, least recently used first out once their bytes exceed the budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._items: OrderedDict[str, Snapshot] = OrderedDict()

    def get(self, repo_id: str) -> Snapshot | None:
        snap = self._items.get(repo_id)
        if snap is not None:
            self._items.move_to_end(repo_id)
        return snap

    def put(self, repo_id: str, snap: Snapshot) -> Snapshot:
        self._items[repo_id] = snap
        while len(self._items) > 1 and sum(s.nbytes for s in self._items.values()) > self.budget:
            self._items.popitem(last=False)
        return snap


# ------------------------------------------------------------------------------------------ writing workspaces


def materialize(entries: dict[str, Entry], root: str) -> None:
    """Write entries below root (an existing, empty directory owned by the calling uid)."""
    for rel, entry in entries.items():
        path = os.path.join(root, rel)
        if entry.kind == "d":
            os.makedirs(path, exist_ok=True)
        elif entry.kind == "l":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(entry.data.decode("utf-8", "surrogateescape"), path)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write_new(path, entry.data, entry.executable)


def write_over(root: str, rel: str, data: bytes, executable: bool = False) -> None:
    """Make root/rel a regular file holding data, whatever is there now: links and files in the way are removed,
    never followed; a directory in the way is removed with its contents."""
    parts = rel.split("/")
    here = root
    for part in parts[:-1]:
        here = os.path.join(here, part)
        st = _lstat(here)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(here)
            st = None
        if st is None:
            os.mkdir(here)
    remove(root, rel)
    _write_new(os.path.join(root, rel), data, executable)


def write_inside(root: str, rel: str, data: bytes) -> None:
    """Write a file the program asked for (`files` mode): through real directories only."""
    here = root
    for part in rel.split("/")[:-1]:
        here = os.path.join(here, part)
        st = _lstat(here)
        if st is None:
            os.mkdir(here)
        elif not stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"{rel}: {os.path.relpath(here, root)} is not a directory")
    path = os.path.join(root, rel)
    st = _lstat(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(f"{rel}: a directory or link is in the way")
    if st is not None:
        os.unlink(path)
    _write_new(path, data, bool(st and st.st_mode & 0o111))


def remove(root: str, rel: str) -> None:
    path = os.path.join(root, rel)
    st = _lstat(path)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # fd-based, never follows links inside
    else:
        os.unlink(path)


def _write_new(path: str, data: bytes, executable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755 if executable else 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


# ------------------------------------------------------------------------------------------ reading workspaces


def scan(root: str, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """Every path below root and its kind ("f", "d", "l", or "other"), without following links; the paths in
    skip (relative, e.g. ".git") are left out with everything below them."""
    found: dict[str, str] = {}
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
            for entry in it:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if rel in skip:
                    continue
                if entry.is_symlink():
                    found[rel] = "l"
                elif entry.is_dir(follow_symlinks=False):
                    found[rel] = "d"
                    pending.append(rel)
                elif entry.is_file(follow_symlinks=False):
                    found[rel] = "f"
                else:
                    found[rel] = "other"
    return found


def make_readable(root: str, tree: dict[str, str]) -> None:
    """Directories 0755, files 0644 (0755 if executable by the owner): what the patch tool created under the job
    umask (077) must be readable by the test process, and nothing writable but by the owner."""
    for rel, kind in tree.items():
        if kind not in ("d", "f"):
            continue
        path = os.path.join(root, rel)
        mode = os.lstat(path).st_mode
        want = 0o755 if kind == "d" or mode & 0o100 else 0o644
        if mode & 0o7777 != want:
            os.chmod(path, want)


def read_file(root: str, rel: str, cap: int) -> bytes | None:
    """The bytes of a regular file (never through a link), at most cap of them; None when it is not one."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], cap
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def is_protected(rel: str) -> bool:
    """conftest.py, sitecustomize.py, usercustomize.py and .pth files anywhere; pytest's config files at the root;
    Node's package.json/.npmrc/test-runner and transpiler configs anywhere and everything under node_modules."""
    name = rel.rsplit("/", 1)[-1]
    return (name in PROTECTED_NAMES or name.endswith(PROTECTED_SUFFIXES) or rel in ROOT_CONFIGS
            or name in NODE_PROTECTED_NAMES or name.startswith(NODE_PROTECTED_PREFIXES)
            or "node_modules" in rel.split("/"))
