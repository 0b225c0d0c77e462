"""Benchmark: agent sessions (/sessions) next to the same actions done with `docker exec` / `docker run` of the same
sandbox image, in the same run.

    .venv/bin/python bench/sessions.py                  # starts `rewardbox serve` (docker backend, session pool 2)
    .venv/bin/python bench/sessions.py --backend bubblewrap --rounds 50 --json

Figures (each a real run over real HTTP; nothing here is cached: sessions have no result cache, and the reward's
result cache is off in the server this starts):
- exec round trip of `true` in a session, on a tiny repo and on a ~1 MB one (p50/p95), next to a bare
  `/usr/bin/python3 -c pass` start, `docker exec` into a running container and `docker run --rm` of the image.
  Target: session exec p50 <= 3x the bare python start.
- fork x8 of a session on the ~1 MB repo (POST /fork {"n": 8}), next to 8 `docker run -d` of the image (a
  container per rollout, without even copying the repository in). Target: <= 300 ms.
- create a session (POST /sessions, the snapshot stored already) next to `docker run -d` + `docker cp` of the repo.
- reward of a session (its diff graded in a fresh sandbox) next to POST /reward of the same patch as a repo item.
- 64 sessions open at once, each running a command: errors counted. Target: none.
- git in sessions (`--git`, or `--git-only` for this figure alone): what the workspace's repository costs, with
  REWARDBOX_SESSION_GIT on and off, one server after the other in the same run: a session's start on a snapshot
  no sandbox holds yet (create + first `true`: the snapshot commit is made there), and exec `true` p50 on the
  ~1 MB repo (its .git written out before every command).
Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.humaneval import free_port, stop_server, wait_ready  # noqa: E402
from rewardbox.archive import repo_archive  # noqa: E402
from sandboxes.image import image_name  # noqa: E402

TINY = {"pkg/__init__.py": b"", "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
FIX = "sed -i 's/a - b/a + b/' pkg/calc.py"
GZIP = {"content-type": "application/gzip"}


def big_repo(total: int = 1 << 20, files: int = 120) -> dict[str, bytes]:
    """~1 MB of Python-looking text in `files` modules, plus the tiny package."""
    rng = random.Random(0)
    out = dict(TINY)
    for i in range(files):
        lines, size = [], 0
        while size < total // files:
            line = f"VALUE_{len(lines)} = {rng.getrandbits(128):#x}  # {rng.getrandbits(64):x}\n"
            lines.append(line)
            size += len(line)
        out[f"pkg/mod_{i:03d}.py"] = "".join(lines).encode()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 2), "p95_ms": round(pct(values, 0.95), 2), "n": len(values)}


def run(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def docker_baselines(image: str, rounds: int, repo_dir: str) -> dict:
    if shutil.which("docker") is None:
        return {"skipped": "no docker CLI"}
    flags = ["--network", "none", "--read-only", "--cap-drop", "ALL"]
    out: dict = {"docker_run_true": summary(timed(lambda: run(["docker", "run", "--rm", *flags, image, "true"]),
                                                  max(5, rounds // 5)))}
    cid = run(["docker", "run", "-d", *flags, "--tmpfs", "/work", image, "sleep", "infinity"])
    try:
        out["docker_exec_true"] = summary(timed(lambda: run(["docker", "exec", cid, "true"]), rounds))
    finally:
        run(["docker", "rm", "-f", cid])

    def run_and_copy() -> None:
        c = run(["docker", "run", "-d", *flags, "--tmpfs", "/work", image, "sleep", "infinity"])
        try:
            subprocess.run(["docker", "cp", f"{repo_dir}/.", f"{c}:/tmp"], check=False, capture_output=True)
        finally:
            created.append(c)

    created: list[str] = []
    out["docker_run_and_cp_1mb"] = summary(timed(run_and_copy, 5))

    def eight() -> None:
        with ThreadPoolExecutor(8) as ex:
            created.extend(ex.map(lambda _: run(["docker", "run", "-d", *flags, image, "sleep", "infinity"]),
                                  range(8)))

    out["docker_run_x8"] = summary(timed(eight, 3))
    for c in created:
        subprocess.run(["docker", "rm", "-f", c], capture_output=True)
    return out


def start_server(backend: str, extra: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    log_path = os.path.join(tempfile.mkdtemp(prefix="rewardbox-bench-"), "serve.log")
    env = {**os.environ, "REWARDBOX_BACKEND": backend, "REWARDBOX_POOL_SIZE": "2",
           "REWARDBOX_SESSION_POOL_SIZE": "2", "REWARDBOX_RESULT_CACHE_SIZE": "0", "REWARDBOX_DB": "off", **extra}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port",
                                 str(port), "--log-level", "warning"], env=env, stdout=log, stderr=log, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, log_path, 300)
    return proc, url, log_path


def git_figures(backend: str, rounds: int, big: dict[str, bytes]) -> dict:
    """Session start on a fresh snapshot and exec p50 on the ~1 MB repo, with the session's git on and off."""
    return {label: git_figure(backend, rounds, big, on) for label, on in (("with_git", True), ("without_git", False))}


def git_figure(backend: str, rounds: int, big: dict[str, bytes], on: bool) -> dict:
    proc, url, _ = start_server(backend, {"REWARDBOX_SESSION_GIT": "1" if on else "0"})
    try:
        with httpx.Client(base_url=url, timeout=300) as api:
            def start(i: int) -> float:
                files = {**big, "salt.txt": f"{on} {i} {random.random()}\n".encode()}  # a snapshot no sandbox has
                repo = api.post("/repos", content=repo_archive(files), headers=GZIP).json()["id"]
                t = time.perf_counter()
                sid = api.post("/sessions", json={"repo": {"id": repo}}).json()["session_id"]
                api.post(f"/sessions/{sid}/exec", json={"command": "true"}).raise_for_status()
                ms = (time.perf_counter() - t) * 1000
                api.delete(f"/sessions/{sid}")
                return ms

            start(-1)  # starts the session pool
            starts = [start(i) for i in range(10)]
            repo = api.post("/repos", content=repo_archive(big), headers=GZIP).json()["id"]
            sid = api.post("/sessions", json={"repo": {"id": repo}}).json()["session_id"]

            def run(command: str) -> None:
                api.post(f"/sessions/{sid}/exec", json={"command": command}).raise_for_status()

            for _ in range(4):  # both sandboxes hold the snapshot (and its commit)
                run("true")
            out = {"start_fresh_snapshot_1mb": summary(starts),
                   "exec_true_1mb": summary(timed(lambda: run("true"), rounds))}
            if on:
                out["exec_git_status_1mb"] = summary(timed(lambda: run("git status --short"), rounds))
            return out
    finally:
        stop_server(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="docker", help="docker | bubblewrap")
    ap.add_argument("--rounds", type=int, default=40, help="exec round trips per figure")
    ap.add_argument("--open", type=int, default=64, help="sessions open at once in the last figure")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--git", action="store_true", help="also the git figure (two more servers)")
    ap.add_argument("--git-only", action="store_true", help="the git figure alone")
    args = ap.parse_args()

    big = big_repo()
    if args.git_only:
        print(json.dumps({"backend": args.backend, "git": git_figures(args.backend, args.rounds, big)}, indent=2))
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = os.path.join(tempfile.mkdtemp(prefix="rewardbox-bench-"), "serve.log")
    env = {**os.environ, "REWARDBOX_BACKEND": args.backend, "REWARDBOX_POOL_SIZE": "2",
           "REWARDBOX_SESSION_POOL_SIZE": "2", "REWARDBOX_SESSIONS_MAX": str(max(args.open, 64) + 32),
           "REWARDBOX_RESULT_CACHE_SIZE": "0", "REWARDBOX_DB": "off"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port",
                                 str(port), "--log-level", "warning"], env=env, stdout=log, stderr=log, cwd=ROOT)
    figures: dict = {"backend": args.backend, "what_answered": "real runs over HTTP (no result cache, no store)"}
    try:
        wait_ready(url, proc, log_path, 300)
        with httpx.Client(base_url=url, timeout=300) as api:
            ids = {name: api.post("/repos", content=repo_archive(files), headers=GZIP).json()["id"]
                   for name, files in (("tiny", TINY), ("1mb", big))}
            figures["repo_bytes"] = {"tiny": sum(map(len, TINY.values())), "1mb": sum(map(len, big.values()))}

            def create(repo: str) -> str:
                r = api.post("/sessions", json={"repo": {"id": ids[repo]}})
                r.raise_for_status()
                return r.json()["session_id"]

            sessions = {name: create(name) for name in ids}  # also starts the session pool
            for sid in sessions.values():  # every session sandbox holds both snapshots before timing
                for _ in range(4):
                    api.post(f"/sessions/{sid}/exec", json={"command": "true"}).raise_for_status()
            figures["bare_python_start"] = summary(timed(lambda: subprocess.run(["/usr/bin/python3", "-c", "pass"],
                                                                                check=True), args.rounds))
            for name, sid in sessions.items():
                figures[f"session_exec_true_{name}"] = summary(timed(
                    lambda s=sid: api.post(f"/sessions/{s}/exec", json={"command": "true"}).raise_for_status(),
                    args.rounds))
            created: list[str] = []
            figures["session_create_1mb"] = summary(timed(lambda: created.append(create("1mb")), 10))
            parent = sessions["1mb"]
            api.post(f"/sessions/{parent}/exec", json={"command": "echo warm > state.txt"}).raise_for_status()
            forked: list[str] = []
            figures["session_fork_x8_1mb"] = summary(timed(lambda: forked.extend(api.post(
                f"/sessions/{parent}/fork", json={"n": 8}).json()["session_ids"]), 10))
            for sid in forked + created:
                api.delete(f"/sessions/{sid}")

            def session_reward() -> None:
                sid = create("tiny")
                api.post(f"/sessions/{sid}/exec", json={"command": FIX}).raise_for_status()
                t = time.perf_counter()
                result = api.post(f"/sessions/{sid}/reward", json={"tests": TESTS}).json()
                rewards.append((time.perf_counter() - t) * 1000)
                assert result["status"] == "passed", result
                api.delete(f"/sessions/{sid}")

            rewards: list[float] = []
            for _ in range(5):
                session_reward()
            figures["session_reward_tiny"] = summary(rewards)
            patch = api.post("/sessions", json={"repo": {"id": ids["tiny"]}}).json()["session_id"]
            api.post(f"/sessions/{patch}/exec", json={"command": FIX})
            diff = api.get(f"/sessions/{patch}/diff").json()["patch"]
            item = {"repo": {"id": ids["tiny"]}, "patch": diff, "tests": TESTS, "profile": "binary",
                    "language": "python"}
            figures["repo_item_reward_tiny"] = summary(timed(
                lambda: api.post("/reward", json=item).raise_for_status(), 5))

            def one_open(i: int) -> str | None:
                with httpx.Client(base_url=url, timeout=300) as c:
                    r = c.post("/sessions", json={"repo": {"id": ids["tiny"]}})
                    if r.status_code != 201:
                        return f"create {r.status_code}"
                    sid = r.json()["session_id"]
                    r = c.post(f"/sessions/{sid}/exec", json={"command": f"echo {i} > me && cat me"})
                    if r.status_code != 200 or r.json()["stdout"] != f"{i}\n":
                        return f"exec {r.status_code} {r.text[:100]}"
                    return None

            t = time.perf_counter()
            with ThreadPoolExecutor(16) as ex:
                errors = [e for e in ex.map(one_open, range(args.open)) if e]
            figures[f"open_{args.open}_sessions"] = {"errors": len(errors), "first_errors": errors[:3],
                                                     "wall_s": round(time.perf_counter() - t, 2),
                                                     "open_now": api.get("/sessions").json()["open"]}
        with tempfile.TemporaryDirectory() as d:
            for rel, data in big.items():
                os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
                Path(d, rel).write_bytes(data)
            figures["docker"] = docker_baselines(image_name(), args.rounds, d)
    finally:
        figures["server_stop"] = stop_server(proc)
    if args.git:
        figures["git"] = git_figures(args.backend, args.rounds, big)
    bare = figures["bare_python_start"]["p50_ms"]
    figures["targets"] = {
        "exec_p50_vs_bare_python": round(figures["session_exec_true_tiny"]["p50_ms"] / bare, 2),
        "exec_p50_vs_bare_python_1mb": round(figures["session_exec_true_1mb"]["p50_ms"] / bare, 2),
        "exec_target_x": 3.0, "fork_x8_ms": figures["session_fork_x8_1mb"]["p50_ms"], "fork_target_ms": 300.0,
        "open_sessions_errors": figures[f"open_{args.open}_sessions"]["errors"]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        print(f"{key:32s} {json.dumps(value)}")


if __name__ == "__main__":
    main()
