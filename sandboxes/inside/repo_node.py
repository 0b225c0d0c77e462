"""Step 4 of a repo job for node:test repositories (job["framework"] == "node:test"). Runs in the runner (trusted).

Each listed test file runs in its own node process (candidate uid, cwd the judge-owned workspace):
`node --import node_repo_preload.mjs --test-reporter=node_repo_reporter.mjs FILE`. The preload reads the job's
token from stdin before any package code runs, locks assert / node:test / the module loader, and binds rewardbox's
reporter to node's own test event stream; verdicts come back on fd 3 as JSON lines carrying the token and
consecutive numbers. One process per file: code a test file loads cannot rewrite another test file as it loads.

A listed id `path/to/file.test.js::suite > test` passes only on a passing, neither skipped nor todo, case frame
whose test was defined (node's own call-site record, not a JS stack) in that file; every frame of that id must
pass. A frame without the token, out of order, or a second reporter fails the whole run (harness tampering).
stdout is never read for verdicts.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.parse

INSIDE = "/opt/rewardbox"
NODE = "/usr/bin/node"
LINE_CAP = 1 << 20
MESSAGE_CAP = 2000
EXIT_GRACE_S = 0.5
SEP = " > "


def file_of(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def test_id(root: str, file: str, path: list[str]) -> str | None:
    """The listed-id form of a case frame, or None for a test defined outside the workspace."""
    if file.startswith("file://"):  # ESM test files: a URL (percent-encoded)
        file = urllib.parse.unquote(file[len("file://"):])
    prefix = root.rstrip("/") + "/"
    if not file.startswith(prefix):
        return None
    return file[len(prefix):] + "::" + SEP.join(path)


class NodeFrames:
    """The runner's check of one node process's report stream."""

    def __init__(self, token: str, root: str) -> None:
        self.token, self.root = token, root
        self.seq = 0
        self.buf = b""
        self.started = False
        self.finished = False
        self.running: str | None = None
        self.cases: dict[str, dict] = {}
        self.progress = time.monotonic()
        self.tampered: str | None = None

    def feed(self, data: bytes) -> None:
        self.buf += data
        while b"\n" in self.buf and not self.tampered:
            line, self.buf = self.buf.split(b"\n", 1)
            self.take(line)
        if len(self.buf) > LINE_CAP:
            self.tampered = "an over-long line on the report channel"

    def take(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError:
            self.tampered = "the report channel carried something that is not a frame"
            return
        if type(frame) is not dict or frame.get("t") != self.token or frame.get("n") != self.seq + 1:
            self.tampered = "a frame on the report channel did not come from rewardbox's reporter"
            return
        self.seq += 1
        self.progress = time.monotonic()
        kind = frame.get("event")
        path = [str(p) for p in frame.get("path") or []] if type(frame.get("path")) is list else []
        name = test_id(self.root, str(frame.get("file")), path) if kind in ("started", "case") else None
        if kind == "start" and not self.started:
            self.started = True
        elif kind == "started" and self.started:
            self.running = name
        elif kind == "case" and self.started:
            if name is None:
                return
            passed = frame.get("passed") is True and frame.get("skip") is not True and frame.get("todo") is not True
            status = "passed" if passed else ("skipped" if frame.get("skip") is True
                                              else "todo" if frame.get("todo") is True else "failed")
            before = self.cases.get(name)
            if before is None or before["passed"]:  # an id seen twice passes only if every case of it passed
                self.cases[name] = {"passed": passed, "status": status,
                                    "message": str(frame.get("message") or "")[:MESSAGE_CAP]}
            self.running = None
        elif kind == "integrity":
            self.tampered = str(frame.get("problem") or "integrity check failed")[:MESSAGE_CAP]
        elif kind == "finish" and self.started:
            self.finished = True
        else:
            self.tampered = f"an unexpected frame {str(kind)[:50]!r} on the report channel"


def run_node_tests(runner, rt, job: dict, limits: dict, fix: dict, deadline: float, workspace: str,
                   event: dict) -> dict:
    listed = [str(n) for n in job.get("tests") or []]
    present = set(fix["present"])
    files = [f for f in dict.fromkeys(file_of(n) for n in listed) if f in present]
    per_test = float(limits["wall_s"])
    token = secrets.token_hex(16)
    env = {"HOME": "/tmp", "TMPDIR": "/tmp", "NO_COLOR": "1", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    argv_head = [NODE, "--stack-size=4096", "--import", f"{INSIDE}/node_repo_preload.mjs",
                 f"--test-reporter={INSIDE}/node_repo_reporter.mjs", "--test-reporter-destination=stdout"]
    per_file: dict[str, NodeFrames] = {}
    timed_out: dict[str, str] = {}
    res: dict = {"status": "ok", "exit_code": 0}
    for rel in files:
        if time.monotonic() >= deadline:
            timed_out[rel] = "the whole run exceeded the item's time limit"
            continue
        remaining = max(1.0, deadline - time.monotonic())
        proc_limits = {**limits, "wall_s": remaining, "cpu_s": remaining, "nofile": max(int(limits["nofile"]), 256)}
        frames = NodeFrames(token, workspace)
        per_file[rel] = frames
        r, w = os.pipe()
        proc = rt.Proc(runner, runner.zygote, runner.cand_uid, workspace, proc_limits)
        proc.start({"argv": [*argv_head, os.path.join(workspace, rel)]}, json.dumps({"token": token}), None, env,
                   extra_fds=(w,))
        os.set_blocking(r, False)
        eof, exited_at = False, None
        try:
            while not proc.spawn_error:
                now = time.monotonic()
                if now >= deadline:
                    proc.kill("timeout")
                    timed_out[rel] = frames.running or "the whole run exceeded the item's time limit"
                    break
                if now - frames.progress > per_test + 0.05:
                    proc.kill("timeout")
                    timed_out[rel] = frames.running or f"{rel} exceeded the per-test time limit before its tests ran"
                    break
                ready = proc.pump(min(0.05, deadline - now), extra=[] if eof else [r])
                if r in ready:
                    try:
                        chunk = os.read(r, 1 << 16)
                    except BlockingIOError:
                        chunk = None
                    if chunk == b"":
                        eof = True
                    elif chunk:
                        frames.feed(chunk)
                if proc.exit is not None:
                    exited_at = exited_at or now
                    if eof or now - exited_at > EXIT_GRACE_S:
                        break
                if frames.tampered:
                    proc.kill("killed")
                    break
        finally:
            proc.wait_until(time.monotonic() + 2.0)
            os.close(r)
        out = proc.result()
        if not runner.stop_uid(runner.cand_uid):  # nothing a test file started may reach the next file's process
            raise RuntimeError("processes of the candidate uid survived a test file")
        if res["status"] == "ok" or out["status"] in ("sandbox_error", "memory_limit", "output_limit"):
            res = out if out["status"] != "runtime_error" else {**out, "status": "ok"}
        if out["status"] == "sandbox_error":
            break
    event.update(verdicts(per_file, listed, present, timed_out, res))
    status = res["status"] if res["status"] in ("timeout", "memory_limit", "output_limit", "sandbox_error") else "ok"
    return {**res, "status": status}


def verdicts(per_file: dict[str, NodeFrames], listed: list[str], present: set[str], timed_out: dict[str, str],
             res: dict) -> dict:
    """One verdict per listed id; any tampered stream fails every listed test."""
    tampered = next((f.tampered for f in per_file.values() if f.tampered), None)
    out = []
    for name in listed:
        rel = file_of(name)
        frames = per_file.get(rel)
        case = frames.cases.get(name) if frames else None
        if tampered:
            v = {"passed": False, "status": "failed", "message": f"harness tampering: {tampered}"}
        elif case is not None:
            v = dict(case)
        elif rel not in present:
            v = {"passed": False, "status": "not_run", "message": f"test file {rel} not found"}
        elif timed_out.get(rel) == name:
            v = {"passed": False, "status": "timeout", "message": "the test exceeded its time limit"}
        elif rel in timed_out:
            v = {"passed": False, "status": "not_run", "message": f"not run: {timed_out[rel]}"}
        elif frames is not None and frames.finished:
            v = {"passed": False, "status": "not_run", "message": "no such test in the file (or not run)"}
        else:
            v = {"passed": False, "status": "not_run", "message": "the test process ended before this test ran"}
        out.append({"name": name, **v})
    runs = list(per_file.values())
    return {"verdicts": out, "collected": sum(len(f.cases) for f in runs), "finished": all(f.finished for f in runs),
            "pytest_exit_status": None, "tampered": tampered, "crashed": None, "collect_errors": [],
            # every listed file's process reported to its end, or was stopped by a limit of ours
            "executable": bool(runs) and all(f.finished or rel in timed_out for rel, f in per_file.items()),
            "process_status": res["status"], "exit_code": res.get("exit_code"), "reporter_timings": {}}
