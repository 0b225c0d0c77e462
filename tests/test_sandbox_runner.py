"""Functional tests of the sandbox's result record, on both backends (the `pool` fixture), plus the pool's own life
cycle: recycling sandboxes after max_jobs and a clean shutdown."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess

import pytest

from sandboxes import Job, JudgeJob, Limits, RunJob, SandboxPool, Status, choose_backend
from sandboxes.backends.base import LABEL, owner_tag

LIMITS = Limits(wall_s=5, total_s=10, cpu_s=5, memory_mb=512)


def run_job(code: str, limits: Limits = LIMITS, **kw) -> Job:
    return RunJob(program={"code": code}, limits=limits, **kw)


def judge_job(candidate: str, spec: dict, limits: Limits = LIMITS) -> Job:
    return JudgeJob(candidate={"code": candidate, "module": "solution"}, judge=spec, limits=limits)


def case_results(result) -> list[bool]:
    return [e["passed"] for e in result.events if e.get("event") == "case"]


# ------------------------------------------------------------------------------------------------- run jobs


async def test_stdout_and_stderr_are_captured_separately(pool: SandboxPool) -> None:
    code = "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\nsys.stdout.write('no newline')\n"
    result = await pool.run(run_job(code))
    assert result.status == Status.OK, result
    assert result.exit_code == 0 and result.signal is None
    assert result.stdout == "to out\nno newline"
    assert result.stderr == "to err\n"
    assert not result.truncated
    assert result.sandbox_id
    assert 0 < result.wall_ms < LIMITS.wall_s * 1000


async def test_stdin_is_fed_to_the_program(pool: SandboxPool) -> None:
    code = "a, b = map(int, input().split())\nprint(a + b)\nprint(repr(input()))\n"
    result = await pool.run(run_job(code, stdin="2 40\nsecond line\n"))
    assert result.status == Status.OK, result
    assert result.stdout == "42\n'second line'\n"


async def test_stdin_larger_than_the_pipe_buffer_is_fed_completely(pool: SandboxPool) -> None:
    data = "".join(f"line {i:07d} of the input\n" for i in range(42000))  # > 1 MiB, far beyond the 64 KiB pipe buffer
    assert len(data) >= 1 << 20
    code = ("import hashlib, sys\nraw = sys.stdin.buffer.read()\n"
            "print(len(raw), hashlib.sha256(raw).hexdigest(), raw.count(b'\\n'))\n")
    result = await pool.run(run_job(code, stdin=data))
    assert result.status == Status.OK, result
    assert result.stdout.split() == [str(len(data)), hashlib.sha256(data.encode()).hexdigest(), "42000"]


async def test_a_program_that_ignores_a_large_stdin_is_not_blocked(pool: SandboxPool) -> None:
    result = await pool.run(run_job("print('did not read')", stdin="x" * (2 << 20)))
    assert result.status == Status.OK, result
    assert result.stdout == "did not read\n"


@pytest.mark.parametrize(
    "code,status,exit_code,sig,stderr_has",
    [
        ("import sys\nsys.exit(0)", Status.OK, 0, None, ""),
        ("pass", Status.OK, 0, None, ""),
        ("import sys\nsys.exit(3)", Status.RUNTIME_ERROR, 3, None, ""),
        ("import sys\nsys.exit('fatal: bad input')", Status.RUNTIME_ERROR, 1, None, "fatal: bad input"),
        ("raise ValueError('boom')", Status.RUNTIME_ERROR, 1, None, "ValueError: boom"),
        ("import os\nos._exit(7)", Status.RUNTIME_ERROR, 7, None, ""),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", Status.RUNTIME_ERROR, None, signal.SIGSEGV, ""),
        ("def f(n):\n    return f(n + 1)\nf(0)", Status.RUNTIME_ERROR, 1, None, "RecursionError"),
        ("x = (", Status.RUNTIME_ERROR, 1, None, "SyntaxError"),
    ],
    ids=["exit-0", "falls-off-the-end", "exit-3", "exit-message", "exception", "os-exit-7", "sigsegv", "recursion",
         "syntax-error"],
)
async def test_exit_codes_and_signals_are_reported(
    pool: SandboxPool, code: str, status: Status, exit_code: int | None, sig: int | None, stderr_has: str
) -> None:
    result = await pool.run(run_job(code))
    assert result.status == status, result
    assert result.exit_code == exit_code
    assert result.signal == sig
    assert stderr_has in result.stderr


async def test_a_python_job_gets_broken_pipe_errors_like_the_interpreter_not_sigpipe(pool: SandboxPool) -> None:
    # `true` exits without reading: writing 1 MB to it hits a closed pipe. python3 raises BrokenPipeError there
    # (which subprocess handles); a job killed by SIGPIPE instead would fail a correct program.
    code = ("import os, subprocess\nsubprocess.run(['true'], input=b'x' * (1 << 20))\n"
            "r, w = os.pipe()\nos.close(r)\ntry:\n    os.write(w, b'x')\nexcept BrokenPipeError:\n    print('EPIPE')\n")
    result = await pool.run(run_job(code))
    assert result.status == Status.OK, result
    assert result.stdout == "EPIPE\n"


async def test_invalid_utf8_output_is_replaced(pool: SandboxPool) -> None:
    code = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')\nsys.stderr.buffer.write(b'\\xc3(')\n"
    result = await pool.run(run_job(code))
    assert result.status == Status.OK, result
    assert result.stdout == "ok \ufffd\ufffd end"
    assert result.stderr == "\ufffd("


async def test_stdout_beyond_the_cap_is_truncated_and_flagged(pool: SandboxPool) -> None:
    limits = Limits(wall_s=5, total_s=5, cpu_s=5, memory_mb=512, output_bytes=1000)
    exact = await pool.run(run_job("print('a' * 999)", limits))  # 1000 bytes with the newline: not over the cap
    assert exact.status == Status.OK and not exact.truncated, exact
    assert len(exact.stdout) == 1000
    over = await pool.run(run_job("print('b' * 5000)\nprint('never reached')", limits))
    assert over.status == Status.OUTPUT_LIMIT, over
    assert over.stdout_truncated and not over.stderr_truncated
    assert over.stdout == "b" * 1000


async def test_stderr_beyond_the_cap_is_truncated_and_flagged(pool: SandboxPool) -> None:
    limits = Limits(wall_s=5, total_s=5, cpu_s=5, memory_mb=512, output_bytes=1000)
    result = await pool.run(run_job("import sys\nprint('out')\nsys.stderr.write('e' * 5000)", limits))
    assert result.status == Status.OUTPUT_LIMIT, result
    assert result.stderr_truncated and not result.stdout_truncated
    assert result.stderr == "e" * 1000


async def test_cpu_time_is_measured(pool: SandboxPool) -> None:
    code = "import time\nwhile time.process_time() < 0.3:\n    pass\n"
    result = await pool.run(run_job(code))
    assert result.status == Status.OK, result
    assert 250 <= result.cpu_ms < 2000, result.cpu_ms
    assert result.wall_ms >= 250


async def test_peak_memory_is_measured(pool: SandboxPool) -> None:
    small = await pool.run(run_job("pass"))
    big = await pool.run(run_job("block = b'x' * (100 << 20)\nprint(len(block))"))
    assert small.status == Status.OK and big.status == Status.OK, (small, big)
    assert big.peak_memory_kb >= 100 * 1024, big.peak_memory_kb
    assert big.peak_memory_kb < LIMITS.memory_mb * 1024
    assert 0 < small.peak_memory_kb < 100 * 1024, small.peak_memory_kb


async def test_argv_job_execs_the_binary(pool: SandboxPool) -> None:
    echo = await pool.run(RunJob(program={"argv": ["/bin/echo", "x"]}, limits=LIMITS))
    assert echo.status == Status.OK, echo
    assert echo.stdout == "x\n"
    from_path = await pool.run(RunJob(program={"argv": ["echo", "found", "on", "PATH"]}, limits=LIMITS))
    assert from_path.status == Status.OK and from_path.stdout == "found on PATH\n", from_path
    cat = await pool.run(RunJob(program={"argv": ["/bin/cat"]}, stdin="through cat\n", limits=LIMITS))
    assert cat.status == Status.OK and cat.stdout == "through cat\n", cat
    failing = await pool.run(RunJob(program={"argv": ["/bin/sh", "-c", "echo oops >&2; exit 4"]}, limits=LIMITS))
    assert failing.status == Status.RUNTIME_ERROR and failing.exit_code == 4, failing
    assert failing.stderr == "oops\n"
    pwd = await pool.run(RunJob(program={"argv": ["/bin/sh", "-c", "pwd; id -u"]}, limits=LIMITS))
    assert pwd.status == Status.OK, pwd
    cwd, uid = pwd.stdout.split()
    assert cwd == "/scratch/c" and int(uid) > 0


async def test_files_are_written_into_the_working_directory(pool: SandboxPool) -> None:
    code = r"""
import json, os
out = {"cwd": os.getcwd(), "uid": os.getuid(), "entries": sorted(os.listdir("."))}
out["input"] = open("input.txt").read()
out["nested"] = open("data/nested/values.csv").read()
out["owners"] = sorted({os.stat(p).st_uid for p in ("input.txt", "data/nested/values.csv")})
with open("result.txt", "w") as f:  # the job may write its own files next to them
    f.write("written")
out["written"] = open("result.txt").read()
print(json.dumps(out))
"""
    files = {"input.txt": "first file\n", "data/nested/values.csv": "a,b\n1,2\n"}
    result = await pool.run(run_job(code, files=files))
    assert result.status == Status.OK, result
    out = json.loads(result.stdout)
    assert out["cwd"] == "/scratch/c"
    assert out["entries"] == ["data", "input.txt"]
    assert out["input"] == "first file\n" and out["nested"] == "a,b\n1,2\n"
    assert out["owners"] == [out["uid"]]
    assert out["written"] == "written"


async def test_a_program_imports_its_own_modules_never_the_runners(pool: SandboxPool) -> None:
    """The job process is a fork of the runner's interpreter, which has the runner's own modules loaded: a program
    that ships modules with the same names (wire, protocol, cleanup, zygotes, ...) must import its own."""
    names = ["wire", "protocol", "cleanup", "zygotes", "job_lockdown", "job_process", "landlock", "usage", "cases"]
    files = {f"{name}.py": f"MINE = {name!r}\n" for name in names}
    code = f"import importlib\nprint(*[importlib.import_module(n).MINE for n in {names!r}])"
    result = await pool.run(run_job(code, files=files))
    assert result.status == Status.OK, result
    assert result.stdout.split() == names


async def test_job_env_is_added_to_the_environment(pool: SandboxPool) -> None:
    code = "import os\nprint(os.environ['GREETING'], os.environ['HOME'], os.environ['PATH'])"
    result = await pool.run(run_job(code, env={"GREETING": "hello"}))
    assert result.status == Status.OK, result
    assert result.stdout.split() == ["hello", "/scratch/c", "/usr/local/bin:/usr/bin:/bin"]


async def test_concurrent_jobs_all_get_their_own_result(pool: SandboxPool) -> None:
    jobs = [run_job(f"import time\ntime.sleep(0.05)\nprint({i} * {i})") for i in range(pool.size * 3)]
    results = await asyncio.gather(*(pool.run(j) for j in jobs))
    assert [r.status for r in results] == [Status.OK] * len(jobs), results
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(len(jobs))]
    assert len({r.sandbox_id for r in results}) == pool.size


# ------------------------------------------------------------------------------------------------- judge jobs

HUMANEVAL_TEST = """
def check(candidate):
    assert candidate([1, 2, 3]) == 6
    assert candidate([]) == 0
    assert candidate([-1, 1]) == 0
"""


async def test_judge_assert_spec_passes_a_correct_candidate(pool: SandboxPool) -> None:
    spec = {"kind": "assert", "entry_point": "total", "test_code": HUMANEVAL_TEST}
    result = await pool.run(judge_job("def total(xs):\n    return sum(xs)\n", spec))
    assert result.status == Status.OK, result
    assert result.error is None and result.spec_error is None
    assert case_results(result) == [True, True, True]
    load = next(e for e in result.events if e.get("event") == "load")
    assert load["ok"] and load["names"] == {"total": "callable"}


async def test_judge_assert_spec_fails_a_wrong_candidate(pool: SandboxPool) -> None:
    spec = {"kind": "assert", "entry_point": "total", "test_code": HUMANEVAL_TEST}
    result = await pool.run(judge_job("def total(xs):\n    return len(xs)\n", spec))
    assert result.status == Status.OK, result
    assert case_results(result) == [False, True, False]  # len() agrees with sum() only for []
    failed = [e for e in result.events if e.get("event") == "case" and not e["passed"]]
    assert all(e["status"] == "failed" for e in failed)


async def test_judge_mbpp_style_asserts(pool: SandboxPool) -> None:
    spec = {"kind": "assert", "test_code": "assert is_even(2)\nassert not is_even(3)\nassert is_even(0)\n"}
    good = await pool.run(judge_job("def is_even(n):\n    return n % 2 == 0\n", spec))
    bad = await pool.run(judge_job("def is_even(n):\n    return n > 0\n", spec))
    assert good.status == Status.OK and bad.status == Status.OK, (good, bad)
    assert case_results(good) == [True, True, True]
    assert case_results(bad) == [True, False, False]


async def test_judge_function_spec_compares_return_values(pool: SandboxPool) -> None:
    spec = {"kind": "function", "entry_point": "mean", "float_tol": 1e-6,
            "cases": [{"args": [[1, 2, 3, 4]], "expected": 2.5},
                      {"args": [[1, 2]], "expected": 1.5},
                      {"args": [[10]], "kwargs": {}, "expected": 10.0},
                      {"args": [[0.1, 0.2]], "expected": 0.15}]}
    right = await pool.run(judge_job("def mean(xs):\n    return sum(xs) / len(xs)\n", spec))
    assert right.status == Status.OK, right
    assert case_results(right) == [True, True, True, True]
    wrong = await pool.run(judge_job("def mean(xs):\n    return sum(xs) // len(xs)\n", spec))
    assert wrong.status == Status.OK, wrong
    assert case_results(wrong) == [False, False, True, False]
    messages = [e["message"] for e in wrong.events if e.get("event") == "case" and not e["passed"]]
    assert "expected 2.5, got 2" in messages[0]


async def test_judge_reports_a_candidate_that_does_not_load(pool: SandboxPool) -> None:
    spec = {"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 1}]}
    result = await pool.run(judge_job("def f(x):\n    return x\nraise RuntimeError('at import')\n", spec))
    load = next(e for e in result.events if e.get("event") == "load")
    assert not load["ok"] and "RuntimeError: at import" in load["error"], result.events
    assert case_results(result) == [False]


async def test_candidate_and_judge_run_as_different_uids(pool: SandboxPool) -> None:
    candidate = "import os\nCANDIDATE_UID = os.getuid()\ndef uid():\n    return os.getuid()\n"
    test_code = ("import os\n"
                 "assert uid() == CANDIDATE_UID\n"  # the candidate's own view of itself, through the channel
                 "assert os.getuid() != CANDIDATE_UID\n"  # the judge's test code runs as another uid
                 "assert os.getuid() != 0 and CANDIDATE_UID != 0\n")
    result = await pool.run(judge_job(candidate, {"kind": "assert", "test_code": test_code}))
    assert result.status == Status.OK, result
    assert case_results(result) == [True, True, True], result.events


# ------------------------------------------------------------------------------------------------- pool life cycle


def _owned_containers() -> set[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--no-trunc", "--filter", f"label={LABEL}", "--filter",
         f"label=rewardbox.owner={owner_tag()}", "--format", "{{.ID}}"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout
    return set(out.split())


async def test_a_sandbox_is_recycled_after_max_jobs() -> None:
    pool = SandboxPool(choose_backend("docker"), size=1, max_jobs=3, acquire_timeout_s=60)
    await pool.start()
    try:
        results = [await pool.run(run_job(f"print({i})")) for i in range(7)]
        assert [r.status for r in results] == [Status.OK] * 7, results
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(7)]
        assert pool.stats.replaced >= 2, pool.snapshot()
        ids = [r.sandbox_id for r in results]
        assert len(set(ids)) == 3 and ids[0:3] == [ids[0]] * 3 and ids[3:6] == [ids[3]] * 3, ids
        assert pool.stats.sandbox_errors == 0
    finally:
        await pool.close()


async def test_closing_a_docker_pool_removes_all_its_containers() -> None:
    others = _owned_containers()  # e.g. the session's pool: closing ours must leave those alone
    pool = SandboxPool(choose_backend("docker"), size=2, max_jobs=1, acquire_timeout_s=60)
    await pool.start()
    ours = {sb.handle.container_id for sb in pool._all}
    assert len(ours) == 2 and ours <= _owned_containers()
    # max_jobs=1: each job sends its sandbox off to be replaced, so close() also meets starts in flight
    results = await asyncio.gather(*(pool.run(run_job("print('x')")) for _ in range(2)))
    assert all(r.status == Status.OK for r in results), results
    await pool.close()
    left = _owned_containers()
    assert not left & ours, "a sandbox of the closed pool is still there"
    assert left <= others, f"containers of the closed pool remain: {left - others}"
    after_close = await pool.run(run_job("print('x')"))
    assert after_close.status == Status.SANDBOX_ERROR and "closed" in (after_close.error or "")


async def test_closing_a_pool_leaves_other_pools_in_the_process_working(pool: SandboxPool) -> None:
    other = SandboxPool(choose_backend(pool.backend.name), size=1, acquire_timeout_s=60)
    await other.start()
    assert (await other.run(run_job("print(1)"))).status == Status.OK
    await other.close()
    for _ in range(pool.size * 2):
        result = await pool.run(run_job("print(2)"))
        assert result.status == Status.OK and result.stdout == "2\n", result


async def test_closing_a_bubblewrap_pool_ends_its_processes() -> None:
    pool = SandboxPool(choose_backend("bubblewrap"), size=2, acquire_timeout_s=60)
    await pool.start()
    assert (await pool.run(run_job("print(1)"))).status == Status.OK
    handles = [sb.handle for sb in pool._all]
    await pool.close()
    assert len(handles) == 2 and all(h.proc.poll() is not None for h in handles)
    for h in handles:
        assert not any(p.exists() for p in h.cgroup.paths), "a cgroup of the closed pool remains"
        assert not os.path.exists(h.sock_dir), "a socket directory of the closed pool remains"


async def test_string_hashes_and_set_order_are_the_same_in_every_job(pool: SandboxPool) -> None:
    code = "print(hash('rewardbox'), list({'a', 'b', 'c', 'd', 'e', 'f'}))"
    results = await asyncio.gather(*[pool.run(RunJob(program={"code": code})) for _ in range(6)])
    assert all(r.status == Status.OK for r in results)
    assert len({r.stdout for r in results}) == 1
