"""A Python io item compiled once (runner._case_zygote): its cases fork from a zygote that compiled the program, for
real on both backends. Every case gets the verdict it gets on its own (a single case runs the path before this one:
a fork of the plain zygote that compiles the program itself), and no case can leave state for a later one, not
even by writing into the compiled program's memory or by signalling the process its cases fork from."""

from __future__ import annotations

from graders.tests import job_limits, run_tests
from service.models import IOTests

LIMITS = job_limits(timeout_s=2, memory_mb=256, max_item_s=60)


def io(*cases: tuple[str, str]) -> IOTests:
    return IOTests(kind="io", cases=[{"stdin": i, "stdout": o} for i, o in cases])


async def verdicts_alone_and_together(pool, code: str, cases: list[tuple[str, str]]) -> tuple[list, list, str]:
    together = await run_tests(pool, code, io(*cases), LIMITS)
    alone = [(await run_tests(pool, code, io(case), LIMITS)).verdicts[0] for case in cases]
    return ([(v.status, v.message) for v in together.verdicts], [(v.status, v.message) for v in alone],
            together.details["io"]["path"])


DISPATCH = """import os, sys
what = sys.stdin.readline().strip()
if what == "loop":
    while True:
        pass
if what == "memory":
    hog = bytearray(400 << 20)
if what == "crash":
    raise ValueError("boom")
if what == "exit3":
    sys.exit(3)
if what == "flood":
    sys.stdout.write("x" * (4 << 20))
if what == "parent":
    try:
        os.kill(os.getppid(), 9)
    except OSError as e:
        print("kill refused", e.errno)
print(what)
"""


async def test_each_case_gets_the_verdict_it_gets_alone(pool):
    cases = [("a", "a"), ("wrong", "right"), ("loop", ""), ("b", "b"), ("memory", ""), ("crash", ""),
             ("exit3", ""), ("flood", ""), ("partial\n" + "9 " * 200_000, "partial"), ("parent", "parent"),
             ("c", "c")]
    together, alone, path = await verdicts_alone_and_together(pool, DISPATCH, cases)
    assert path == "cases_job+compiled_once"
    assert [s for s, _ in together] == ["passed", "failed", "timeout", "passed", "memory_limit", "runtime_error",
                                        "runtime_error", "output_limit", "passed", "failed", "passed"], together
    assert together == alone


STATE = """import ctypes, json, os, sys
import collections
WORD = "pristine-constant"
counter = getattr(json, "rewardbox_counter", 0) + 1
json.rewardbox_counter = counter  # a module the zygote imported: a case's change stays in the case
collections.seen = getattr(collections, "seen", []) + [counter]
print(WORD, counter, collections.seen, os.environ.get("LEFT"), os.path.exists("left.txt"), flush=True)
os.environ["LEFT"] = "yes"
open("left.txt", "w").write("x")
if os.fork() == 0:  # a background process that outlives the case
    os.setsid()
    import time
    time.sleep(30)
# write into the compiled program's own constant, in this process's memory
ctypes.memmove(id(WORD) + sys.getsizeof(WORD) - len(WORD) - 1, b"POISONED", 8)
"""


async def test_each_case_starts_from_the_pristine_compiled_program(pool):
    expected = "pristine-constant 1 [1] None False\n"
    outcome = await run_tests(pool, STATE, io(*[("", expected)] * 4), LIMITS)
    assert outcome.details["io"]["path"] == "cases_job+compiled_once"
    assert [v.status for v in outcome.verdicts] == ["passed"] * 4, outcome.verdicts


async def test_the_compile_done_once_counts_in_the_items_cpu(pool):
    # a long source whose compile costs well over a case's run: the accounted CPU must hold it
    code = "x = 0\n" + "".join(f"x += {i} * {i}\n" for i in range(40_000)) + "print(input())\n"
    assert len(code) < 1 << 20  # compiled once (larger sources compile in each case)
    limits = job_limits(timeout_s=10, memory_mb=512, max_item_s=60)
    outcome = await run_tests(pool, code, io(("a", "a"), ("b", "b")), limits, account=True)
    assert [v.status for v in outcome.verdicts] == ["passed", "passed"], outcome.verdicts
    assert outcome.details["io"]["path"] == "cases_job+compiled_once"
    cases_cpu = sum(v.cpu_ms or 0.0 for v in outcome.verdicts)
    assert outcome.usage is not None and outcome.usage["cpu_ms"] > cases_cpu, (outcome.usage, cases_cpu)
