"""Attacks of an earlier round that the sandbox contains, kept as regression tests, each run for real on both
backends: compile-time reads of host and sandbox files, device and stdin includes, nesting and template bombs
against compilers and linters, x32 and int 0x80 system calls, raw system calls from Go, IPC left for the next job,
rlimit / prctl / scheduler / OOM-score escalation, and bash's /proc/<pid>/fd tricks."""

from __future__ import annotations

import asyncio
import json
import platform
import secrets
from pathlib import Path

import pytest
import pytest_asyncio

from graders.quality import QualityGrader
from graders.tests import job_limits, run_tests
from sandboxes import Limits, RunJob, SandboxPool, Status
from sandboxes.builds import Builder
from service.models import IOTests

from .pool_helpers import settle

LIMITS = job_limits(timeout_s=5, memory_mb=256, max_item_s=60)
ONE_CASE = IOTests(kind="io", cases=[{"stdin": "", "stdout": "x\n"}])
RUN_LIMITS = Limits(wall_s=5, total_s=10, cpu_s=5, memory_mb=256)
X86_64 = platform.machine() in ("x86_64", "AMD64")


@pytest_asyncio.fixture(scope="module")
async def builder(pool):
    return Builder(pool)


async def compile_and_run(pool, builder, language, code, compile_timeout_s=20.0):
    return await run_tests(pool, code, ONE_CASE, LIMITS, language, builder, compile_timeout_s)


async def assert_pool_serves(pool: SandboxPool, replaced: int) -> None:
    await settle(pool)
    results = await asyncio.gather(*(pool.run(RunJob(program={"code": "print(40 + 2)"}, limits=RUN_LIMITS))
                                     for _ in range(pool.size * 2)))
    assert all(r.status == Status.OK and r.stdout == "42\n" for r in results), results
    assert pool.stats.replaced == replaced, "a sandbox had to be replaced"


# ------------------------------------------------------------------------------------------------- compile time

@pytest.fixture
def host_canary():
    token = "RBHOSTFILE" + secrets.token_hex(12)  # in the content only: an error message may name the path
    path = Path("/root") / f"rewardbox-compile-canary-{secrets.token_hex(6)}"
    path.write_text(token + "\n")
    try:
        yield str(path), token
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("language,template", [
    ("c", '#include "{path}"\nint main(void) {{ return 0; }}\n'),
    ("rust", 'fn main() {{ print!("{{:?}}", include_bytes!("{path}")); }}\n'),
])
@pytest.mark.parametrize("path", ["host-canary", "/proc/1/environ", "/proc/1/mem", "/run/rewardbox/oom_control",
                                  "/scratch/l/x", "/etc/shadow"])
async def test_a_compiler_reads_neither_host_files_nor_the_sandbox_s_private_ones(
    pool, builder, host_canary, language, template, path
) -> None:
    target = host_canary[0] if path == "host-canary" else path
    outcome = await compile_and_run(pool, builder, language, template.format(path=target))
    assert outcome.status == "syntax_error", outcome
    assert host_canary[1] not in outcome.message and "root:" not in outcome.message and "PATH=" not in outcome.message
    assert any(m in outcome.message for m in ("Permission denied", "No such file", "No such device",
                                              "Input/output error", "couldn't read")), outcome.message


@pytest.mark.parametrize("language,code", [
    ("c", '#include "/dev/stdin"\n#include <stdio.h>\nint main(void) { puts("x"); return 0; }\n'),
    ("c", '#include "/proc/self/fd/0"\n#include <stdio.h>\nint main(void) { puts("x"); return 0; }\n'),
    ("c", '#include "/dev/tty"\nint main(void) { return 0; }\n'),
    ("c", '#include "/dev/urandom"\nint main(void) { return 0; }\n'),
    ("rust", 'fn main() { print!("{}", include_str!("/dev/zero").len()); }\n'),
    ("rust", 'fn main() { print!("{}", include_str!("/dev/stdin").len()); }\n'),
], ids=["c-dev-stdin", "c-proc-fd-0", "c-dev-tty", "c-dev-urandom", "rust-dev-zero", "rust-dev-stdin"])
async def test_device_and_stdin_includes_end_at_a_compile_outcome(pool, builder, language, code) -> None:
    replaced = pool.stats.replaced
    outcome = await compile_and_run(pool, builder, language, code, compile_timeout_s=5)
    assert outcome.status in ("passed", "failed", "syntax_error", "timeout", "memory_limit"), outcome
    await assert_pool_serves(pool, replaced)


NEST = 100_000
COMPILER_BOMBS = {
    "c-parentheses": ("c", "int main(void) { return " + "(" * NEST + "0" + ")" * NEST + "; }\n"),
    "cpp-endless-template": ("cpp", "template <int N> struct A { A<N + 1> next; };\nA<0> a;\nint main() {}\n"),
    "cpp-template-fanout": ("cpp", "template <int N> struct F { using T = typename F<N - 1>::T; "
                                   "static const int v = F<N - 1>::v + F<N - 2>::v; };\n"
                                   "template <> struct F<0> { using T = int; static const int v = 0; };\n"
                                   "template <> struct F<1> { using T = int; static const int v = 1; };\n"
                                   "int main() { return F<100000>::v; }\n"),
    "rust-parentheses": ("rust", "fn main() { let x = " + "(" * NEST + "1" + ")" * NEST + "; print!(\"{}\", x); }\n"),
    "go-parentheses": ("go", "package main\nfunc main() { _ = " + "(" * NEST + "1" + ")" * NEST + " }\n"),
    "java-parentheses": ("java", "public class Main { public static void main(String[] a) { int x = "
                                 + "(" * NEST + "1" + ")" * NEST + "; } }\n"),
}


@pytest.mark.parametrize("name", list(COMPILER_BOMBS))
async def test_nesting_and_template_bombs_end_at_a_compile_limit(pool, builder, name) -> None:
    replaced = pool.stats.replaced
    language, code = COMPILER_BOMBS[name]
    outcome = await compile_and_run(pool, builder, language, code, compile_timeout_s=10)
    # a compiler that copes builds a program that runs (Go does); the others stop at one of their limits
    assert outcome.status in ("syntax_error", "timeout", "memory_limit", "passed", "failed"), outcome
    await assert_pool_serves(pool, replaced)


LINTER_BOMBS = {
    "python-binop-chain": ("python", "x = " + " + ".join(["1"] * 60_000) + "\n"),
    "python-attribute-chain": ("python", "x = y" + ".a" * 60_000 + "\n"),
    "python-parentheses": ("python", "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"),
    "javascript-arrays": ("javascript", "const x = " + "[" * NEST + "]" * NEST + ";\n"),
    "typescript-parentheses": ("typescript", "const x: number = " + "(" * NEST + "1" + ")" * NEST + ";\n"),
}


@pytest.mark.parametrize("name", list(LINTER_BOMBS))
async def test_nesting_bombs_against_the_linters_are_the_program_s_problem(pool, name) -> None:
    replaced = pool.stats.replaced
    language, code = LINTER_BOMBS[name]
    report = await QualityGrader(pool).grade(code, language)
    assert report.reason != "sandbox error", report
    # the warm linter still lints the next program
    fine = await QualityGrader(pool).grade("const y = 1;\nconsole.log(y);\n" if language != "python"
                                           else "print(1)\n", language)
    assert fine.score is not None and fine.score > 0, fine
    await assert_pool_serves(pool, replaced)


# ------------------------------------------------------------------------------------------------- system calls

FOREIGN_ABIS = r"""
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static long x32(long nr, long a) { long r; __asm__ volatile("syscall" : "=a"(r) : "a"(0x40000000L | nr), "D"(a)
                                                              : "rcx", "r11", "memory"); return r; }
static long i386(long nr, long a) { long r; __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a) : "memory");
                                    return r; }
static void attempt(const char *name, int kind) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long r = kind == 0 ? x32(39, 0) : kind == 1 ? x32(272, 0x10000000) : kind == 2 ? x32(425, 1)
               : kind == 3 ? i386(20, 0) : kind == 4 ? i386(310, 0x10000000) : i386(26, 0);
        printf("%s returned %ld\n", name, r);
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) printf("%s killed by %d\n", name, WTERMSIG(status));
}
int main(void) {
    const char *names[] = {"x32-getpid", "x32-unshare", "x32-io_uring_setup", "int80-getpid", "int80-unshare",
                           "int80-ptrace"};
    for (int i = 0; i < 6; i++) attempt(names[i], i);
    return 0;
}
"""


@pytest.mark.skipif(not X86_64, reason="x32 and int 0x80 are x86-64's")
async def test_x32_and_int_0x80_system_calls_are_refused(pool, builder) -> None:
    outcome = await compile_and_run(pool, builder, "c", FOREIGN_ABIS)
    lines = dict(line.split(" ", 1) for line in outcome.stdout.splitlines())
    assert len(lines) == 6, outcome
    for name, what in lines.items():
        # The filter kills a foreign ABI's call (SIGSYS); a kernel without that ABI answers -ENOSYS (-38).
        assert what in ("killed by 31", "returned -38", "returned -1"), (name, what)


GO_RAW = r"""
package main

import (
	"fmt"
	"syscall"
)

func main() {
	calls := []struct {
		name   string
		nr, a1 uintptr
	}{
		{"unshare", syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER},
		{"unshare-net", syscall.SYS_UNSHARE, syscall.CLONE_NEWNET},
		{"io_uring_setup", 425, 1},
		{"ptrace", syscall.SYS_PTRACE, syscall.PTRACE_TRACEME},
		{"mount", syscall.SYS_MOUNT, 0},
		{"bpf", 321, 0},
		{"keyctl", 250, 0},
		{"setns", 308, 0},
	}
	for _, c := range calls {
		_, _, e := syscall.RawSyscall(c.nr, c.a1, 0, 0)
		fmt.Printf("%s %d\n", c.name, int(e))
	}
}
"""


@pytest.mark.skipif(not X86_64, reason="syscall numbers are x86_64's")
async def test_raw_system_calls_from_go_are_refused(pool, builder) -> None:
    outcome = await compile_and_run(pool, builder, "go", GO_RAW, compile_timeout_s=60)
    lines = dict(line.split() for line in outcome.stdout.splitlines())
    assert len(lines) == 8, outcome
    assert {name: e for name, e in lines.items() if e not in ("1", "38")} == {}, lines  # EPERM or ENOSYS


# ------------------------------------------------------------------------------------------------- leftovers

IPC_PLANT = r"""
import ctypes, json, os, socket, time
name = os.environ["NAME"]
out = {}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(b"\0" + name.encode())
s.listen(8)
out["abstract"] = "listening"
os.mkfifo("/tmp/" + name)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
mq = rt.mq_open(("/" + name).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
out["mq_open"] = "created" if mq >= 0 else os.strerror(ctypes.get_errno())
if os.fork() == 0:  # a daemon that keeps the socket for the next job
    os.setsid()
    if os.fork() == 0:
        while True:
            try:
                c, _ = s.accept()
                c.sendall(b"leftover")
                c.close()
            except OSError:
                time.sleep(0.01)
    os._exit(0)
os.wait()
print(json.dumps(out))
"""

IPC_LOOK = r"""
import ctypes, errno, json, os, socket
name = os.environ["NAME"]
out = {}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(1)
try:
    s.connect(b"\0" + name.encode())
    out["abstract"] = s.recv(100).decode()
except OSError as e:
    out["abstract"] = errno.errorcode.get(e.errno, str(e))
rt = ctypes.CDLL("librt.so.1", use_errno=True)
mq = rt.mq_open(("/" + name).encode(), os.O_RDWR, 0, None)
out["mq_open"] = "opened" if mq >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
out["fifo"] = os.path.exists("/tmp/" + name)
print(json.dumps(out))
"""


async def test_ipc_objects_of_one_job_are_gone_for_the_next(pool) -> None:
    await settle(pool)
    name = "rb-ipc-" + secrets.token_hex(6)
    planted = await pool.run(RunJob(program={"code": IPC_PLANT}, env={"NAME": name}, limits=RUN_LIMITS))
    assert planted.status == Status.OK, planted
    assert json.loads(planted.stdout)["abstract"] == "listening"
    seen = set()
    for _ in range(pool.size * 3):
        await settle(pool)
        look = await pool.run(RunJob(program={"code": IPC_LOOK}, env={"NAME": name}, limits=RUN_LIMITS))
        assert look.status == Status.OK, look
        report = json.loads(look.stdout)
        assert report["abstract"] in ("ECONNREFUSED", "EPERM"), report
        assert report["mq_open"] != "opened" and not report["fifo"], report
        seen.add(look.sandbox_id)
        if planted.sandbox_id in seen:
            break
    assert planted.sandbox_id in seen


ESCALATION = r"""
import ctypes, errno, json, os, resource, subprocess
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def attempt(name, fn):
    try:
        rc = fn()
        if isinstance(rc, int) and rc < 0:
            out[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        else:
            out[name] = "succeeded"
    except (OSError, ValueError) as e:
        out[name] = errno.errorcode.get(getattr(e, "errno", None) or 0, type(e).__name__)

for res in ("RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK",
            "RLIMIT_MSGQUEUE", "RLIMIT_CORE"):
    r = getattr(resource, res)
    soft, hard = resource.getrlimit(r)
    attempt("raise " + res, lambda r=r, hard=hard: resource.setrlimit(r, (resource.RLIM_INFINITY,) * 2))
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT, PR_SET_MM, PR_SET_SECUREBITS = 38, 22, 47, 35, 28
attempt("prctl clear no_new_privs", lambda: libc.prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0))
attempt("prctl raise ambient cap", lambda: libc.prctl(PR_CAP_AMBIENT, 2, 21, 0, 0))  # CAP_SYS_ADMIN
attempt("prctl set_mm", lambda: libc.prctl(PR_SET_MM, 1, 0x1000, 0, 0))
attempt("prctl securebits", lambda: libc.prctl(PR_SET_SECUREBITS, 0x2f, 0, 0, 0))
class SchedParam(ctypes.Structure):
    _fields_ = [("prio", ctypes.c_int)]
attempt("sched_setscheduler FIFO", lambda: libc.sched_setscheduler(0, 1, ctypes.byref(SchedParam(50))))
attempt("sched_setscheduler RR", lambda: libc.sched_setscheduler(0, 2, ctypes.byref(SchedParam(1))))
attempt("nice -5", lambda: os.setpriority(os.PRIO_PROCESS, 0, -5))
attempt("ioprio realtime", lambda: libc.syscall(251, 1, 0, (1 << 13) | 0))  # ioprio_set(WHO_PROCESS, self, RT)
attempt("setuid 0", lambda: os.setuid(0))
attempt("setgroups", lambda: os.setgroups([0]))
def lower_oom():
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("0")
attempt("lower oom_score_adj", lower_oom)
sh = subprocess.run(["/bin/sh", "-c", "echo 0 > /proc/self/oom_score_adj && echo lowered; "
                     "cat /proc/self/oom_score_adj"], capture_output=True, text=True)
out["exec'd oom_score_adj"] = sh.stdout.split()
print(json.dumps(out))
"""


async def test_rlimit_prctl_scheduler_and_oom_score_escalations_fail(pool) -> None:
    result = await pool.run(RunJob(program={"code": ESCALATION}, limits=RUN_LIMITS))
    assert result.status == Status.OK, result
    report = json.loads(result.stdout)
    assert report.pop("exec'd oom_score_adj") == ["1000"], result.stdout
    assert {name: e for name, e in report.items() if e == "succeeded"} == {}, report


PROC_FD = r"""
own=" $$ "
for f in /proc/[0-9]*/fd/* /proc/1/fd/* /proc/2/fd/* /proc/3/fd/*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    pid=${f#/proc/}; pid=${pid%%/*}
    case "$own" in *" $pid "*) continue ;; esac
    if (exec 9<"$f") 2>/dev/null; then echo "read $f"; fi
    if (exec 9>>"$f") 2>/dev/null; then echo "write $f"; fi
done
for pid in 1 2 3 4 5 6 7 8; do
    [ "$pid" = "$$" ] && continue
    ls "/proc/$pid/fd/" >/dev/null 2>&1 && echo "listed /proc/$pid/fd"
done
echo to-stdout >/dev/stdout
echo to-stderr >/dev/stderr
echo via-proc >/proc/self/fd/1
echo done
"""


async def test_bash_proc_fd_tricks_reach_no_other_process(pool) -> None:
    result = await pool.run(RunJob(program={"argv": ["/bin/bash", "-c", PROC_FD]}, limits=RUN_LIMITS))
    assert result.status == Status.OK, result
    # the machinery's descriptors (runner, zygotes, watchdog) are root's: none can be listed, read or written
    assert result.stdout == "to-stdout\nvia-proc\ndone\n", result.stdout
    assert result.stderr == "to-stderr\n", result.stderr
