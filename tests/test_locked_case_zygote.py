"""A cases job's zygote locked down as the job (sandboxes/inside/locked_cases.py), attacked for real on both
backends by the cases it starts. It shares their uid, so a case can kill it, stop it, or change what the kernel
lets any process of the uid change (rlimits by prlimit, nice, scheduling policy, CPU affinity, I/O priority): none
of it may reach another case's verdict or limits, and none may turn the item into a fault of ours. Each attack is
followed by a probe case whose output must be what the probe prints when it runs alone."""

from __future__ import annotations

import pytest
import pytest_asyncio

from graders.tests import job_limits, run_tests
from sandboxes.builds import Builder
from service.models import IOTests

LIMITS = job_limits(timeout_s=2, memory_mb=256, max_item_s=90)

PY_ATTACKS = r"""import ctypes, os, resource, signal, sys
what = sys.stdin.readline().strip()
z = os.getppid()
LIMITED = [resource.RLIMIT_NOFILE, resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_STACK,
           resource.RLIMIT_FSIZE, resource.RLIMIT_CORE]
libc = ctypes.CDLL(None, use_errno=True)
def state():
    return ([resource.getrlimit(r) for r in LIMITED], os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
            sorted(os.sched_getaffinity(0)), libc.syscall(252, 1, 0))
try:
    if what == "kill":
        os.kill(z, signal.SIGKILL)
    elif what == "killall":
        os.kill(-1, signal.SIGKILL)
    elif what == "stop":
        os.kill(z, signal.SIGSTOP)
    elif what == "prlimit":
        resource.prlimit(z, resource.RLIMIT_NOFILE, (8, 8))
        resource.prlimit(z, resource.RLIMIT_AS, (96 << 20, 96 << 20))
    elif what == "raise":  # soft limits up to their hard ones
        for r in LIMITED:
            resource.prlimit(z, r, (resource.getrlimit(r)[1], resource.getrlimit(r)[1]))
    elif what == "nice":
        os.setpriority(os.PRIO_PROCESS, z, 19)
    elif what == "sched":
        os.sched_setscheduler(z, os.SCHED_IDLE, os.sched_param(0))
    elif what == "affinity":
        os.sched_setaffinity(z, {min(os.sched_getaffinity(0))})
    elif what == "snoop":  # the zygote's memory, environment, mappings, descriptors, working directory
        read = []
        for name, look in (("mem", lambda p: open(p, "rb").read(1)), ("environ", lambda p: open(p, "rb").read(1)),
                           ("maps", lambda p: open(p, "rb").read(1)), ("fd", os.listdir), ("cwd", os.readlink)):
            try:
                look(f"/proc/{z}/{name}")
                read.append(name)
            except OSError:
                pass
        print("read", read)
    elif what == "ioprio":
        if libc.syscall(251, 1, z, (2 << 13) | 7) != 0:
            raise OSError(ctypes.get_errno(), "ioprio_set")
    print("attacked")
except OSError as e:
    print("refused", e.errno)
print(state())
"""

PROBE = "probe"


def io(*cases: tuple[str, str]) -> IOTests:
    return IOTests(kind="io", cases=[{"stdin": i, "stdout": o} for i, o in cases])


async def _alone(pool, code: str, stdin: str, language: str = "python", builder=None) -> str:
    """What the program prints for stdin run as a one-case item (no case zygote: the lean zygote's fork)."""
    outcome = await run_tests(pool, code, io((stdin, "")), LIMITS, language, builder, 60.0)
    assert outcome.details["io"]["locked_cases"] == 0, outcome.details
    return outcome.verdicts[0].message


async def _attacked(pool, code: str, attack: str, language: str = "python", builder=None):
    """An item whose second case attacks the zygote and whose other cases probe: (outcome, what a probe prints
    alone). Each attack in an item of its own: the first that reaches the zygote loses it for the rest."""
    probe_alone = await _alone(pool, code, PROBE, language, builder)
    cases = [(PROBE, ""), (attack, ""), (PROBE, ""), (PROBE, "")]
    outcome = await run_tests(pool, code, io(*cases), LIMITS, language, builder, 90.0)
    assert outcome.status != "infra_error", outcome.message
    assert [outcome.verdicts[i].message for i in (0, 2, 3)] == [probe_alone] * 3, (attack, outcome.verdicts)
    return outcome


@pytest.mark.parametrize("attack", ["prlimit", "raise", "nice", "sched", "affinity", "ioprio"])
async def test_a_case_that_changes_its_zygote_changes_no_later_case(pool, attack):
    outcome = await _attacked(pool, PY_ATTACKS, attack)
    assert outcome.verdicts[1].message.startswith("wrong output: 'attacked"), outcome.verdicts[1]  # it did reach it
    assert outcome.details["io"]["locked_cases"] == 2, outcome.details  # the rest ran from the lean zygote


@pytest.mark.parametrize("attack", ["kill", "killall", "stop"])
async def test_a_case_that_kills_or_stops_its_zygote_gets_its_own_verdict_and_the_next_cases_theirs(pool, attack):
    outcome = await _attacked(pool, PY_ATTACKS, attack)
    # its end went unreported: it ran again from the lean zygote, as alone (where the attack is refused)
    assert outcome.verdicts[1].message == await _alone(pool, PY_ATTACKS, attack), outcome.verdicts[1]
    assert outcome.details["io"]["locked_cases"] == 1, outcome.details


FILES = """import os
print(os.path.exists("/tmp/left"), os.path.exists("left"), os.path.exists("/mnt/left"), input())
for path in ("/tmp/left", "left", "/mnt/left"):
    open(path, "w").write("x")
"""


async def test_a_case_cannot_read_its_zygotes_memory_environment_or_descriptors(pool):
    outcome = await _attacked(pool, PY_ATTACKS, "snoop")
    assert outcome.verdicts[1].message.startswith("wrong output: 'read []"), outcome.verdicts[1]
    assert outcome.details["io"]["locked_cases"] == 4, outcome.details  # nothing changed: the zygote stays


async def test_a_case_that_only_writes_files_keeps_the_zygote_and_leaves_the_next_case_none(pool):
    cases = [(str(i), f"False False False {i}") for i in range(6)]
    outcome = await run_tests(pool, FILES, io(*cases), LIMITS)
    assert outcome.status == "passed", outcome.verdicts
    assert outcome.details["io"]["locked_cases"] == 6  # the files wiped, the zygote kept


async def test_cases_without_attacks_all_run_from_the_locked_zygote(pool):
    cases = [(str(i), str(i)) for i in range(12)]
    outcome = await run_tests(pool, "print(input())", io(*cases), LIMITS)
    assert outcome.status == "passed"
    assert outcome.details["io"] == {"path": "cases_job+compiled_once", "jobs": 1, "locked_cases": 12}


CPP_ATTACKS = r"""#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>
int main() {
  char w[32] = {0};
  if (scanf("%31s", w) != 1) return 2;
  pid_t z = getppid();
  int rc = 0;
  if (!strcmp(w, "kill")) rc = kill(z, SIGKILL);
  if (!strcmp(w, "killall")) rc = kill(-1, SIGKILL);
  if (!strcmp(w, "stop")) rc = kill(z, SIGSTOP);
  if (!strcmp(w, "prlimit")) { struct rlimit l = {8, 8}; rc = prlimit(z, RLIMIT_NOFILE, &l, nullptr); }
  if (!strcmp(w, "nice")) rc = setpriority(PRIO_PROCESS, z, 19);
  printf("%s %d\n", w, rc);
  struct rlimit n, a, c;
  getrlimit(RLIMIT_NOFILE, &n); getrlimit(RLIMIT_AS, &a); getrlimit(RLIMIT_CPU, &c);
  printf("nofile %ld as %ld cpu %ld/%ld nice %d\n", (long)n.rlim_cur, (long)a.rlim_cur, (long)c.rlim_cur,
         (long)c.rlim_max, getpriority(PRIO_PROCESS, 0));
}
"""


@pytest_asyncio.fixture(scope="module")
async def builder(pool):
    return Builder(pool)


@pytest.mark.parametrize("attack", ["kill", "killall", "stop", "prlimit", "nice"])
async def test_no_attack_on_a_compiled_programs_spawner_reaches_another_case(pool, builder, attack):
    outcome = await _attacked(pool, CPP_ATTACKS, attack, "cpp", builder)
    assert outcome.details["io"]["path"] == "cases_job"
    if attack in ("prlimit", "nice"):  # reached the spawner: the rest ran without it
        assert outcome.verdicts[1].message.startswith(f"wrong output: '{attack} 0"), outcome.verdicts[1]
        assert outcome.details["io"]["locked_cases"] == 2, outcome.details
    else:  # lost the spawner before it reported this case: it ran again, as alone
        got = outcome.verdicts[1].message
        assert got == await _alone(pool, CPP_ATTACKS, attack, "cpp", builder), got
        assert outcome.details["io"]["locked_cases"] == 1, outcome.details


async def test_a_compiled_programs_cases_all_run_from_the_locked_spawner(pool, builder):
    code = "#include <cstdio>\nint main() { int x; scanf(\"%d\", &x); printf(\"%d\\n\", x * 2); }\n"
    cases = [(str(i), str(2 * i)) for i in range(12)]
    outcome = await run_tests(pool, code, io(*cases), LIMITS, "cpp", builder, 60.0)
    assert outcome.status == "passed", outcome.verdicts
    assert outcome.details["io"] == {"path": "cases_job", "jobs": 1, "locked_cases": 12}
