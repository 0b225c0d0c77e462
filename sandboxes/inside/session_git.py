"""A session's git repository at its snapshot (stdlib only; runs in a workspace helper as the candidate uid, before
any command of the job, trusted).

`git init` and one commit of the snapshot, with a fixed author, date and message, so that the commit is the same in
every sandbox and `git diff`, `git status`, `git stash`, `git checkout -- file` and `git log` work in a session as
an agent expects. Made once per runner and snapshot, in the freshly written workspace (the snapshot alone, before
any session's change), and kept in the runner's memory (Snapshot.session_git): later commands only write it out.

The git run here reads no configuration but the repository's own, which it has just written: no system or global
file, no template (so no hooks), nothing of the snapshot's but its files. Nothing trusted ever runs git on a
session's repository after this: the session's `.git` is state its commands change, carried from one command to the
next (and into forks) apart from the workspace's delta, and the reward and the service's diff never read it.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import subprocess

import repo_workspace as ws

GIT_DIR = ".git"
# A repository larger than this is not made: it travels back to the runner in one frame (base64, under the wire's
# 64 MiB) and is written before every command. Snapshots are far smaller by default (REWARDBOX_REPO_MAX_UNPACKED_MB).
MAX_BYTES = 24 << 20
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
STAMP = "946684800 +0000"  # 2000-01-01: the snapshot commit's date, so its hash depends on the files alone
ENV = {"PATH": SEARCH_PATH, "HOME": "/nonexistent", "LANG": "C", "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "rewardbox", "GIT_AUTHOR_EMAIL": "snapshot@rewardbox",
       "GIT_COMMITTER_NAME": "rewardbox", "GIT_COMMITTER_EMAIL": "snapshot@rewardbox", "GIT_AUTHOR_DATE": STAMP,
       "GIT_COMMITTER_DATE": STAMP}
# The repository's own settings, added to what `git init` wrote: no automatic gc (a command's time is the agent's).
CONFIG = b"[gc]\n\tauto = 0\n"
# The session's global config (GIT_CONFIG_GLOBAL of its commands, session_exec.GIT_GLOBAL): who the agent's commits
# are by, until it says otherwise with `git config --global`.
GLOBAL = "global-config"
GLOBAL_CONFIG = b"[user]\n\tname = agent\n\temail = agent@rewardbox\n"
STEPS = (("init", "-q", "-b", "main", "--template="),
         ("add", "-A", "-f"),  # -f: ignored files too, so the commit is the whole snapshot
         ("commit", "-q", "--no-verify", "--allow-empty", "-m", "snapshot"),
         # One pack rather than a loose object per file: far fewer files to write before every command. No delta
         # search (--window=0: it was most of the time taken here) and one thread, so the pack is the same anywhere.
         ("-c", "pack.threads=1", "-c", "core.fsync=none", "repack", "-a", "-d", "-q", "--window=0"))


def in_git(rel: str) -> bool:
    """Whether a workspace path is the repository's own data (.git or below it)."""
    return rel == GIT_DIR or rel.startswith(GIT_DIR + "/")


def make(workspace: str) -> tuple[dict[str, dict], str | None]:
    """Make the repository in workspace (holding the snapshot alone) and read it back in the delta's wire form
    ({".git/HEAD": {"k": "f", "b64", "x"}, ...}); ({}, why) where the image has no git or git failed."""
    git = shutil.which("git", path=SEARCH_PATH)
    if git is None:
        return {}, "no git in the image"
    for step in STEPS:
        done = subprocess.run([git, *step], cwd=workspace, env=ENV, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=50, check=False)
        if done.returncode != 0:
            shutil.rmtree(os.path.join(workspace, GIT_DIR), ignore_errors=True)
            return {}, f"git {step[0]}: {done.stderr.decode(errors='replace')[-500:]}"
        if step[0] == "init":
            with open(os.path.join(workspace, GIT_DIR, "config"), "ab") as f:
                f.write(CONFIG)
            with open(os.path.join(workspace, GIT_DIR, GLOBAL), "wb") as f:
                f.write(GLOBAL_CONFIG)
    made = read(workspace)
    size = sum(len(c.get("b64") or "") * 3 // 4 for c in made.values())
    if size > MAX_BYTES:
        shutil.rmtree(os.path.join(workspace, GIT_DIR), ignore_errors=True)
        return {}, f"the snapshot's repository would hold {size} bytes, over {MAX_BYTES}"
    return made, None


def read(workspace: str) -> dict[str, dict]:
    """The workspace's .git in wire form, read without following any link (kind "l": the link itself)."""
    found = scan(workspace)
    out: dict[str, dict] = {}
    for rel, kind in found.items():
        path = os.path.join(workspace, rel)
        if kind == "d":
            out[rel] = {"k": "d"}
        elif kind == "l":
            out[rel] = {"k": "l", "b64": base64.b64encode(os.readlink(path).encode()).decode()}
        elif kind == "f":
            data = ws.read_file(workspace, rel, 1 << 30) or b""
            out[rel] = {"k": "f", "b64": base64.b64encode(data).decode(),
                        "x": bool(os.lstat(path).st_mode & 0o100)}
    return out


def scan(workspace: str) -> dict[str, str]:
    """.git and what is below it, with kinds as repo_workspace.scan gives them; {} when there is none."""
    path = os.path.join(workspace, GIT_DIR)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {}
    if stat.S_ISLNK(st.st_mode):
        return {GIT_DIR: "l"}
    if stat.S_ISDIR(st.st_mode):
        return {GIT_DIR: "d", **{f"{GIT_DIR}/{rel}": kind for rel, kind in ws.scan(path).items()}}
    return {GIT_DIR: "f" if stat.S_ISREG(st.st_mode) else "other"}


def entries(wire: dict[str, dict]) -> dict[str, ws.Entry]:
    """Wire form to the snapshot's Entry form (what materialize writes)."""
    out = {}
    for rel, change in sorted(wire.items()):
        data = base64.b64decode(change.get("b64") or "")
        out[ws.clean_rel(rel)] = ws.Entry(change["k"], data, bool(change.get("x")))
    return out
