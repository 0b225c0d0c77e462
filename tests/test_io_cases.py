"""io tests as one cases job per item (graders/io_cases.py, sandboxes/inside/cases.py), for real on both backends:
each case keeps its own verdict and limits, a case cannot reach a later case of the same item through a process or
a file it leaves, the expected outputs never travel to the sandbox, large inputs and outputs go through, a
compiled program is built once for all its cases, and the item's time cap ends the cases it leaves no time for."""

from __future__ import annotations

import json
import secrets

import pytest_asyncio

from graders.tests import job_limits, run_tests
from sandboxes import Job, Result
from sandboxes.builds import Builder
from service.models import IOTests

LIMITS = job_limits(timeout_s=2, memory_mb=256, max_item_s=60)


class Recording:
    """A real pool that also keeps every job it was given (what left the host for the sandbox)."""

    def __init__(self, pool) -> None:
        self.pool, self.size, self.jobs = pool, pool.size, []

    async def run(self, job: Job) -> Result:
        self.jobs.append(job)
        return await self.pool.run(job)


def io(*cases: tuple[str, str]) -> IOTests:
    return IOTests(kind="io", cases=[{"stdin": i, "stdout": o} for i, o in cases])


@pytest_asyncio.fixture(scope="module")
async def builder(pool):
    return Builder(pool)


DISPATCH = """import sys
what = sys.stdin.read().strip()
if what == "loop":
    while True:
        pass
if what == "memory":
    hog = bytearray(400 << 20)
if what == "crash":
    raise ValueError("boom")
if what == "segv":
    import ctypes
    ctypes.string_at(0)
print(what)
"""


async def test_each_case_of_an_item_keeps_its_own_verdict(pool):
    tests = io(("a", "a"), ("loop", ""), ("b", "b"), ("memory", ""), ("crash", ""), ("segv", ""), ("c", "c"))
    outcome = await run_tests(Recording(pool), DISPATCH, tests, LIMITS)
    assert [v.status for v in outcome.verdicts] == [
        "passed", "timeout", "passed", "memory_limit", "runtime_error", "runtime_error", "passed"], outcome.verdicts
    assert outcome.status == "memory_limit"  # the worst failure of the item (graders/outcome.py FAILURE_ORDER)


async def test_all_cases_of_an_item_travel_as_one_job(pool):
    recording = Recording(pool)
    outcome = await run_tests(recording, "print(input())", io(*[(str(i), str(i)) for i in range(30)]), LIMITS)
    assert outcome.status == "passed"
    assert [job.op for job in recording.jobs] == ["cases"]
    assert outcome.details["io"] == {"path": "cases_job+compiled_once", "jobs": 1, "locked_cases": 30}


PLANT = """import os, sys, time
if sys.stdin.read().strip() == "plant":
    for path in ("left.txt", "/tmp/left.txt", "/mnt/left.txt"):
        open(path, "w").write("planted")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # a daemon that outlives the case and keeps writing where the next case looks
            while True:
                open("/tmp/late.txt", "w").write("late")
                time.sleep(0.01)
        os._exit(0)
    time.sleep(0.1)
    print("planted")
else:
    me = os.getuid()
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()
              and os.stat(f"/proc/{p}").st_uid == me]
    seen = [p for p in ("left.txt", "/tmp/left.txt", "/mnt/left.txt", "/tmp/late.txt") if os.path.exists(p)]
    print("clean" if not others and not seen else f"others={others} seen={seen}")
"""


async def test_a_process_or_file_left_by_a_case_cannot_reach_a_later_case(pool):
    outcome = await run_tests(pool, PLANT, io(("plant", "planted"), ("look", "clean"), ("plant", "planted"),
                                              ("look", "clean")), LIMITS)
    assert [v.passed for v in outcome.verdicts] == [True, True, True, True], outcome.verdicts


PEEK = """import os
found = []
for root in (".", "/tmp", "/mnt", "/scratch"):
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                found.append(open(os.path.join(folder, name), errors="replace").read())
            except OSError:
                pass
found.append(repr(dict(os.environ)))
found.append(input())
print("\\n".join(found))
"""


async def test_the_expected_output_never_travels_to_the_sandbox(pool):
    secret = "expected-" + secrets.token_hex(16)
    recording = Recording(pool)
    outcome = await run_tests(recording, PEEK, io(("hello", secret), ("again", secret)), LIMITS)
    assert [v.passed for v in outcome.verdicts] == [False, False]
    assert all(secret not in json.dumps(job.to_wire()) for job in recording.jobs)
    assert secret not in outcome.stdout


async def test_large_inputs_and_outputs_pass_through_and_an_output_flood_is_that_cases_own_failure(pool):
    big = "".join(f"{i} {i * 7}\n" for i in range(70_000))  # ~0.9 MB in, the same out (under the 1 MiB cap)
    assert len(big) < LIMITS.output_bytes
    code = "import sys\ndata = sys.stdin.read()\nsys.stdout.write('x' * (4 << 20) if data == 'flood' else data)\n"
    outcome = await run_tests(pool, code, io((big, big), ("small\n", "small\n"), ("flood", ""), (big, big)), LIMITS)
    assert [v.status for v in outcome.verdicts] == ["passed", "passed", "output_limit", "passed"], outcome.verdicts


async def test_the_item_time_cap_ends_the_cases_it_leaves_no_time_for(pool):
    limits = job_limits(timeout_s=1, memory_mb=256, max_item_s=1.5)
    outcome = await run_tests(pool, DISPATCH, io(("loop", ""), ("loop", ""), ("a", "a")), limits)
    assert [v.status for v in outcome.verdicts] == ["timeout", "timeout", "timeout"], outcome.verdicts
    assert outcome.wall_ms < 3000


CPP_SUM = """#include <cstdio>
int main() { long long a, b, s = 0; while (scanf("%lld %lld", &a, &b) == 2) s += a * b; printf("%lld\\n", s); }
"""


async def test_a_compiled_program_is_built_once_for_its_forty_cases(pool, builder):
    recording = Recording(pool)
    cases = [(f"{i} {i + 1}\n{i} 2\n", f"{i * (i + 1) + 2 * i}\n") for i in range(40)]
    outcome = await run_tests(recording, CPP_SUM + f"// {secrets.token_hex(8)}\n", io(*cases), LIMITS, "cpp",
                              Builder(recording), 60.0)
    assert outcome.status == "passed", (outcome.message, outcome.verdicts[:3])
    compiles = [job for job in recording.jobs if "compile.py" in json.dumps(job.to_wire())]
    assert len(compiles) == 1
    assert [job.op for job in recording.jobs if job not in compiles][-1:] == ["cases"]  # after the compile (and the
    assert sum(job.op == "cases" for job in recording.jobs) == 1  # compiler's version): every case in one job
    assert len(outcome.verdicts) == 40
    assert outcome.details["io"] == {"path": "cases_job", "jobs": 1, "locked_cases": 40}


CPP_DISPATCH = """#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdlib>
#include <vector>
int main() {
  char w[32] = {0};
  if (scanf("%31s", w) != 1) return 2;
  if (!strcmp(w, "loop")) for (volatile unsigned long i = 0;; i++) {}
  if (!strcmp(w, "memory")) { std::vector<char> v(1UL << 30, 1); printf("%d\\n", v[12345]); }
  if (!strcmp(w, "crash")) abort();
  if (!strcmp(w, "tamper")) {  // the binary the next cases run: remove, overwrite, replace, widen it
    unlink("main");
    FILE* f = fopen("main", "w");
    if (f) { fputs("#!/bin/sh\\necho tampered\\n", f); fclose(f); }
    chmod("main", 0777);
    FILE* g = fopen("/tmp/evil", "w");
    if (g) { fputs("#!/bin/sh\\necho tampered\\n", g); fclose(g); }
    chmod("/tmp/evil", 0777);
    rename("/tmp/evil", "main");
    symlink("/tmp/evil", "main2");
  }
  puts(w);
}
"""


async def test_a_compiled_programs_cases_keep_their_own_verdicts(pool, builder):
    tests = io(("a", "a"), ("loop", ""), ("memory", ""), ("crash", ""), ("b", "b"))
    outcome = await run_tests(pool, CPP_DISPATCH, tests, LIMITS, "cpp", builder, 60.0)
    assert [v.status for v in outcome.verdicts] == [
        "passed", "timeout", "memory_limit", "runtime_error", "passed"], outcome.verdicts


REOPEN = """import os, sys
first = sys.stdin.read()
again = open("/dev/stdin").read()
try:
    os.write(0, b"changed")
    wrote = "wrote"
except OSError:
    wrote = "read-only"
print(first == again, wrote, first.strip())
"""


async def test_a_case_may_reopen_its_stdin_but_not_change_it(pool):
    outcome = await run_tests(pool, REOPEN, io(("one\n", "True read-only one"), ("two\n", "True read-only two")),
                              LIMITS)
    assert [v.passed for v in outcome.verdicts] == [True, True], outcome.verdicts


async def test_a_case_cannot_change_the_binary_later_cases_run(pool, builder):
    outcome = await run_tests(pool, CPP_DISPATCH, io(("tamper", "tamper"), ("a", "a"), ("tamper", "tamper"),
                                                     ("b", "b")), LIMITS, "cpp", builder, 60.0)
    assert [v.passed for v in outcome.verdicts] == [True, True, True, True], outcome.verdicts


async def test_cases_whose_output_would_overflow_one_reply_go_on_in_another_job(pool):
    """Every byte of \\x01 takes 6 characters in the reply's JSON: 14 outputs of 0.9 MB cannot come back at once."""
    recording = Recording(pool)
    blob = "\x01" * 900_000
    code = "import sys\nsys.stdout.write('\\x01' * 900_000 + sys.stdin.read())\n"
    outcome = await run_tests(recording, code, io(*[(str(i), blob + str(i)) for i in range(14)]), LIMITS)
    assert [v.passed for v in outcome.verdicts] == [True] * 14, [v.status for v in outcome.verdicts]
    assert [job.op for job in recording.jobs] == ["cases", "cases"]
    assert outcome.details["io"] == {"path": "cases_job+compiled_once", "jobs": 2, "locked_cases": 14}


CPP_LEAVE = """#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <unistd.h>
#include <sys/stat.h>
#include <vector>
static int others() {  // processes of this uid besides this one and the zygote that spawned it (locked_cases)
  int n = 0;
  DIR* d = opendir("/proc");
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid() || atoi(e->d_name) == getppid())
      continue;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "Uid:", 4)) { if ((unsigned)atoi(line + 4) == getuid()) n++; break; }
    fclose(f);
  }
  closedir(d);
  return n;
}
int main() {
  char w[32] = {0};
  if (scanf("%31s", w) != 1) return 2;
  if (!strcmp(w, "leave")) {  // a file here and in /tmp, a background process that outlives the case
    fclose(fopen("left.txt", "w"));
    fclose(fopen("/tmp/left.txt", "w"));
    fflush(stdout);
    if (fork() == 0) { setsid(); close(1); close(2); sleep(30); _exit(0); }
  }
  if (!strcmp(w, "memory")) { std::vector<char> v(1UL << 30, 1); printf("%d\\n", v[12345]); }
  struct stat st;
  printf("%s files %d %d others %d\\n", w, stat("left.txt", &st) == 0, stat("/tmp/left.txt", &st) == 0, others());
}
"""


async def test_a_compiled_case_leaves_no_process_file_or_memory_to_the_next(pool, builder):
    # each case of a compiled program is spawned by the job's locked case zygote (locked_cases.py): what one case
    # forks, writes or exhausts is gone before the next case starts (a case that leaves anything loses that zygote:
    # the rest fork from the lean zygote, as they did before, and see the same)
    clean = ("look", "look files 0 0 others 0")
    left = ("leave", "leave files 1 1 others 1")
    outcome = await run_tests(pool, CPP_LEAVE, io(left, clean, ("memory", ""), clean, left, clean), LIMITS, "cpp",
                              builder, 60.0)
    assert [v.status for v in outcome.verdicts] == [
        "passed", "passed", "memory_limit", "passed", "passed", "passed"], outcome.verdicts
