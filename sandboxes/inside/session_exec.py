"""Session job (op "session"): one command of an agent session, in a workspace built afresh (stdlib only; runs
in the runner, trusted).

An agent session's state lives on the host, never in a sandbox: the snapshot's id plus a delta (the paths the
session changed, with their new content, or deleted). Each command is one ordinary job in a pool sandbox, so the
runner's usual clean-up after every job (every process of the job uid killed, every file it owns wiped) is what
keeps one session's command from seeing another's, forks included: no sandbox holds anything of a session
between two of its commands.

job = {"repo": {"id", "archive_b64"?}, "delta": {path: {"k": "f" | "l" | "d" | "-", "b64"?, "x"?}},
       "git": {".git/...": change}, "site": {path: change}, "wheels": the environment's wheel folder or None,
       "no_git"?: true (REWARDBOX_SESSION_GIT=0), "command": shell line, "stdin": text,
       "max_bytes": workspace cap, "max_inodes": inode cap, "limits": the command's limits}

The session's other state, kept apart from the workspace's delta so that no diff or reward ever sees it: its git
repository (`.git` in the workspace: the snapshot's commit, session_git.py, plus the "git" changes) and the site
folder its `pip install`s went to (SITE, outside the workspace, plus the "site" changes), both in the same wire form.

Steps, each in its own process, never two alive at once:
1. workspace (candidate uid): the snapshot from this runner's memory (repo_judge.CACHE, sent once per sandbox;
   `repo_missing` asks the host for the bytes) is written to WORKSPACE; then its .git (made there by
   session_git.make on the first command of a snapshot in this sandbox, written from memory afterwards), the
   delta, the git changes and the site folder over it. No step but session_git.make ever runs git, and that one
   only on the snapshot alone, before any of the session's changes is written.
2. command (candidate uid, the usual job lock-down): `/bin/sh -c command` in WORKSPACE. At its end every process
   of the uid is killed: nothing outlives its command.
3. delta (candidate uid): the workspace scanned without following links and compared with the snapshot (.git
   left out), .git with its commit and the site folder with nothing; what differs goes back as the new delta and
   git and site changes, with the workspace's bytes and inodes (.git's counted only where changed). Over a cap,
   the command's changes are refused (`workspace_limit`) and the session keeps its previous state.
Result: the command's own accounting plus one {"event": "session", ...}.
"""

from __future__ import annotations

import base64
import os
import stat
import time

import repo_judge
import repo_workspace as ws
import session_git

WORKSPACE = "/scratch/c/ws"
# The agent's tools, on the command's PATH after the environment's own bin and before the system's: rebuilt for
# every command (wiped with the uid's files after it) and outside the workspace, so never part of its delta.
TOOLS = "/scratch/c/.rewardbox-bin"
# `python` is whichever `python3` comes first on PATH (the environment's, else the image's): agents call both.
PYTHON_WRAPPER = b'#!/bin/sh\nexec python3 "$@"\n'
# `pip` and `pip3`: that interpreter's pip (or the first `python`'s, where an environment has no python3, like a
# conda env), offline and into SITE (command_env's PIP_* settings).
PIP_WRAPPER = b'#!/bin/sh\ncommand -v python3 >/dev/null && exec python3 -m pip "$@"\nexec python -m pip "$@"\n'
WRAPPERS = {"python": PYTHON_WRAPPER, "pip": PIP_WRAPPER, "pip3": PIP_WRAPPER}
# Where a session's `pip install`s go: outside the workspace (never in its diff or reward), first on PYTHONPATH,
# kept with the session's state (and its forks) like .git.
SITE = "/scratch/c/.rewardbox-site"
# `git config --global` (agents set user.name this way) writes here: git state, kept with .git, rather than a
# ~/.gitconfig in HOME, the workspace, which would land in the session's diff.
GIT_GLOBAL = f"{WORKSPACE}/{session_git.GIT_DIR}/{session_git.GLOBAL}"
# The default image's wheel folder (sandboxes/image/build.sh); an environment's comes with the job.
IMAGE_WHEELS = "/usr/local/share/rewardbox/wheels"
READ_CAP = 64 << 20
# Changed bytes one command may leave (they travel back base64-encoded in one frame, and the host's frame cap is
# 64 MiB: more would break the channel, a fault of ours caused by the program).
DELTA_CAP = 40 << 20


def session_job(runner, job: dict, limits: dict) -> dict:
    repo = job.get("repo") or {}
    snap = repo_judge.CACHE.get(str(repo.get("id")))
    if snap is None:
        if not repo.get("archive_b64"):
            return {"status": "ok", "events": [{"event": "repo_missing", "id": repo.get("id")}]}
        try:
            snap = repo_judge.CACHE.put(str(repo["id"]), ws.load(base64.b64decode(repo["archive_b64"])))
        except (ws.BadSnapshot, ValueError) as e:
            return {"status": "sandbox_error", "error": f"snapshot: {e}"}
    started = time.monotonic()
    delta = job.get("delta") or {}
    rt = repo_judge._rt(runner)
    runner.used_uids.add(runner.cand_uid)  # the cleaner wipes the workspace after the job
    git, site = job.get("git") or {}, job.get("site") or {}
    with_git = not job.get("no_git")  # REWARDBOX_SESSION_GIT=0: no repository in the workspace
    built = _as_candidate(runner, lambda: _build(snap, delta, git, site, with_git))
    if "ok" not in built:
        return {"status": "sandbox_error", "error": f"session workspace: {built.get('error') or built['crash']}"}
    if "git_base" in built:  # made by this job's helper: kept for the next commands on this snapshot
        snap.session_git = session_git.entries(built["git_base"])
    build_ms = (time.monotonic() - started) * 1000
    proc = rt.Proc(runner, runner.zygote, runner.cand_uid, WORKSPACE, limits)
    wheels = [w for w in (job.get("wheels"), IMAGE_WHEELS) if w and os.path.isdir(w)]
    env = command_env(job.get("path_first"), wheels)
    proc.start({"argv": ["/bin/sh", "-c", str(job.get("command") or "")]}, job.get("stdin") or "", None, env)
    proc.wait_until(time.monotonic() + float(limits["wall_s"]))
    result = proc.result()
    repo_judge._kill_uid(runner, runner.cand_uid)  # daemons and background jobs end with the command
    t = time.monotonic()
    after = _as_candidate(runner, lambda: _delta(snap, int(job.get("max_bytes") or 1 << 62),
                                                 int(job.get("max_inodes") or 1 << 62)))
    if "crash" in after or "error" in after:
        return {"status": "sandbox_error", "error": f"session workspace: {after.get('crash') or after['error']}"}
    event = {"event": "session", **after, "timings": {"build_ms": round(build_ms, 3),
                                                       "scan_ms": round((time.monotonic() - t) * 1000, 3)}}
    result["events"] = [event]
    return result


def command_path(path_first) -> str:
    """The command's PATH: the environment's interpreter (e.g. a conda env's bin) first, then the tools, then the
    system's."""
    head = f"{path_first}:" if path_first else ""
    return f"{head}{TOOLS}:/usr/local/bin:/usr/bin:/bin"


def command_env(path_first, wheels: list[str]) -> dict[str, str]:
    """The command's environment: PATH as above; git's global config in .git; the session's site folder first
    on PYTHONPATH; pip offline (--no-index, the wheel folders as --find-links), installing into the site folder
    (--target), with no cache (it would land in HOME, the workspace) and no bytecode (it would only grow the
    session's state)."""
    return {"HOME": WORKSPACE, "TMPDIR": "/tmp", "TERM": "dumb", "PATH": command_path(path_first),
            "GIT_CONFIG_GLOBAL": GIT_GLOBAL, "PYTHONPATH": SITE, "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": " ".join(wheels), "PIP_TARGET": SITE, "PIP_NO_CACHE_DIR": "1", "PIP_NO_COMPILE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _as_candidate(runner, step) -> dict:
    """Run step() in a fresh process as the candidate uid (cwd: the candidate's home). A crash is a fault of ours
    ({"crash": ...}); a WorkspaceError is the session's ({"error": ...})."""
    return repo_judge.run_helper(runner, runner.cand_uid, os.path.dirname(WORKSPACE), step)


def _build(snap: ws.Snapshot, delta: dict, git: dict, site: dict, with_git: bool = True) -> dict:
    os.umask(0o022)
    os.mkdir(WORKSPACE, 0o755)
    os.makedirs(TOOLS, 0o755, exist_ok=True)
    for name, body in WRAPPERS.items():
        with open(os.path.join(TOOLS, name), "wb") as f:
            f.write(body)
        os.chmod(os.path.join(TOOLS, name), 0o755)
    ws.materialize(workspace_entries(snap), WORKSPACE)
    out: dict = {"ok": True}
    if with_git and snap.session_git is None:  # first command on this snapshot here: the snapshot alone is there
        out["git_base"], why = session_git.make(WORKSPACE)
        if why:
            out["git_missing"] = why
    elif with_git:
        ws.materialize(snap.session_git or {}, WORKSPACE)
    _apply(WORKSPACE, {rel: c for rel, c in delta.items() if not session_git.in_git(ws.clean_rel(rel))})
    if with_git:
        _apply(WORKSPACE, {rel: c for rel, c in git.items() if session_git.in_git(ws.clean_rel(rel))})
    os.makedirs(SITE, 0o755, exist_ok=True)
    _apply(SITE, site)
    return out


def workspace_entries(snap: ws.Snapshot) -> dict[str, ws.Entry]:
    """The snapshot's entries a session's workspace holds: a .git the snapshot carries is not among them (the
    session's own repository takes its place)."""
    if not any(session_git.in_git(rel) for rel in snap.entries):
        return snap.entries
    return {rel: e for rel, e in snap.entries.items() if not session_git.in_git(rel)}


def _apply(root: str, delta: dict) -> None:
    for rel in sorted(delta):
        change = delta[rel]
        rel = ws.clean_rel(rel)
        kind = change.get("k")
        if kind == "-":
            if _real_parents(root, rel):  # else it went with its parent (a link or file now): never followed
                ws.remove(root, rel)
        elif kind == "d":
            ws.remove(root, rel)
            os.makedirs(os.path.join(root, rel), exist_ok=True)
        elif kind == "l":
            ws.write_over(root, rel, b"")  # real directories on the way, nothing in the place
            ws.remove(root, rel)
            target = base64.b64decode(change.get("b64") or "").decode("utf-8", "surrogateescape")  # bytes, like a name
            os.symlink(target, os.path.join(root, rel))
        else:
            ws.write_over(root, rel, base64.b64decode(change.get("b64") or ""), bool(change.get("x")))


def _real_parents(root: str, rel: str) -> bool:
    """Whether every folder on the way to rel is a real directory (no link, no file in the way)."""
    here = root
    for part in rel.split("/")[:-1]:
        here = os.path.join(here, part)
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return False
        except FileNotFoundError:
            return False
    return True


class _OverCap(Exception):
    pass


class _Budget:
    """The workspace's caps, over the workspace and the session's other state together."""

    def __init__(self, max_bytes: int, max_inodes: int) -> None:
        self.max_bytes, self.max_inodes = max_bytes, max_inodes
        self.nbytes = self.changed = self.inodes = 0

    def check(self) -> None:
        if self.changed > DELTA_CAP:
            raise _OverCap(f"the command left more than {DELTA_CAP >> 20} MiB of changed files: its changes are "
                           "dropped")
        if self.nbytes > self.max_bytes or self.inodes > self.max_inodes:
            raise _OverCap(f"the workspace holds more than {self.max_bytes} bytes or {self.max_inodes} entries: "
                           "the command's changes are dropped")


def _delta(snap: ws.Snapshot, max_bytes: int, max_inodes: int) -> dict:
    """What differs from the snapshot, read without following any link; FIFOs, sockets and devices are left out
    (a diff cannot carry them, and they hold no content). .git and the site folder are compared apart, with their
    own bases, and never enter the workspace's delta."""
    _own_everything(WORKSPACE)
    budget = _Budget(max_bytes, max_inodes)
    try:
        delta = _compare(WORKSPACE, ws.scan(WORKSPACE, frozenset({session_git.GIT_DIR})), workspace_entries(snap),
                         budget)
        git = _compare(WORKSPACE, session_git.scan(WORKSPACE), snap.session_git or {}, budget, False)
        site_tree: dict[str, str] = {}
        if os.path.isdir(SITE) and not os.path.islink(SITE):
            _own_everything(SITE)
            site_tree = ws.scan(SITE)
        site = _compare(SITE, site_tree, {}, budget)
    except _OverCap as e:
        return {"workspace_limit": str(e), "bytes": budget.nbytes, "inodes": budget.inodes}
    return {"delta": delta, "git": git, "site": site, "bytes": budget.nbytes, "inodes": budget.inodes}


def _compare(root: str, tree: dict[str, str], base: dict[str, ws.Entry], budget: _Budget,
             charge_base: bool = True) -> dict:
    """The delta of tree against base. Every entry counts against the caps, or (charge_base False: .git, whose
    snapshot commit must not push a workspace near its cap over it) only what differs from the base."""
    delta: dict[str, dict] = {}
    for rel, kind in tree.items():
        old = base.get(rel)
        size = 0
        if kind == "d":
            if old is None or old.kind != "d":
                delta[rel] = {"k": "d"}
        elif kind == "l":
            target = os.readlink(os.path.join(root, rel)).encode()
            size = len(target)
            if old is None or old.kind != "l" or old.data != target:
                delta[rel] = {"k": "l", "b64": base64.b64encode(target).decode()}
        elif kind == "f":
            data = ws.read_file(root, rel, READ_CAP)
            if data is None:
                continue
            size = len(data)
            executable = bool(os.lstat(os.path.join(root, rel)).st_mode & 0o100)
            if old is None or old.kind != "f" or old.data != data or old.executable != executable:
                delta[rel] = {"k": "f", "b64": base64.b64encode(data).decode(), "x": executable}
                budget.changed += len(data)
        if charge_base or rel in delta:
            budget.nbytes += size
            budget.inodes += 1
        budget.check()
    for rel in base:
        if rel not in tree:
            delta[rel] = {"k": "-"}
    return delta


def _own_everything(root: str) -> None:
    """Directories searchable and files readable by their owner (this uid): a command may have chmod-ed them
    away, which must not turn into a fault of ours when the workspace is read back."""
    pending = [root]
    while pending:
        here = pending.pop()
        st = os.lstat(here)
        if st.st_mode & 0o700 != 0o700:
            os.chmod(here, st.st_mode | 0o700)
        with os.scandir(here) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if not mode & 0o400:
                        os.chmod(entry.path, mode | 0o400)
