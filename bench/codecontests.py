"""Benchmark: CodeContests-style stdin/stdout problems, rewardbox `binary` against the executors RL recipes run.

    .venv/bin/python bench/codecontests.py                      # 12 problems x 4 samples x 40 cases, + C++ item
    .venv/bin/python bench/codecontests.py --problems 4 --samples 2 --cases 20 --backend bubblewrap
    .venv/bin/python bench/codecontests.py --against /tmp/base      # + another checkout's server, same batch

Generates its own problems (reference solutions in Python, many cases each: 80% small inputs, 20% large ones of
0.3-1.5 MB), computes the expected outputs in this process, and then, in the same run and on the same cores:
  in-process   one forked process per sample, every case exec'd inside it with stdin and stdout patched (the
               shape of verl's prime_code and LiveCodeBench's runner; no isolation), 2 samples at a time
  per-case     one `python3 solution.py` start per case, 2 threads (what a SandboxFusion /run_code per case costs;
               no isolation)
  fork per case  a warm interpreter per thread compiles each sample once and forks every case from it (stdin
               patched, stdout a pipe back; no isolation): the floor of any executor that runs each case in a
               process of its own, as rewardbox does so that no case can leave state for the next or do a later
               case's work in an earlier one's time; its own ratio to the first two bounds what such an executor
               can reach on these cores
  rewardbox    POST /reward/batch, profile `binary`, to a `rewardbox serve` this bench starts (a fresh nonce per
               program: the result cache cannot answer; the table says what answered), sent by rewardbox.Client as
               a trainer sends it (its JSON and HTTP are the "client" CPU printed), one request per problem's
               4 samples (a GRPO group), twice: the tests in every item, and the group's tests once in the batch's
               `defaults` (the headline ratios are that second run's; the first's are printed beside it)
The rewardbox row also says where the CPU went, from the kernel's accounting over the whole batch: the server's
own CPU per item, and the sandboxes' CPU per item (Docker: each container's cpuacct cgroup; bubblewrap: every
process under the server, /proc/PID/stat, own and reaped). Per-case costs: a small case's sandbox CPU (a batch of
only small cases, same accounting, divided by cases) and a large case's (a batch of only large cases) against the
program's own run on the host (the in-process executor's CPU for the same cases).

Then a C++ io item with 40 cases (a fifth of them large): one compile, then every case, against running the same
binary on the host (g++ on the host, -O2) on the very cases of each run, one `subprocess.run` per case; printed as
ms per case of the tests stage (details.timings.tests_ms, the build cached) and of the item's wall over HTTP.
Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import shutil
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from humaneval import answered_by, free_port, stop_server, wait_ready  # noqa: E402

import rewardbox as rewardbox_client  # noqa: E402
from graders.verdicts import outputs_match  # noqa: E402

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")
TARGETS = {"in-process": 0.8, "per-case": 2.5}  # rewardbox binary speed-up over each executor (issue 25)
SMALL_CASE_CPU_MS = 3.0
LARGE_CASE_RATIO = 1.15
CPP_CASE_RATIO = 1.2

# -- problems: (name, solution source, input generator(rng, large) -> stdin). The expected output is the reference
# solution run here, in process. Every solution reads all of stdin and writes its answer.

PROBLEMS: list[tuple[str, str, Callable[[random.Random, bool], str]]] = []


def problem(name: str, source: str):
    def add(gen: Callable[[random.Random, bool], str]):
        PROBLEMS.append((name, source, gen))
        return gen
    return add


def _ints(rng: random.Random, large: bool, lo: int = -10**6, hi: int = 10**6) -> list[int]:
    n = rng.randint(40_000, 180_000) if large else rng.randint(1, 40)
    return [rng.randint(lo, hi) for _ in range(n)]


def _n_then(values: list[Any]) -> str:
    return f"{len(values)}\n" + " ".join(map(str, values)) + "\n"


@problem("sum", "import sys\nd = sys.stdin.buffer.read().split()\nprint(sum(map(int, d[1:])))\n")
def _sum(rng, large):
    return _n_then(_ints(rng, large))


@problem("max-subarray", """import sys
d = sys.stdin.buffer.read().split()
best = cur = None
for x in map(int, d[1:]):
    cur = x if cur is None or cur < 0 else cur + x
    best = cur if best is None or cur > best else best
print(best)
""")
def _kadane(rng, large):
    return _n_then(_ints(rng, large))


@problem("distinct", "import sys\nd = sys.stdin.buffer.read().split()\nprint(len(set(d[1:])))\n")
def _distinct(rng, large):
    return _n_then(_ints(rng, large, 0, 5000))


@problem("median", """import sys
d = sorted(map(int, sys.stdin.buffer.read().split()[1:]))
print(d[len(d) // 2])
""")
def _median(rng, large):
    return _n_then(_ints(rng, large))


@problem("prefix-queries", """import sys
data = sys.stdin.buffer.read().split()
n, q = int(data[0]), int(data[1])
a = list(map(int, data[2:2 + n]))
pre = [0]
for x in a:
    pre.append(pre[-1] + x)
out = []
pos = 2 + n
for _ in range(q):
    l, r = int(data[pos]), int(data[pos + 1])
    pos += 2
    out.append(pre[r] - pre[l - 1])
print("\\n".join(map(str, out)))
""")
def _prefix(rng, large):
    a = _ints(rng, large)
    q = min(2000, len(a)) if large else rng.randint(1, 10)
    qs = []
    for _ in range(q):
        lo = rng.randint(1, len(a))
        qs.append(f"{lo} {rng.randint(lo, len(a))}")
    return f"{len(a)} {q}\n" + " ".join(map(str, a)) + "\n" + "\n".join(qs) + "\n"


@problem("reverse-words", """import sys
lines = sys.stdin.read().split("\\n")
t = int(lines[0])
print(sum(len(" ".join(reversed(line.split()))) for line in lines[1:1 + t]))
""")
def _reverse(rng, large):
    t = rng.randint(3000, 12000) if large else rng.randint(1, 5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    return f"{t}\n" + "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(1, 20))) for _ in range(t)) + "\n"


@problem("gcd-pairs", """import sys
from math import gcd
d = list(map(int, sys.stdin.buffer.read().split()))
print(sum(gcd(d[i], d[i + 1]) for i in range(1, len(d) - 1, 2)))
""")
def _gcd(rng, large):
    vals = _ints(rng, large, 1, 10**9)
    return _n_then(vals if len(vals) % 2 == 0 else vals + [1])


@problem("brackets", """import sys
lines = sys.stdin.read().split()
ok = 0
for s in lines[1:]:
    depth = 0
    for c in s:
        depth += 1 if c == "(" else -1
        if depth < 0:
            break
    ok += depth == 0
print(ok)
""")
def _brackets(rng, large):
    t = rng.randint(2000, 8000) if large else rng.randint(1, 6)
    return f"{t}\n" + "\n".join("".join(rng.choice("()") for _ in range(rng.randint(2, 60))) for _ in range(t)) + "\n"


@problem("matrix-rows", """import sys
d = sys.stdin.buffer.read().split()
r, c = int(d[0]), int(d[1])
vals = list(map(int, d[2:]))
print(max(sum(vals[i * c:(i + 1) * c]) for i in range(r)))
""")
def _matrix(rng, large):
    r, c = (rng.randint(200, 600), rng.randint(150, 300)) if large else (rng.randint(1, 5), rng.randint(1, 5))
    return f"{r} {c}\n" + "\n".join(" ".join(str(rng.randint(-999, 999)) for _ in range(c)) for _ in range(r)) + "\n"


@problem("two-sum-count", """import sys
from collections import Counter
d = list(map(int, sys.stdin.buffer.read().split()))
n, k = d[0], d[1]
seen = Counter()
count = 0
for x in d[2:2 + n]:
    count += seen[k - x]
    seen[x] += 1
print(count)
""")
def _twosum(rng, large):
    a = _ints(rng, large, 0, 1000)
    return f"{len(a)} {rng.randint(0, 2000)}\n" + " ".join(map(str, a)) + "\n"


@problem("word-freq", """import sys
from collections import Counter
words = sys.stdin.read().split()[1:]
top = sorted(Counter(words).items(), key=lambda kv: (-kv[1], kv[0]))[:5]
print("\\n".join(f"{w} {c}" for w, c in top))
""")
def _freq(rng, large):
    n = rng.randint(50_000, 200_000) if large else rng.randint(1, 30)
    words = [rng.choice("abcdefgh") * rng.randint(1, 4) for _ in range(n)]
    return f"{n}\n" + " ".join(words) + "\n"


@problem("running-mean", """import sys
d = sys.stdin.buffer.read().split()
vals = list(map(float, d[1:]))
print(f"{sum(vals) / max(1, len(vals)):.6f}")
""")
def _mean(rng, large):
    return _n_then([round(rng.uniform(-1000, 1000), 3) for _ in range(len(_ints(rng, large)))])


def reference(source: str, stdin: str) -> str:
    """The expected output: the reference solution run in this process on stdin."""
    out = io.StringIO()
    old_in, old_out = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = _Stdin(stdin), out
    try:
        exec(compile(source, "reference.py", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdin, sys.stdout = old_in, old_out
    return out.getvalue()


class _Stdin(io.TextIOWrapper):
    def __init__(self, text: str) -> None:
        super().__init__(io.BytesIO(text.encode()), encoding="utf-8")


def make_problems(n: int, cases: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name, source, gen = PROBLEMS[i % len(PROBLEMS)]
        large = set(rng.sample(range(cases), max(1, cases // 5)))
        stdins = [gen(rng, c in large) for c in range(cases)]
        out.append({"name": f"{name}-{i}", "source": source, "large": sorted(large),
                    "cases": [{"stdin": s, "stdout": reference(source, s)} for s in stdins]})
    return out


def samples_of(problems: list[dict], samples: int, nonce: str) -> list[dict]:
    """Each problem's solution, `samples` times, each unique (a nonce comment): what a trainer's rollouts send."""
    return [{"id": f"{p['name']}/{s}", "problem": p, "code": p["source"] + f"# {nonce} {p['name']} {s}\n"}
            for p in problems for s in range(samples)]


# -- executors without isolation


def in_process(samples: list[dict], workers: int = 2, only: str = "all") -> tuple[float, int, float]:
    """One forked process per sample; every case exec'd inside it with stdin/stdout patched. Returns (wall s,
    cases passed, CPU ms of the forked processes by RUSAGE_CHILDREN)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        passed = sum(ex.map(lambda s: _fork_sample(s, only), samples))
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, passed, ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def _cases(sample: dict, only: str) -> list[dict]:
    p = sample["problem"]
    return [c for i, c in enumerate(p["cases"]) if only == "all" or (i in p["large"]) == (only == "large")]


def _fork_sample(sample: dict, only: str) -> int:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        passed = 0
        try:
            code = compile(sample["code"], "solution.py", "exec")
            for case in _cases(sample, only):
                out = io.StringIO()
                sys.stdin, sys.stdout = _Stdin(case["stdin"]), out
                try:
                    exec(code, {"__name__": "__main__"})
                except BaseException:  # noqa: BLE001
                    continue
                finally:
                    sys.stdout = sys.__stdout__
                passed += outputs_match(out.getvalue(), case["stdout"], None)
        finally:
            os.write(w, str(passed).encode())
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 64):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return int(data or b"0")


# A warm interpreter that forks each case (stdlib only, run by PYTHON): reads (program, stdins) as a length-prefixed
# pickle on stdin, compiles the program once, forks one child per case (stdin patched as in-process, stdout a real
# pipe back to it, as a sandbox's case has) and answers with the outputs, None for a case that did not exit 0.
FORK_WORKER = r"""
import io, os, pickle, struct, sys
requests, replies = sys.stdin.buffer, sys.stdout.buffer
while header := requests.read(8):
    source, stdins = pickle.loads(requests.read(struct.unpack("<Q", header)[0]))
    code = compile(source, "solution.py", "exec")
    outputs = []
    for stdin in stdins:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            status = 0
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
            sys.stdout = io.TextIOWrapper(io.FileIO(w, "w"), encoding="utf-8")
            try:
                exec(code, {"__name__": "__main__"})
                sys.stdout.flush()
            except BaseException:
                status = 1
            os._exit(status)
        os.close(w)
        chunks = []
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        outputs.append(b"".join(chunks).decode() if status == 0 else None)
    reply = pickle.dumps(outputs)
    replies.write(struct.pack("<Q", len(reply)) + reply)
    replies.flush()
"""


def fork_per_case(samples: list[dict], workers: int = 2) -> tuple[float, int, float]:
    """One warm interpreter per worker thread that forks every case from the compiled program (FORK_WORKER): the
    cheapest a process per case can be, with no isolation at all. Returns (wall s, cases passed, CPU ms of the
    workers and their cases, by RUSAGE_CHILDREN once they have exited)."""
    import pickle
    import queue
    import struct

    procs = [subprocess.Popen([PYTHON, "-c", FORK_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(workers)]
    idle: queue.Queue[subprocess.Popen] = queue.Queue()
    for proc in procs:
        idle.put(proc)

    def one(sample: dict) -> int:
        cases = sample["problem"]["cases"]
        request = pickle.dumps((sample["code"], [c["stdin"].encode() for c in cases]))
        proc = idle.get()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(struct.pack("<Q", len(request)) + request)
            proc.stdin.flush()
            outputs = pickle.loads(proc.stdout.read(struct.unpack("<Q", proc.stdout.read(8))[0]))
        finally:
            idle.put(proc)
        return sum(out is not None and outputs_match(out, c["stdout"], None)
                   for out, c in zip(outputs, cases, strict=True))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        passed = sum(ex.map(one, samples))
    wall = time.perf_counter() - t
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, passed, ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def per_case(samples: list[dict], tmp: str, workers: int = 2) -> tuple[float, int]:
    """One `python3 solution.py` start per case, `workers` threads."""
    runs = []
    for s in samples:
        path = Path(tmp) / (s["id"].replace("/", "_") + ".py")
        path.write_text(s["code"])
        runs += [(str(path), c) for c in s["problem"]["cases"]]

    def one(run: tuple[str, dict]) -> int:
        path, case = run
        out = subprocess.run([PYTHON, path], input=case["stdin"], capture_output=True, text=True, timeout=60)
        return int(out.returncode == 0 and outputs_match(out.stdout, case["stdout"], None))

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        passed = sum(ex.map(one, runs))
    return time.perf_counter() - t, passed


# -- the kernel's accounting of the server and its sandboxes


def _stat_ms(pid: int) -> tuple[float, float]:
    """(own utime+stime, reaped children's) of pid in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS, (int(fields[13]) + int(fields[14])) * TICK_MS


def _docker_cpu_ms(server_pid: int) -> float:
    tag = f"{os.uname().nodename}:{server_pid}"
    ids = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label=rewardbox.owner={tag}"],
                         capture_output=True, text=True, check=True).stdout.split()
    total = 0.0
    for cid in ids:
        for base in (f"/sys/fs/cgroup/cpuacct/docker/{cid}", f"/sys/fs/cgroup/system.slice/docker-{cid}.scope"):
            try:
                total += int(Path(base, "cpuacct.usage").read_text()) / 1e6
                break
            except OSError:
                try:
                    usage = Path(base, "cpu.stat").read_text().split()
                    total += int(usage[usage.index("usage_usec") + 1]) / 1e3
                    break
                except (OSError, ValueError):
                    continue
    return total


def descendant_pids(pid: int) -> list[int]:
    """Every process under pid, through the children of each of its threads (the pool starts bwrap from a
    worker thread: its sandboxes are that thread's children, not the main thread's)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(k) for k in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def cpu_reading(server_pid: int, backend: str) -> dict[str, float]:
    own, reaped = _stat_ms(server_pid)
    if backend == "docker":
        sandboxes = _docker_cpu_ms(server_pid)
    else:  # bubblewrap: every process under the server (the sandboxes), own and reaped, and those it reaped
        sandboxes = reaped
        for pid in descendant_pids(server_pid):
            try:
                a, b = _stat_ms(pid)
            except (OSError, IndexError):
                continue
            sandboxes += a + b
    return {"server": own, "sandboxes": sandboxes}


# -- rewardbox

CORES = os.cpu_count() or 1


def rewardbox(trainer: rewardbox_client.Client, samples: list[dict], only: str = "all",
              cpu: Callable[[], dict[str, float]] | None = None, per_request: int = 4, grouped: bool = False) -> dict:
    """POST /reward/batch (`binary`) by trainer, the client a trainer sends with (its JSON and HTTP are the client
    CPU measured), `per_request` items a request (the samples of one problem: a GRPO group), 2 requests in flight
    (the body cap: a CodeContests item with large cases is several MB). grouped: the group's tests, profile and
    limits go once in the batch's `defaults` instead of in every item."""
    items = [{"id": s["id"], "code": s["code"], "profile": "binary", "limits": {"timeout_s": 10},
              "tests": {"kind": "io", "cases": _cases(s, only)}} for s in samples]
    batches = [items[i:i + per_request] for i in range(0, len(items), per_request)]
    if grouped:
        assert all(b[0]["tests"] == x["tests"] for b in batches for x in b), "a request's samples share their tests"
    bodies = [{"defaults": {k: b[0][k] for k in ("tests", "profile", "limits")},
               "items": [{"id": x["id"], "code": x["code"]} for x in b]} if grouped else {"items": b}
              for b in batches]
    before = cpu() if cpu else {}
    own = resource.getrusage(resource.RUSAGE_SELF)  # this bench's client: the requests' JSON and HTTP
    t = time.perf_counter()

    def post(body: dict) -> list[dict]:
        return trainer.reward_batch(body["items"], defaults=body.get("defaults"))

    with ThreadPoolExecutor(2) as ex:
        results = [x for part in ex.map(post, bodies) for x in part]
    wall = time.perf_counter() - t
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    client_ms = (own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime) * 1000
    time.sleep(0.5)  # the last clean-ups counted too
    after = cpu() if cpu else {}
    answered: dict[str, int] = {}
    for x in results:
        answered[answered_by(x)] = answered.get(answered_by(x), 0) + 1
    paths = {str((x.get("details") or {}).get("io", {}).get("path")) for x in results}
    cases = sum(len(i["tests"]["cases"]) for i in items)
    return {"wall_s": wall, "items": len(items), "cases": cases, "client_ms": client_ms,
            "passed": sum(x["status"] == "passed" for x in results), "answered": answered, "paths": sorted(paths),
            "failures": [(x["id"], x["status"]) for x in results if x["status"] != "passed"][:5],
            **{f"{k}_ms": after[k] - before[k] for k in after}}


# -- C++


CPP = """#include <cstdio>
#include <vector>
#include <algorithm>
int main() {
  int n; if (scanf("%d", &n) != 1) return 1;
  std::vector<long long> a(n);
  for (auto& x : a) scanf("%lld", &x);
  std::sort(a.begin(), a.end());
  long long s = 0;
  for (int i = 0; i < n; i++) s += a[i] * (i % 7);
  printf("%lld\\n", s);
}
"""


def cpp_item(client: httpx.Client, url: str, cases: int, nonce: str) -> dict | None:
    gxx = shutil.which("g++")
    if gxx is None:
        return None
    rng = random.Random(7)
    stdins = [_n_then(_ints(rng, i % 5 == 0)) for i in range(cases)]
    code = CPP + f"// {nonce}\n"
    item = {"code": code, "language": "cpp", "profile": "binary"}
    runs = []
    with tempfile.TemporaryDirectory(prefix="rewardbox-bench-") as tmp:
        src, binary = Path(tmp, "main.cpp"), Path(tmp, "main")
        src.write_text(code)
        subprocess.run([gxx, "-O2", "-std=c++17", "-o", str(binary), str(src)], check=True)
        expected = [subprocess.run([str(binary)], input=s, capture_output=True, text=True, check=True).stdout
                    for s in stdins]
        cases = [{"stdin": s, "stdout": e} for s, e in zip(stdins, expected, strict=True)]
        first = client.post(f"{url}/reward", json={**item, "tests": {"kind": "io", "cases": cases}}).json()
        for i in range(3):  # the build is cached now: the cases alone. Each run adds copies of its first cases (no
            # result cache can answer), and the host runs that same list, so both run the same mix of cases
            again = cases + cases[:i + 1]
            t = time.perf_counter()
            for c in again:
                subprocess.run([str(binary)], input=c["stdin"], capture_output=True, text=True, check=True)
            host_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            r = client.post(f"{url}/reward", json={**item, "tests": {"kind": "io", "cases": again}}).json()
            runs.append(((time.perf_counter() - t) * 1000, len(again), r, host_ms))
    per_case = statistics.median(ms / n for ms, n, _, _ in runs)
    stage = statistics.median(r["details"]["timings"]["tests_ms"] / n for _, n, r, _ in runs)
    return {"status": first["status"], "compile": (first.get("details") or {}).get("compile"),
            "http_case_ms": per_case, "case_ms": stage,
            "host_case_ms": statistics.median(host / n for _, n, _, host in runs),
            "ratio": statistics.median(r["details"]["timings"]["tests_ms"] / host for _, _, r, host in runs),
            "answered": [answered_by(r) for _, _, r, _ in runs], "statuses": [r["status"] for _, _, r, _ in runs]}


# -- main


def start_server(tree: Path, backend: str) -> tuple[subprocess.Popen, str, str]:
    """`rewardbox serve` of the checkout at tree, on a free port: (process, URL, log path)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+b", prefix="rewardbox-bench-", suffix=".log", delete=False)
    # No sandbox is replaced during the bench (a replaced one takes its processes' CPU with it, unaccounted): the
    # per-case path of earlier checkouts runs one job per case, past the default jobs per sandbox.
    env = {**os.environ, "REWARDBOX_BACKEND": backend, "REWARDBOX_MAX_BODY_MB": "64", "PYTHONPATH": str(tree),
           "REWARDBOX_SANDBOX_MAX_JOBS": "1000000"}
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log.name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=12)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--backend", default="docker", choices=["docker", "bubblewrap"])
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--skip-per-case", action="store_true", help="skip the python-start-per-case baseline")
    ap.add_argument("--against", help="another checkout (e.g. /tmp/base): its server scores the same batch first")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    problems = make_problems(args.problems, args.cases, args.seed)
    nonce = os.urandom(6).hex()
    samples = samples_of(problems, args.samples, nonce)
    large_mb = [len(p["cases"][i]["stdin"]) / 1e6 for p in problems for i in p["large"]]
    print(f"{args.problems} problems x {args.samples} samples x {args.cases} cases = {len(samples) * args.cases}"
          f" case runs; large stdins {min(large_mb):.2f}-{max(large_mb):.2f} MB ({len(large_mb)} per sample set);"
          f" backend {args.backend}; 1-min load {os.getloadavg()[0]:.2f}")

    before = None
    if args.against:  # another checkout's server, the same batch, before this one's (A/B in the same run)
        proc, url, log = start_server(Path(args.against), args.backend)
        try:
            wait_ready(url, proc, log, 300)
            with rewardbox_client.Client(url, timeout=600, retries=0) as trainer:
                rewardbox(trainer, samples_of(problems[:2], 1, nonce + "warm-b"))
                before = rewardbox(trainer, samples_of(problems, args.samples, nonce + "b"),
                                   cpu=lambda: cpu_reading(proc.pid, args.backend))
        finally:
            stop_server(proc)
    proc, url, log = start_server(ROOT, args.backend)
    try:
        wait_ready(url, proc, log, 300)
        cpu = lambda: cpu_reading(proc.pid, args.backend)  # noqa: E731
        with httpx.Client(timeout=600) as client, rewardbox_client.Client(url, timeout=600, retries=0) as trainer:
            rewardbox(trainer, samples_of(problems[:2], 1, nonce + "warm"))  # warm-up: first imports
            ip_wall, ip_passed, ip_cpu = in_process(samples)
            fc_wall, fc_passed, fc_cpu = fork_per_case(samples)
            pc_wall, pc_passed = (None, None) if args.skip_per_case else per_case(samples, tempfile.mkdtemp())
            inline = rewardbox(trainer, samples, cpu=cpu)
            rb = rewardbox(trainer, samples_of(problems, args.samples, nonce + "g"), cpu=cpu, grouped=True)
            small = rewardbox(trainer, samples_of(problems, args.samples, nonce + "s"), "small", cpu)
            large = rewardbox(trainer, samples_of(problems, args.samples, nonce + "l"), "large", cpu)
            _, _, large_host_cpu = in_process(samples, only="large")
            cpp = cpp_item(client, url, 40, nonce)
    finally:
        stop_server(proc)

    n_cases = len(samples) * args.cases
    print()
    print(f"{'executor':<58} {'wall s':>7} {'passed':>11}  rewardbox binary speed-up over it (target)")
    print(f"{'in-process per sample (fork per sample, stdin patched)':<58} {ip_wall:>7.2f} {ip_passed:>5}/{n_cases:<5}"
          f"  {ip_wall / rb['wall_s']:.2f}x (>= {TARGETS['in-process']}x:"
          f" {'MET' if ip_wall / rb['wall_s'] >= TARGETS['in-process'] else 'NOT MET'})")
    if pc_wall is not None:
        print(f"{'one python3 start per case, 2 threads':<58} {pc_wall:>7.2f} {pc_passed:>5}/{n_cases:<5}"
              f"  {pc_wall / rb['wall_s']:.2f}x (>= {TARGETS['per-case']}x:"
              f" {'MET' if pc_wall / rb['wall_s'] >= TARGETS['per-case'] else 'NOT MET'})")
    print(f"{'fork per case from a warm interpreter (no isolation)':<58} {fc_wall:>7.2f} {fc_passed:>5}/{n_cases:<5}"
          f"  {fc_wall / rb['wall_s']:.2f}x; this floor of a process per case is itself {ip_wall / fc_wall:.2f}x"
          f" in-process" + (f", {pc_wall / fc_wall:.2f}x per-case" if pc_wall is not None else "")
          + f"; CPU {fc_cpu / len(samples):.1f} ms/sample")
    if before is not None:
        print(f"{'rewardbox binary, ' + args.against:<58} {before['wall_s']:>7.2f} {before['passed']:>5}/"
              f"{before['items']:<5}items  {ip_wall / before['wall_s']:.2f}x in-process, answered by"
              f" {before['answered']}; server {before['server_ms'] / before['items']:.1f} ms/item, sandboxes"
              f" {before['sandboxes_ms'] / before['items']:.1f} ms/item")
    print(f"{'rewardbox /reward/batch, binary, tests in every item':<58} {inline['wall_s']:>7.2f}"
          f" {inline['passed']:>5}/{inline['items']:<5}items  {ip_wall / inline['wall_s']:.2f}x in-process"
          + (f", {pc_wall / inline['wall_s']:.2f}x per-case" if pc_wall is not None else "")
          + f"; server {inline['server_ms'] / inline['items']:.1f} ms/item, sandboxes"
          f" {inline['sandboxes_ms'] / inline['items']:.1f} ms/item, this client"
          f" {inline['client_ms'] / inline['items']:.1f} ms/item")
    print(f"{'rewardbox /reward/batch, binary, group tests in defaults':<58} {rb['wall_s']:>7.2f} {rb['passed']:>5}/"
          f"{rb['items']:<5}items  answered by {rb['answered']}, io path {rb['paths']}")
    print(f"  where the CPU went in that batch (kernel accounting): server {rb['server_ms'] / rb['items']:.1f} ms/item,"
          f" sandboxes {rb['sandboxes_ms'] / rb['items']:.1f} ms/item ({rb['sandboxes_ms'] / rb['cases']:.2f} ms/case);"
          f" in-process executor {ip_cpu / len(samples):.1f} ms/sample; this bench's client (the requests' JSON and"
          f" HTTP) {rb['client_ms'] / rb['items']:.1f} ms/item; cores busy"
          f" {(rb['server_ms'] + rb['sandboxes_ms'] + rb['client_ms']) / (rb['wall_s'] * 1000 * CORES):.0%} of the"
          f" wall")
    small_case = small["sandboxes_ms"] / small["cases"]
    print(f"  small cases only ({small['cases']}): sandbox CPU {small_case:.2f} ms/case (<= {SMALL_CASE_CPU_MS} ms:"
          f" {'MET' if small_case <= SMALL_CASE_CPU_MS else 'NOT MET'});"
          f" server {small['server_ms'] / small['items']:.1f} ms/item; wall {small['wall_s']:.2f} s,"
          f" passed {small['passed']}/{small['items']}")
    ratio = large["sandboxes_ms"] / max(large_host_cpu, 1e-9)
    print(f"  large cases only ({large['cases']}): sandbox CPU {large['sandboxes_ms'] / large['cases']:.1f} ms/case"
          f" against {large_host_cpu / large['cases']:.1f} ms for the program's own run on the host (in-process):"
          f" {ratio:.2f}x (<= {LARGE_CASE_RATIO}x: {'MET' if ratio <= LARGE_CASE_RATIO else 'NOT MET'});"
          f" passed {large['passed']}/{large['items']}")
    for row in (rb, small, large):
        if row["failures"]:
            print(f"  FAIL {row['failures']}")
    if cpp:
        r = cpp["ratio"]
        print(f"C++ io item, 40 cases: {cpp['status']}, compile {cpp['compile']}; then {cpp['case_ms']:.2f} ms per case"
              f" (the tests stage / cases, build cached; over HTTP {cpp['http_case_ms']:.2f}) against"
              f" {cpp['host_case_ms']:.2f} ms running the binary on the host: {r:.2f}x"
              f" (<= {CPP_CASE_RATIO}x: {'MET' if r <= CPP_CASE_RATIO else 'NOT MET'});"
              f" answered by {cpp['answered']}, {cpp['statuses']}")
    print(f"1-min load {os.getloadavg()[0]:.2f} at end; bench total {time.perf_counter() - t0:.0f} s")
    print(json.dumps({"in_process_s": ip_wall, "per_case_s": pc_wall, "fork_per_case_s": fc_wall,
                      "rewardbox_s": rb["wall_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
