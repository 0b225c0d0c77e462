"""Benchmark: the persistent pylint server against a fresh fork of the warm linter, on HumanEval, in the sandbox.

    .venv/bin/python bench/lint_agreement.py [--backend docker] [--n 164]

One run job inside a real sandbox (the image's pylint, the sandbox's own lint.py and lint_server.py) lints every
HumanEval canonical solution twice: in a child forked from a warmed-up linter per program (how Python lint jobs
ran before), and one after another in one process with lint_server's clean-up between programs (how they run now),
forward and then in reverse order. Prints how many results are identical and the CPU per program of each way
(the fork's child from wait4, the in-process lint from process_time). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandboxes import Limits, RunJob, SandboxPool, choose_backend  # noqa: E402
from service.benchmark import humaneval_problems  # noqa: E402

IN_SANDBOX = r'''
import json, os, statistics, sys, time
sys.path.insert(0, "/opt/rewardbox")
import lint, lint_server
lint.warm_up()
from astroid import MANAGER
keep = set(MANAGER.astroid_cache)
programs = json.load(open("programs.json"))
path = os.path.join(os.getcwd(), "solution.py")
forked, fork_cpu = [], []
for code, roots in programs:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        data = json.dumps(lint.lint(code, path, roots)).encode()
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 1 << 16):
        out += chunk
    os.close(r)
    _, _, ru = os.wait4(pid, 0)
    forked.append(json.loads(out))
    fork_cpu.append((ru.ru_utime + ru.ru_stime) * 1000)
same, server_cpu = [], []
for order in (list(range(len(programs))), list(range(len(programs)))[::-1]):
    n = 0
    for i in order:
        t = time.process_time()
        got = json.loads(json.dumps(lint.lint(programs[i][0], path, programs[i][1])))
        lint_server._forget_program(keep)
        server_cpu.append((time.process_time() - t) * 1000)
        n += got == forked[i]
    same.append(n)
print(json.dumps({"programs": len(programs), "identical_forward": same[0], "identical_reverse": same[1],
                  "fork_cpu_ms_p50": statistics.median(fork_cpu), "server_cpu_ms_p50": statistics.median(server_cpu)}))
'''


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="docker")
    ap.add_argument("--n", type=int, default=164)
    a = ap.parse_args()
    programs = [[p["prompt"] + p["canonical_solution"], [p["entry_point"]]]
                for p in list(humaneval_problems().values())[: a.n]]
    async with SandboxPool(choose_backend(a.backend), size=1, acquire_timeout_s=120) as pool:
        result = await pool.run(RunJob(program={"code": IN_SANDBOX}, files={"programs.json": json.dumps(programs)},
                                       limits=Limits(wall_s=300, total_s=300, cpu_s=300, memory_mb=2048)))
    if result.status != "ok":
        print(f"the run job ended {result.status}: {result.error or ''}\n{result.stderr[-2000:]}")
        sys.exit(1)
    r = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"backend {a.backend}: {r['programs']} HumanEval programs; persistent server == fresh fork:"
          f" {r['identical_forward']} (forward order), {r['identical_reverse']} (reverse order)")
    print(f"  CPU per program, p50: fresh fork {r['fork_cpu_ms_p50']:.1f} ms,"
          f" persistent {r['server_cpu_ms_p50']:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
