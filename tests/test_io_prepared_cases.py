"""io cases forked from a prepared case zygote (zygotes._case_zygote, job_lockdown.prepare_main), locked down as the
job (locked_cases.py), for real on both backends: what a case's program sees of its process (standard streams, sys,
environment, descriptors, modules, limits) is what the same program sees when it runs alone (one case: a fork of the
lean zygote that sets itself up), and the interpreter's exit semantics (threads joined, atexit, flushes, errors as
the interpreter prints them) hold."""

from __future__ import annotations

from sandboxes import CasesJob, Limits

LIMITS = Limits(wall_s=5, cpu_s=5, total_s=60)

PROBE = r"""import os, resource, stat, sys
data = sys.stdin.read()
first = {
    "input": data,
    "stdin": [sys.stdin.seekable(), sys.stdin.isatty(), sys.stdin.encoding, sys.stdin.buffer.raw.name,
              sys.stdin.buffer.tell(), stat.S_ISREG(os.fstat(0).st_mode), sys.stdin.readable()],
    "stdout": [sys.stdout.seekable(), sys.stdout.isatty(), sys.stdout.encoding, sys.stdout.line_buffering,
               sys.stdout.buffer.raw.name, stat.S_ISFIFO(os.fstat(1).st_mode), sys.stderr.errors],
    "sys": [sys.argv, sys.path[0] == os.getcwd(), __name__, __file__ == os.path.join(os.getcwd(), "main.py"),
            sorted(os.environ)],
    "fds": sorted(os.listdir("/proc/self/fd")),
    "ours": sorted(m for m in sys.modules if m in {"runner", "zygotes", "job_lockdown", "job_process", "wire",
                                                   "protocol", "cases", "seccomp", "landlock", "usage", "cleanup"}),
    "threading": "threading" in sys.modules,
    "ids": [os.getuid() == os.geteuid() == os.getgid() != 0, os.getgroups()],  # the uid: each sandbox its own
    # the process limit as room: a locked case zygote (locked_cases.py) is one of the uid's processes, so its cases'
    # limit is one higher, for the same number of processes the program may start
    "limits": [line for line in open("/proc/self/limits").read().splitlines()[1:] if "processes" not in line],
    "process_room": resource.getrlimit(resource.RLIMIT_NPROC)[0] - sum(
        1 for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}/status")
        and f"Uid:\t{os.getuid()}\t" in open(f"/proc/{p}/status").read()),
}
sys.stdin.seek(0)
first["reread"] = sys.stdin.read() == data
print(repr(first))
"""


async def _stdouts(pool, code: str, stdins: list[str]) -> list[str]:
    result = await pool.run(CasesJob(program={"code": code}, stdins=stdins, limits=LIMITS))
    assert result.status == "ok", result
    return [case["stdout"] for case in result.cases]


async def test_a_case_sees_the_process_a_lone_run_sees(pool):
    stdins = ["first input\n", "", "x" * 70_000 + "\n", "\u00e9t\u00e9\n"]
    together = await _stdouts(pool, PROBE, stdins)
    alone = [(await _stdouts(pool, PROBE, [stdin]))[0] for stdin in stdins]
    assert together == alone
    for stdin, out in zip(stdins, together, strict=True):
        seen = eval(out)  # noqa: S307 - our own probe's repr
        assert seen["input"] == stdin and seen["reread"]
        assert seen["fds"] == ["0", "1", "2", "3"], seen["fds"]  # 3: the listing's own
        assert seen["ours"] == [] and not seen["threading"]
        assert seen["ids"] == [True, []]


EXIT_SEMANTICS = r"""import atexit, sys, threading, time
atexit.register(lambda: print("atexit ran", flush=False))
def late():
    time.sleep(0.2)
    print("thread done", flush=False)
threading.Thread(target=late).start()
sys.stdout.write("no newline at the end; ")
what = sys.stdin.read().strip()
if what == "raise":
    raise KeyError(what)
if what == "exit":
    sys.exit("bye")
"""


async def test_the_interpreters_exit_semantics_hold(pool):
    stdins = ["ok", "raise", "exit", "ok"]
    result = await pool.run(CasesJob(program={"code": EXIT_SEMANTICS}, stdins=stdins, limits=LIMITS))
    alone = [(await pool.run(CasesJob(program={"code": EXIT_SEMANTICS}, stdins=[s], limits=LIMITS))).cases[0]
             for s in stdins]
    for case, lone in zip(result.cases, alone, strict=True):
        assert (case["stdout"], case["stderr"], case["exit_code"]) == (lone["stdout"], lone["stderr"],
                                                                      lone["exit_code"])
    ok, raised, exited, _ = result.cases
    assert ok["stdout"] == "no newline at the end; thread done\natexit ran\n" and ok["exit_code"] == 0
    assert raised["exit_code"] == 1 and raised["stderr"].startswith("Traceback (most recent call last):\n")
    assert "KeyError: 'raise'" in raised["stderr"] and "rewardbox" not in raised["stderr"]
    assert exited["exit_code"] == 1 and exited["stderr"] == "bye\n"


async def test_a_program_that_does_not_compile_fails_in_every_case_as_alone(pool):
    code = "print('a'\nx = = 1\n"
    result = await pool.run(CasesJob(program={"code": code}, stdins=["", ""], limits=LIMITS))
    lone = (await pool.run(CasesJob(program={"code": code}, stdins=[""], limits=LIMITS))).cases[0]
    for case in result.cases:
        assert (case["stderr"], case["exit_code"]) == (lone["stderr"], lone["exit_code"])
        assert case["exit_code"] == 1 and "SyntaxError" in case["stderr"] and "rewardbox" not in case["stderr"]
