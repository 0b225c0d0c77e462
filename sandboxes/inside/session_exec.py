"""Session job (op "session"): one command of an agent session, in a workspace built afresh (stdlib only; runs
in the runner, trusted).

An agent session's state lives on the host, never in a sandbox: the snapshot's id plus a delta (the paths the
session changed, with their new content, or deleted). Each command is one ordinary job in a pool sandbox, so the
runner's usual clean-up after every job (every process of the job uid killed, every file it owns wiped) is what
keeps one session's command from seeing another's, forks included: no sandbox holds anything of a session
between two of its commands.

job = {"repo": {"id", "archive_b64"?}, "delta": {path: {"k": "f" | "l" | "d" | "-", "b64"?, "x"?}},
       "command": shell line, "stdin": text, "max_bytes": workspace cap, "max_inodes": inode cap,
       "limits": the command's limits}

Steps, each in its own process, never two alive at once:
1. workspace (candidate uid): the snapshot from this runner's memory (repo_judge.CACHE, sent once per sandbox;
   `repo_missing` asks the host for the bytes) is written to WORKSPACE, then the delta over it.
2. command (candidate uid, the usual job lock-down): `/bin/sh -c command` in WORKSPACE. At its end every process
   of the uid is killed: nothing outlives its command.
3. delta (candidate uid): the workspace scanned without following links and compared with the snapshot; what
   differs goes back as the new delta, with the workspace's bytes and inodes. Over a cap, the command's changes
   are refused (`workspace_limit`) and the session keeps its previous state.
Result: the command's own accounting plus one {"event": "session", ...}.
"""

from __future__ import annotations

import base64
import os
import time

import repo_judge
import repo_workspace as ws

WORKSPACE = "/scratch/c/ws"
# The agent's tools, on the command's PATH after the environment's own bin and before the system's: rebuilt for
# every command (wiped with the uid's files after it) and outside the workspace, so never part of its delta.
TOOLS = "/scratch/c/.rewardbox-bin"
# `python` is whichever `python3` comes first on PATH (the environment's, else the image's): agents call both.
PYTHON_WRAPPER = b'#!/bin/sh\nexec python3 "$@"\n'
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
    built = _as_candidate(runner, lambda: _build(snap, delta))
    if "ok" not in built:
        return {"status": "sandbox_error", "error": f"session workspace: {built.get('error') or built['crash']}"}
    build_ms = (time.monotonic() - started) * 1000
    proc = rt.Proc(runner, runner.zygote, runner.cand_uid, WORKSPACE, limits)
    env = {"HOME": WORKSPACE, "TMPDIR": "/tmp", "TERM": "dumb", "PATH": command_path(job.get("path_first"))}
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


def _as_candidate(runner, step) -> dict:
    """Run step() in a fresh process as the candidate uid (cwd: the candidate's home). A crash is a fault of ours
    ({"crash": ...}); a WorkspaceError is the session's ({"error": ...})."""
    return repo_judge.run_helper(runner, runner.cand_uid, os.path.dirname(WORKSPACE), step)


def _build(snap: ws.Snapshot, delta: dict) -> dict:
    os.umask(0o022)
    os.mkdir(WORKSPACE, 0o755)
    os.makedirs(TOOLS, 0o755, exist_ok=True)
    with open(os.path.join(TOOLS, "python"), "wb") as f:
        f.write(PYTHON_WRAPPER)
    os.chmod(os.path.join(TOOLS, "python"), 0o755)
    ws.materialize(snap.entries, WORKSPACE)
    for rel in sorted(delta):
        change = delta[rel]
        rel = ws.clean_rel(rel)
        kind = change.get("k")
        if kind == "-":
            ws.remove(WORKSPACE, rel)
        elif kind == "d":
            ws.remove(WORKSPACE, rel)
            os.makedirs(os.path.join(WORKSPACE, rel), exist_ok=True)
        elif kind == "l":
            ws.write_over(WORKSPACE, rel, b"")  # real directories on the way, nothing in the place
            ws.remove(WORKSPACE, rel)
            target = base64.b64decode(change.get("b64") or "").decode("utf-8", "surrogateescape")  # bytes, like a name
            os.symlink(target, os.path.join(WORKSPACE, rel))
        else:
            ws.write_over(WORKSPACE, rel, base64.b64decode(change.get("b64") or ""), bool(change.get("x")))
    return {"ok": True}


def _delta(snap: ws.Snapshot, max_bytes: int, max_inodes: int) -> dict:
    """What differs from the snapshot, read without following any link; FIFOs, sockets and devices are left out
    (a diff cannot carry them, and they hold no content)."""
    _own_everything(WORKSPACE)
    tree = ws.scan(WORKSPACE)
    delta: dict[str, dict] = {}
    nbytes = changed = 0
    for rel, kind in tree.items():
        old = snap.entries.get(rel)
        if kind == "d":
            if old is None or old.kind != "d":
                delta[rel] = {"k": "d"}
        elif kind == "l":
            target = os.readlink(os.path.join(WORKSPACE, rel)).encode()
            nbytes += len(target)
            if old is None or old.kind != "l" or old.data != target:
                delta[rel] = {"k": "l", "b64": base64.b64encode(target).decode()}
        elif kind == "f":
            data = ws.read_file(WORKSPACE, rel, READ_CAP)
            if data is None:
                continue
            nbytes += len(data)
            executable = bool(os.lstat(os.path.join(WORKSPACE, rel)).st_mode & 0o100)
            if old is None or old.kind != "f" or old.data != data or old.executable != executable:
                delta[rel] = {"k": "f", "b64": base64.b64encode(data).decode(), "x": executable}
                changed += len(data)
        if changed > DELTA_CAP:
            return {"workspace_limit": f"the command left more than {DELTA_CAP >> 20} MiB of changed files: its "
                                       "changes are dropped", "bytes": nbytes, "inodes": len(tree)}
        if nbytes > max_bytes or len(tree) > max_inodes:
            return {"workspace_limit": f"the workspace holds more than {max_bytes} bytes or {max_inodes} entries: "
                                       "the command's changes are dropped", "bytes": nbytes, "inodes": len(tree)}
    for rel in snap.entries:
        if rel not in tree:
            delta[rel] = {"k": "-"}
    return {"delta": delta, "bytes": nbytes, "inodes": len(tree)}


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
