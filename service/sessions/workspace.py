"""An agent session's workspace as plain data: a snapshot plus the session's delta, never files on the host.

The host keeps no session file on disk, so no request can make it follow a link an agent planted: reading a path
looks it up in a dict, and a path through a link (or through a file) is refused by walking the overlay. The
delta has the wire form of sandboxes/inside/session_exec.py: path -> {"k": "f", "b64", "x"} for a file,
{"k": "l", "b64"} for a link (its target), {"k": "d"} for a directory, {"k": "-"} for a path removed.

Example:
    ws = Workspace.of(snapshot_entries)
    ws.write("pkg/new.py", b"x = 1\\n")
    ws.diff()  # "diff --git a/pkg/new.py b/pkg/new.py\\nnew file mode 100644\\n..."
"""

from __future__ import annotations

import base64
import importlib.util
import io
import tarfile
from dataclasses import dataclass, field

from sandboxes.backends.base import RUNNER_DIR
from service.repos.models import safe_path

# The in-sandbox diff maker, so that a session's diff is built exactly as the benchmark's gold patches are.
_spec = importlib.util.spec_from_file_location("rewardbox_repo_diff", RUNNER_DIR / "repo_diff.py")
assert _spec is not None and _spec.loader is not None  # a path ending in .py always has a source loader
repo_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(repo_diff)
NotText = repo_diff.NotText


@dataclass(frozen=True)
class Node:
    kind: str  # "f" file, "l" link, "d" directory
    data: bytes = b""
    executable: bool = False


class PathError(ValueError):
    """A path the workspace cannot serve as asked: outside it, through a link, a directory, or missing."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def load_snapshot(normalized: bytes) -> dict[str, Node]:
    """The entries of a normalized snapshot (service/repos/archive.py's tar.gz)."""
    out: dict[str, Node] = {}
    with tarfile.open(fileobj=io.BytesIO(normalized), mode="r:gz") as tar:
        for m in tar:
            if m.isdir():
                out[m.name] = Node("d")
            elif m.issym():
                out[m.name] = Node("l", m.linkname.encode("utf-8", "surrogateescape"))
            elif m.isreg():
                f = tar.extractfile(m)
                out[m.name] = Node("f", f.read() if f else b"", bool(m.mode & 0o100))
    return out


GIT_DIR = ".git"  # the session's repository (sandboxes/inside/session_git.py): its state, never its content


def in_git(rel: str) -> bool:
    return rel == GIT_DIR or rel.startswith(GIT_DIR + "/")


@dataclass
class Workspace:
    snapshot: dict[str, Node]
    delta: dict[str, dict] = field(default_factory=dict)
    # The session's other state, opaque here and never part of its diff: {"git": the .git changes, "site": its
    # pip installs} in the delta's wire form (sandboxes/inside/session_exec.py).
    state: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: dict[str, Node]) -> Workspace:
        # A .git the snapshot carries is not the session's: its own repository takes its place.
        return cls({rel: n for rel, n in snapshot.items() if not in_git(rel)})

    def fork(self) -> Workspace:
        # delta values are never mutated, only replaced
        return Workspace(self.snapshot, dict(self.delta), {k: dict(v) for k, v in self.state.items()})

    def node(self, rel: str) -> Node | None:
        change = self.delta.get(rel)
        if change is None:
            found = self.snapshot.get(rel)
            if found is None and self._has_children(rel):
                return Node("d")  # archives need not list directories
            return found
        kind = change["k"]
        if kind == "-":
            return None
        if kind == "d":
            return Node("d")
        return Node(kind, base64.b64decode(change.get("b64") or ""), bool(change.get("x")))

    def _has_children(self, rel: str) -> bool:
        prefix = rel + "/"
        return any(p.startswith(prefix) and self.node(p) is not None for p in (*self.snapshot, *self.delta))

    def _check_parents(self, rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            here = "/".join(parts[:i])
            node = self.node(here)
            if node is None:
                continue  # created on the way when written
            if node.kind == "l":
                raise PathError(f"path: {here} is a link; the service never follows links in a workspace")
            if node.kind != "d":
                raise PathError(f"path: {here} is a file, not a directory")

    def read(self, rel: str) -> Node:
        rel = _clean(rel)
        _not_git(rel)
        self._check_parents(rel)
        node = self.node(rel)
        if node is None:
            raise PathError(f"path: {rel} does not exist in the workspace", 404)
        if node.kind == "l":
            raise PathError(f"path: {rel} is a link; the service never follows links in a workspace")
        if node.kind == "d":
            raise PathError(f"path: {rel} is a directory")
        return node

    def write(self, rel: str, data: bytes) -> None:
        rel = _clean(rel)
        _not_git(rel)
        self._check_parents(rel)
        old = self.node(rel)
        if old is not None and old.kind != "f":
            raise PathError(f"path: {rel} is a {'link' if old.kind == 'l' else 'directory'}; only files are written")
        executable = bool(old and old.executable)
        snap = self.snapshot.get(rel)
        if snap is not None and snap.kind == "f" and snap.data == data and snap.executable == executable:
            self.delta.pop(rel, None)
        else:
            self.delta[rel] = {"k": "f", "b64": base64.b64encode(data).decode(), "x": executable}

    def files(self) -> dict[str, bytes]:
        """Every regular file's bytes, now."""
        paths = {p for p, n in self.snapshot.items() if n.kind == "f"} | set(self.delta)
        out = {}
        for rel in paths:
            node = self.node(rel)
            if node is not None and node.kind == "f":
                out[rel] = node.data
        return out

    def diff(self) -> tuple[str, list[str]]:
        """The unified diff against the snapshot, and the changed paths no diff can carry (binary files, links),
        which are listed rather than dropped silently."""
        old: dict[str, bytes | None] = {}
        new: dict[str, bytes | None] = {}
        skipped: list[str] = []
        for rel in sorted(self.delta):
            if in_git(rel):  # never there (the sandbox leaves .git out); never graded if it were
                continue
            before, after = self.snapshot.get(rel), self.node(rel)
            b = before.data if before is not None and before.kind == "f" else None
            a = after.data if after is not None and after.kind == "f" else None
            if (before is not None and before.kind == "l") or (after is not None and after.kind == "l"):
                skipped.append(rel)
                continue
            if b == a:
                continue
            try:
                repo_diff.unified_diff({rel: b}, {rel: a})
            except NotText:
                skipped.append(rel)
                continue
            old[rel], new[rel] = b, a
        return repo_diff.unified_diff(old, new), skipped

    def size(self) -> int:
        """Bytes the delta and the other state hold (what a session adds to the host's memory)."""
        return sum(len(c.get("b64") or "") * 3 // 4 + len(p)
                   for d in (self.delta, *self.state.values()) for p, c in d.items())


def _not_git(rel: str) -> None:
    if in_git(rel):
        raise PathError(f"path: {rel} is the session's git repository, not part of its workspace (use git in a "
                        "command)")


def _clean(rel: str) -> str:
    try:
        return safe_path(rel)
    except ValueError as e:
        raise PathError(f"path: {e}") from None
