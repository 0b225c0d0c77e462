"""Repo job (op "repo"): grade a change to a repository by the repository's own tests. Runs in the runner (trusted).

job = {"repo": {"id", "archive_b64"?}, "patch"?: unified diff, "strip": 0 | 1, "files"?: {path: text},
       "test_files": {path: text}, "tests": [node ids], "args": [trusted extra pytest arguments],
       "limits": {"wall_s": per-test limit, "total_s": the whole job, "memory_mb", ...}}

Steps, each in its own process, never two of them alive at once:
1. workspace (judge uid): the snapshot, from this runner's memory (sent once per sandbox: a job without its bytes
   answers `repo_missing` and the host sends it again with them), written to WORKSPACE; `files` written into it.
2. patch (judge uid, the usual job lock-down): GNU patch reads the diff on stdin; any failure is the program's
   (`patch_error`). Every judge-uid process is killed before the next step.
3. fix-up (judge uid): links the patch created are refused; the trusted test files are written over whatever
   the patch did, the listed tests' own files and every conftest.py, sitecustomize.py, usercustomize.py, .pth
   and root pytest configuration file go back to the snapshot's version (or away); the wheels are unpacked
   outside the workspace; static flags are computed for the Python files the patch changed.
4. tests (candidate uid, forked from a zygote with pytest imported): repo_reporter.py runs the listed tests with
   rewardbox's reporter. The workspace belongs to the judge uid, so the test process can change none of it.
   Its frames arrive here on a pipe and are checked: the job's token, consecutive numbers, cases only for
   collected tests, a final count that matches. Per-test time limits are enforced from here: no verdict for
   longer than the limit kills the process; the test then running (the first collected one without a verdict)
   is the timeout, the tests after it count as not run.
Result: the process's accounting plus one {"event": "repo", ...} with a verdict for every listed node id.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import select
import sys
import time
import traceback

import repo_node
import repo_workspace as ws
import wire

# In the candidate's home (root-owned, sticky): the test process can neither write nor rename what the judge uid
# owns there, and the judge uid's cleaner can remove it after the job (it cannot write /scratch itself).
WORKSPACE = "/scratch/c/repo"
SITE = "/scratch/c/repo-site"
CACHE = ws.Cache(96 << 20)  # snapshots in this runner's memory (uncompressed bytes)
HELPER_LIMITS = {"wall_s": 60.0, "total_s": 60.0, "cpu_s": 60.0, "memory_mb": 2048, "output_bytes": 1 << 16,
                 "file_size_mb": 512, "nofile": 64, "nproc": 16}
PATCH_LIMITS = {**HELPER_LIMITS, "wall_s": 20.0, "cpu_s": 20.0, "memory_mb": 512, "file_size_mb": 64}
READ_CAP = 64 << 20
MESSAGE_CAP = 2000
CHANGED_SOURCE_CAP = 4 << 20  # characters of changed statements sent back for flagging
ROOM_MARGIN_BYTES = 16 << 20  # /scratch left for the candidate's home and pytest's own files
ROOM_MARGIN_INODES = 512
EXIT_GRACE_S = 0.5  # after the test process exits, how long its report pipe may stay open (a forked child)
FLUSH_S = 0.05  # the reporter sends verdicts at least this often (repo_reporter.Frames)
# ours: the reporter, loaded by the warm process, stays importable (a candidate's program never gets our modules).
PROGRAM = {"code": "import repo_reporter\nrepo_reporter.main()\n", "filename": "rewardbox_pytest.py", "ours": True}
# A task's own interpreter (job["python"]: an environment's, a user's image's) cannot be forked from our zygote: the
# test process execs it, and it imports our reporter from our read-only folder before anything of the
# repository's can be on its path (-E: no PYTHONPATH, -s: no user site; '' goes too). The reporter's floor is Python
# 3.7 (docs/environments-own-image.md): an older interpreter is told apart on stderr, before anything of ours loads.
OWN_PYTHON_BOOT = ("import sys\nif sys.version_info < (3, 7):\n    sys.stderr.write('rewardbox: repo tests need "
                   "Python 3.7 or newer as environment.python, not %s\\n' % sys.version.split()[0])\n"
                   "    sys.exit(3)\n"
                   "sys.path[:] = ['/opt/rewardbox'] + [p for p in sys.path if p]\n"
                   "import repo_reporter\nrepo_reporter.warm_up()\nrepo_reporter.main()\n")


class _Unfit(Exception):
    """The sandbox cannot hold this repository (a configuration fault of ours)."""


def repo_job(runner, job: dict, limits: dict) -> dict:
    started = time.monotonic()
    repo = job.get("repo") or {}
    if job.get("python") and not os.access(str(job["python"]), os.X_OK):  # the request named a wrong interpreter
        return {"status": "ok", "events": [{"event": "python_missing", "python": str(job["python"])[:300]}]}
    snap = CACHE.get(str(repo.get("id")))
    if snap is None and repo.get("path"):  # the repository is in the image (SandboxTarget.repo_path, e.g. /testbed)
        try:
            snap = CACHE.put(str(repo["id"]), ws.load_dir(str(repo["path"])))
        except (ws.BadSnapshot, OSError) as e:
            return {"status": "sandbox_error", "error": f"repository {repo['path']} in the image: {e}"}
    if snap is None:
        if not repo.get("archive_b64"):
            return {"status": "ok", "events": [{"event": "repo_missing", "id": repo.get("id")}]}
        try:
            snap = CACHE.put(str(repo["id"]), ws.load(base64.b64decode(repo["archive_b64"])))
        except (ws.BadSnapshot, ValueError) as e:
            return {"status": "sandbox_error", "error": f"snapshot: {e}"}
    try:
        _fresh_dirs(runner, snap)
    except _Unfit as e:
        return {"status": "sandbox_error", "error": str(e)}
    marks: dict[str, float] = {"workspace_ms": 0.0}
    event: dict = {"event": "repo", "patch": {"ok": True, "message": ""}}
    step = _as_judge(runner, lambda: _prepare(snap, job.get("files") or {}))
    marks["workspace_ms"] = _ms(started)
    if "error" in step:
        return _patch_failed(event, step["error"], marks)
    patch = job.get("patch") or ""
    if patch.strip():
        t = time.monotonic()
        applied = _apply_patch(runner, patch, int(job.get("strip", 1)))
        marks["patch_ms"] = _ms(t)
        event["patch"] = applied
        if not applied["ok"]:
            return _patch_failed(event, None, marks)
    _kill_uid(runner, runner.judge_uid)
    t = time.monotonic()
    fix = _as_judge(runner, lambda: _fix_up(snap, job))
    marks["fix_up_ms"] = _ms(t)
    if "error" in fix:
        return _patch_failed(event, fix["error"], marks)
    event.update({k: fix[k] for k in ("changed", "deleted", "restored", "edited_tests", "changed_sources")})
    t = time.monotonic()
    if job.get("framework") == "node:test":
        result = repo_node.run_node_tests(runner, _rt(runner), job, limits, fix, started + float(limits["total_s"]),
                                          WORKSPACE, event)
    else:
        result = _run_tests(runner, job, limits, fix, started + float(limits["total_s"]), event)
    marks["tests_ms"] = _ms(t)
    marks["total_ms"] = _ms(started)
    event["timings"] = {**{k: round(v, 3) for k, v in marks.items()}, **event.pop("reporter_timings", {})}
    result["events"] = [event]
    return result


def _ms(since: float) -> float:
    return (time.monotonic() - since) * 1000


def _patch_failed(event: dict, message: str | None, marks: dict) -> dict:
    if message is not None:
        event["patch"] = {"ok": False, "message": message[:MESSAGE_CAP]}
    event["timings"] = {k: round(v, 3) for k, v in marks.items()}
    return {"status": "ok", "events": [event]}


# ------------------------------------------------------------------------------------------ processes


def _rt(runner):
    """The runner's module (it runs as __main__): its job-process helpers."""
    return sys.modules[type(runner).__module__]


def _fresh_dirs(runner, snap: ws.Snapshot) -> None:
    """Empty workspace and site dirs owned by the judge uid, once the snapshot is known to fit."""
    st = os.statvfs("/scratch")
    free, inodes = st.f_bavail * st.f_frsize, st.f_favail
    if snap.nbytes + ROOM_MARGIN_BYTES > free or snap.inodes + ROOM_MARGIN_INODES > inodes:
        raise _Unfit(f"the repository needs {snap.nbytes >> 20} MiB and {snap.inodes} inodes of /scratch; the "
                     f"sandbox has {free >> 20} MiB and {inodes} free (raise the sandbox's tmpfs size)")
    runner.used_uids.add(runner.judge_uid)  # the cleaner wipes everything the judge uid owns after the job
    for path in (WORKSPACE, SITE):
        os.mkdir(path)
        os.chmod(path, 0o755)  # the runner's umask is 077; the test process must enter both
        os.chown(path, runner.judge_uid, runner.judge_uid)


def _as_judge(runner, step) -> dict:
    """Run step() in a fresh process as the judge uid (cwd: the workspace); its dict comes back on a pipe."""
    out = run_helper(runner, runner.judge_uid, WORKSPACE, step, umask=0o022)  # readable by tests, writable by judge
    if "crash" in out:
        raise RuntimeError(f"repo workspace helper failed: {out['crash']}")
    return out


def run_helper(runner, uid: int, cwd: str, step, umask: int | None = None) -> dict:
    """Run step() in a fresh process as uid (in cwd, with HELPER_LIMITS); its dict comes back on a pipe.
    A WorkspaceError is the workspace's ({"error": ...}); any other failure is a fault of ours ({"crash": ...})."""
    r, w = os.pipe()
    pid = runner._fork()
    if pid == 0:
        try:
            os.close(r)
            _rt(runner).enter_job(uid, HELPER_LIMITS, cwd)
            if umask is not None:
                os.umask(umask)
            try:
                out = step()
            except ws.WorkspaceError as e:
                out = {"error": str(e)}
            except BaseException:  # noqa: BLE001 - a fault of ours, reported as such
                out = {"crash": traceback.format_exc()[-3000:]}
            wire.write_fd(w, out)
        finally:
            os._exit(0)
    os.close(w)
    reader = wire.FdReader(r)
    frames: list = []
    deadline = time.monotonic() + HELPER_LIMITS["wall_s"]
    while not frames and not reader.eof and time.monotonic() < deadline:
        select.select([r], [], [], 0.1)
        frames = reader.feed()
    os.close(r)
    _rt(runner)._kill_quietly(pid)
    runner._wait_child(pid, 5.0)
    return frames[0] if frames else {"crash": "the workspace helper sent no report"}


def _kill_uid(runner, uid: int) -> None:
    """No process of uid may outlive the step that used it (GNU patch starts none; a session's command may start
    daemons): the runner's kill(-1) as uid, which a fork cannot race."""
    if not runner.stop_uid(uid):
        raise RuntimeError(f"processes of uid {uid} survived their step")


# ------------------------------------------------------------------------------------------ steps 1-3


def _prepare(snap: ws.Snapshot, files: dict) -> dict:
    ws.materialize(snap.entries, WORKSPACE)
    for rel, content in files.items():
        ws.write_inside(WORKSPACE, ws.clean_rel(rel), content.encode())
    return {"ok": True}


def _apply_patch(runner, patch: str, strip: int) -> dict:
    rt = _rt(runner)
    proc = rt.Proc(runner, runner.zygote, runner.judge_uid, WORKSPACE, {**rt.DEFAULT_LIMITS, **PATCH_LIMITS})
    argv = [*_base_tool("/usr/bin/patch"), f"-p{strip}", "--force", "--unified", "--no-backup-if-mismatch",
            "--reject-file=-", "--remove-empty-files", "--quoting-style=literal"]
    proc.start({"argv": argv}, patch, None, {"LC_ALL": "C"})
    proc.wait_until(time.monotonic() + PATCH_LIMITS["wall_s"])
    res = proc.result()
    output = (res["stdout"] + res["stderr"]).strip()
    if res["status"] == "ok":
        return {"ok": True, "message": output[-MESSAGE_CAP:]}
    if res["status"] == "sandbox_error":
        raise RuntimeError(f"the patch tool did not start: {res.get('error')}")
    why = {"timeout": "patch ran out of time", "memory_limit": "patch ran out of memory",
           "output_limit": "patch printed too much"}.get(res["status"], f"patch exited with {res['exit_code']}")
    return {"ok": False, "message": f"the patch does not apply ({why}):\n{output}"[:MESSAGE_CAP]}


def _base_tool(path: str) -> list[str]:
    """How a tool of ours starts: in a user's own image (REWARDBOX_BASE set by the backend), the base root
    filesystem's binary through its own loader and libraries, since the image may have none or another."""
    base = os.environ.get("REWARDBOX_BASE")
    if not base:
        return [path]
    loader = f"{base}/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    return [loader, "--library-path", os.environ["REWARDBOX_BASE_LIBS"], base + path]


def _fix_up(snap: ws.Snapshot, job: dict) -> dict:
    tree = ws.scan(WORKSPACE)
    for rel, kind in tree.items():
        entry = snap.entries.get(rel)
        if kind == "l" and not (entry and entry.kind == "l" and os.readlink(os.path.join(WORKSPACE, rel)).encode()
                                == entry.data):
            raise ws.WorkspaceError(f"the change creates a symbolic link ({rel}); links are not supported")
        if kind == "other":
            raise ws.WorkspaceError(f"the change creates something that is not a file ({rel})")
    ws.make_readable(WORKSPACE, tree)
    changed, added = [], []
    for rel, kind in tree.items():
        if kind != "f":
            continue
        old = snap.file(rel)
        if old is None:
            added.append(rel)
        elif ws.read_file(WORKSPACE, rel, READ_CAP) != old:
            changed.append(rel)
    deleted = [rel for rel, e in snap.entries.items() if e.kind == "f" and tree.get(rel) != "f"]
    restored = []
    test_files = {ws.clean_rel(rel): content.encode() for rel, content in (job.get("test_files") or {}).items()}
    for rel, data in test_files.items():
        if ws.read_file(WORKSPACE, rel, READ_CAP) != data:
            ws.write_over(WORKSPACE, rel, data)
            restored.append(rel)
    # The listed tests' own files and the protected files: the snapshot's version, or none at all (a test file the
    # patch added is not a test of the task, it is the program's code).
    trusted = {rel: snap.file(rel) for rel in {_file_of(n) for n in job.get("tests") or []} if rel not in test_files}
    trusted.update({rel: snap.file(rel) for rel in set(tree) | set(snap.entries) if ws.is_protected(rel)})
    for rel, data in sorted(trusted.items()):
        if data is None:
            if rel in tree:
                ws.remove(WORKSPACE, rel)
                restored.append(rel)
        elif ws.read_file(WORKSPACE, rel, READ_CAP) != data:
            ws.write_over(WORKSPACE, rel, data, snap.entries[rel].executable)
            restored.append(rel)
    # A module the change adds at an import root under a standard library name would replace it for the tests (a
    # fake `decimal` whose values equal anything): removed, with its package directory when the change made it.
    shadows = sorted({t for t in map(_stdlib_shadow, added) if t and t not in snap.entries})
    for top in shadows:
        ws.remove(WORKSPACE, top)
        restored.append(top)
    ws.materialize({rel: ws.Entry("f", data) for rel, data in snap.site.items()}, SITE)
    untrusted = sorted(set(changed + added) - set(restored))
    # What the change itself did to trusted files: restoring a test file the task's test_patch brings (absent or
    # older in the snapshot) is the trusted side's own step, not an edit by the change.
    edited = sorted((set(restored) & set(changed + added + deleted)) | set(shadows))
    return {"changed": untrusted, "deleted": deleted, "restored": sorted(restored), "edited_tests": edited,
            "changed_sources": _changed_sources(snap, untrusted),
            "present": sorted(rel for rel in {_file_of(n) for n in job.get("tests") or []}
                              if ws.read_file(WORKSPACE, rel, 0) is not None)}


def _stdlib_shadow(rel: str) -> str | None:
    """The module file or package directory (at the workspace root or src/) that rel makes importable under a
    standard library name, or None."""
    root, parts = ("src/", rel.split("/")[1:]) if rel.startswith("src/") else ("", rel.split("/"))
    if not parts or not parts[0]:
        return None
    name = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0] if len(parts) > 1 else ""
    return root + parts[0] if name in sys.stdlib_module_names or name in ("pytest", "_pytest", "pluggy") else None


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _changed_sources(snap: ws.Snapshot, paths: list[str]) -> list[list[str]]:
    """[before, after] of the changed top-level statements of each Python file the change touched: the host flags
    the constructs the change added (graders/flags.py: the same rules as for single programs)."""
    pairs, total = [], 0
    for rel in paths:
        if not rel.endswith(".py"):
            continue
        new = (ws.read_file(WORKSPACE, rel, READ_CAP) or b"").decode(errors="replace")
        old = (snap.file(rel) or b"").decode(errors="replace")
        old_part, new_part = _changed_parts(old, new)
        total += len(old_part) + len(new_part)
        if total > CHANGED_SOURCE_CAP:
            break
        pairs.append([old_part, new_part])
    return pairs


def _changed_parts(old: str, new: str) -> tuple[str, str]:
    """The top-level statements around the lines that differ, in each version (parsing a 5,000-line module
    twice per item would cost more than the tests of a small task)."""
    a, b = old.split("\n"), new.split("\n")
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    return _statements(a, pre, len(a) - suf), _statements(b, pre, len(b) - suf)


def _statements(lines: list[str], lo: int, hi: int) -> str:
    def top(line: str) -> bool:
        return bool(line) and not line[0].isspace() and not line.startswith(("#", ")", "]", "}", "@"))

    start = min(lo, len(lines) - 1)
    while start > 0 and not top(lines[start]):
        start -= 1
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    end = max(hi, start + 1)
    while end < len(lines) and not top(lines[end]):
        end += 1
    return "\n".join(lines[max(start, 0):end])


# ------------------------------------------------------------------------------------------ step 4


def _pytest_zygote(runner):
    """The runner's pytest zygote (forked at start-up, before any job data existed), with pytest and every plugin
    it may load imported on first use."""
    if not runner.pytest_warm:
        runner.pytest_zygote.reply(runner.pytest_zygote.send({"warm": "repo_reporter"}))
        runner.pytest_warm = True
    return runner.pytest_zygote


class Frames:
    """The runner's check of the reporter's stream: the token, consecutive numbers, a consistent story."""

    def __init__(self, token: str, listed: list[str]) -> None:
        self.token, self.listed = token, set(listed)
        self.seq = 0
        self.started = False
        self.collected: list[str] | None = None
        self.collect_errors: list[dict] = []
        self.cases: dict[str, dict] = {}
        self.progress = time.monotonic()  # when the last frame arrived
        self.finished = False
        self.exitstatus: int | None = None  # pytest's own, from the reporter's last frame
        self.timings: dict[str, float] = {}  # the reporter's own clock: information, never a verdict
        self.crashed: str | None = None
        self.tampered: str | None = None  # a frame the reporter never sent, or the reporter's own finding

    def running(self) -> str | None:
        """The test running now: pytest runs the collected tests in order, and cases arrive in that order."""
        if self.collected is None:
            return None
        return next((n for n in self.collected if n not in self.cases), None)

    def take(self, frame: object) -> None:
        if self.tampered:
            return
        if type(frame) is not dict or frame.get("t") != self.token or frame.get("n") != self.seq + 1:
            self.tampered = "a frame on the report channel did not come from rewardbox's reporter"
            return
        self.seq += 1
        self.progress = time.monotonic()
        kind = frame.get("event")
        if kind == "start":
            self.started = True
        elif kind == "collected" and self.collected is None:
            items = [str(n) for n in frame.get("items") or []]
            if not set(items) <= self.listed:
                self.tampered = "the reporter ran tests that were not asked for"
                return
            self.collected = items
            self.collect_errors = [e for e in frame.get("errors") or [] if type(e) is dict][:200]
        elif kind == "case" and self.collected is not None:
            name = str(frame.get("name"))
            if name not in self.collected or name in self.cases:
                self.tampered = f"a verdict for a test that was not collected or already judged: {name[:200]}"
                return
            self.cases[name] = {"passed": frame.get("passed") is True, "status": str(frame.get("status")),
                                "message": str(frame.get("message") or "")[:MESSAGE_CAP], "ms": frame.get("ms")}
        elif kind == "integrity":
            self.tampered = str(frame.get("problem") or "integrity check failed")[:MESSAGE_CAP]
        elif kind == "crashed":
            self.crashed = str(frame.get("error"))[:MESSAGE_CAP]
        elif kind == "finish":
            if frame.get("reported") != len(self.cases):
                self.tampered = "the reporter's final count disagrees with the verdicts it sent"
            self.finished = True
            self.exitstatus = frame.get("exitstatus") if type(frame.get("exitstatus")) is int else None
            reported = frame["timings"] if type(frame.get("timings")) is dict else {}
            self.timings = {str(k): v for k, v in reported.items() if type(v) in (int, float)}
        else:
            self.tampered = f"an unexpected frame {str(kind)[:50]!r} on the report channel"


def _run_tests(runner, job: dict, limits: dict, fix: dict, deadline: float, event: dict) -> dict:
    rt = _rt(runner)
    listed = [str(n) for n in job.get("tests") or []]
    per_test = float(limits["wall_s"])
    present = fix["present"]
    files = [f for f in dict.fromkeys(_file_of(n) for n in listed) if f in present]
    sys_path = [WORKSPACE] + ([os.path.join(WORKSPACE, "src")] if os.path.isdir(os.path.join(WORKSPACE, "src"))
                              else []) + [SITE]
    args = ["--rootdir", WORKSPACE, "--confcutdir", WORKSPACE, "-p", "no:cacheprovider",
            "--continue-on-collection-errors", "--basetemp", "/tmp/rewardbox-pytest", "--color=no", "-q",
            "--tb=short", "-o", "console_output_style=classic", *[str(a) for a in job.get("args") or []], *files]
    token = secrets.token_hex(16)
    config = {"token": token, "root": WORKSPACE, "tests": listed, "args": args, "sys_path": sys_path,
              "changed": fix["changed"]}
    env = {"HOME": "/tmp", "TMPDIR": "/tmp", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONNOUSERSITE": "1",
           "PYTHONPATH": ":".join(sys_path), "PY_COLORS": "0", "COLUMNS": "120"}
    remaining = max(1.0, deadline - time.monotonic())
    proc_limits = {**limits, "wall_s": remaining, "cpu_s": remaining, "nofile": max(int(limits["nofile"]), 256)}
    frames = Frames(token, listed)
    timed_out: str | None = None
    r, w = os.pipe()
    python = job.get("python")
    if python:  # the task's interpreter, with its own installed packages
        proc = rt.Proc(runner, runner.zygote, runner.cand_uid, WORKSPACE, proc_limits)
        program: dict = {"argv": [str(python), "-E", "-s", "-B", "-c", OWN_PYTHON_BOOT]}
    else:
        proc = rt.Proc(runner, _pytest_zygote(runner), runner.cand_uid, WORKSPACE, proc_limits)
        program = PROGRAM
    proc.start(program, json.dumps(config), None, env, extra_fds=(w,))  # spawn closes our copy of w
    os.set_blocking(r, False)
    reader = wire.FdReader(r)
    exited_at = None
    try:
        while not proc.spawn_error:
            now = time.monotonic()
            if now >= deadline:
                proc.kill("timeout")
                timed_out = "the whole run exceeded the item's time limit"
                break
            if now - frames.progress > per_test + FLUSH_S:  # no verdict for that long: a test (or collection) hangs
                proc.kill("timeout")
                timed_out = frames.running() or "collection exceeded the per-test time limit"
                break
            ready = proc.pump(min(0.05, deadline - now), extra=[] if reader.eof else [r])
            if r in ready:
                try:
                    for frame in reader.feed():
                        frames.take(frame)
                except ValueError as e:
                    frames.tampered = f"the report channel carried something that is not a frame: {e}"
            if proc.exit is not None:
                exited_at = exited_at or now
                if reader.eof or now - exited_at > EXIT_GRACE_S:
                    break
            if frames.tampered:
                proc.kill("killed")
                break
    finally:
        proc.wait_until(time.monotonic() + 2.0)
        os.close(r)
    res = proc.result()
    event.update(_verdicts(frames, listed, present, timed_out, res))
    status = res["status"] if res["status"] in ("timeout", "memory_limit", "output_limit", "sandbox_error") else "ok"
    return {**res, "status": status}


def _not_reached(timed_out: str | None, collected: set[str], ended: str) -> str:
    if timed_out in collected:
        return f"not run: the run was stopped when {timed_out} exceeded its time limit"
    return f"not run: {timed_out}" if timed_out else ended


def _verdicts(frames: Frames, listed: list[str], present: list[str], timed_out: str | None, res: dict) -> dict:
    """One verdict per listed node id: passed only with the reporter's passing case, on an untampered stream."""
    collected = set(frames.collected or [])
    errors_by_file: dict[str, str] = {}
    for err in frames.collect_errors:
        errors_by_file.setdefault(_file_of(str(err.get("nodeid", ""))), str(err.get("message", ""))[-600:])
    ended = ("the test process ended before this test ran" if res["status"] in ("ok", "runtime_error")
             else f"the test process ended ({res['status']}) before this test ran")
    verdicts = []
    for name in listed:
        case = frames.cases.get(name)
        if frames.tampered:
            v = {"passed": False, "status": "failed", "message": f"harness tampering: {frames.tampered}"}
        elif case is not None:
            v = dict(case)
        elif name == timed_out:
            v = {"passed": False, "status": "timeout", "message": "the test exceeded its time limit"}
        elif _file_of(name) not in present:
            v = {"passed": False, "status": "not_run", "message": f"test file {_file_of(name)} not found"}
        elif _file_of(name) in errors_by_file:
            v = {"passed": False, "status": "failed", "message": "collection failed: " + errors_by_file[_file_of(name)]}
        elif frames.collected is not None and name not in collected:
            v = {"passed": False, "status": "not_run", "message": "not collected (no such test, or deselected)"}
        else:
            v = {"passed": False, "status": "not_run", "message": _not_reached(timed_out, collected, ended)}
        verdicts.append({"name": name, **v})
    listed_files = {_file_of(n) for n in listed}
    return {"verdicts": verdicts, "collected": len(collected), "finished": frames.finished,
            "pytest_exit_status": frames.exitstatus,
            "tampered": frames.tampered, "crashed": frames.crashed,
            "collect_errors": [e for e in frames.collect_errors if _file_of(str(e.get("nodeid", ""))) in
                               listed_files][:20],
            # The package imported and the listed tests' files collected (some listed test, no error in their
            # files), and the run then ended normally (pytest's exit status 0 or 1) or was stopped by a limit of
            # ours; a process that died on its own (an exit in the package) is not executable.
            "executable": bool(frames.collected and not frames.crashed
                               and not any(f in errors_by_file for f in listed_files)
                               and ((frames.finished and frames.exitstatus in (0, 1))
                                    or timed_out or res["status"] in ("memory_limit", "output_limit"))),
            "process_status": res["status"], "exit_code": res.get("exit_code"), "reporter_timings": frames.timings}
