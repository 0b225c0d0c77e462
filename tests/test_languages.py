"""Every non-Python language against the real sandbox (both backends): hello, fizzbuzz, compile error, runtime
error, timeout; the compile cache; memory limits of the VM runtimes."""

from __future__ import annotations

import pytest
import pytest_asyncio

from graders.tests import job_limits, run_tests
from sandboxes.builds import Builder
from service.models import IOTests
from tests.language_programs import COMPILE_ERROR, FIZZBUZZ, HELLO, LANGUAGES, LOOP, RUNTIME_ERROR, fizzbuzz

LIMITS = job_limits(timeout_s=10, memory_mb=512, max_item_s=60)


@pytest_asyncio.fixture(scope="session")
async def builder(pool):
    return Builder(pool)


def io(*cases: tuple[str, str]) -> IOTests:
    return IOTests(kind="io", cases=[{"stdin": i, "stdout": o} for i, o in cases])


async def score(pool, builder, language: str, code: str, tests: IOTests, limits=LIMITS, compile_timeout_s=60.0):
    return await run_tests(pool, code, tests, limits, language, builder, compile_timeout_s)


@pytest.mark.parametrize("language", LANGUAGES)
async def test_hello_world_passes(pool, builder, language):
    outcome = await score(pool, builder, language, HELLO[language], io(("", "hello\n")))
    assert outcome.status == "passed", (outcome.message, outcome.stderr)
    assert outcome.executable


@pytest.mark.parametrize("language", LANGUAGES)
async def test_fizzbuzz_reads_stdin_and_passes_every_case(pool, builder, language):
    outcome = await score(pool, builder, language, FIZZBUZZ[language], io(("15\n", fizzbuzz(15)), ("3", fizzbuzz(3)),
                                                                          ("31\n", fizzbuzz(31))))
    assert [v.passed for v in outcome.verdicts] == [True, True, True], outcome.verdicts


@pytest.mark.parametrize("language", LANGUAGES)
async def test_compile_error_is_a_syntax_error_with_the_compilers_message(pool, builder, language):
    outcome = await score(pool, builder, language, COMPILE_ERROR[language], io(("", "x\n"), ("", "y\n")))
    assert outcome.status == "syntax_error"
    assert not outcome.executable
    assert outcome.message.strip(), "the compiler's message is reported"
    assert [v.status for v in outcome.verdicts] == ["not_run", "not_run"]


@pytest.mark.parametrize("language", LANGUAGES)
async def test_runtime_error_is_a_runtime_error(pool, builder, language):
    outcome = await score(pool, builder, language, RUNTIME_ERROR[language], io(("", "never\n")))
    assert outcome.status == "runtime_error", (outcome.status, outcome.stderr)
    assert not outcome.executable


@pytest.mark.parametrize("language", LANGUAGES)
async def test_endless_loop_times_out(pool, builder, language):
    limits = job_limits(timeout_s=1.5, memory_mb=512, max_item_s=30)
    outcome = await score(pool, builder, language, LOOP[language], io(("", "")), limits=limits)
    assert outcome.status == "timeout"
    assert outcome.verdicts[0].status == "timeout"


async def test_n_cases_compile_once_and_a_repeated_program_hits_the_cache(pool):
    fresh = Builder(pool)
    code = FIZZBUZZ["c"].replace("return 0;", "return 0; /* cache test */")
    first = await score(pool, fresh, "c", code, io(*[(f"{n}\n", fizzbuzz(n)) for n in range(1, 7)]))
    assert first.status == "passed"
    assert fresh.compiles == 1
    again = await score(pool, fresh, "c", code, io(("5\n", fizzbuzz(5))))
    assert again.status == "passed" and again.details["compile"]["cached"]
    assert fresh.compiles == 1


async def test_java_memory_hog_ends_as_memory_limit(pool, builder):
    code = ("import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
            "  List<long[]> keep = new ArrayList<>(); while (true) keep.add(new long[1 << 20]); } }\n")
    outcome = await score(pool, builder, "java", code, io(("", "")), job_limits(10, 256, 60))
    assert outcome.status == "memory_limit"


async def test_c_memory_hog_ends_as_memory_limit_or_runtime_error_without_reaching_the_sandbox_limit(pool, builder):
    code = ("#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\nint main(void) {\n"
            "  for (;;) { char *p = malloc(1 << 24); if (!p) { fputs(\"out of memory\\n\", stderr); return 1; }"
            " memset(p, 1, 1 << 24); } }\n")
    outcome = await score(pool, builder, "c", code, io(("", "")), job_limits(10, 128, 60))
    assert outcome.status == "memory_limit"
    assert outcome.peak_memory_kb < 160 * 1024


@pytest.mark.parametrize("language, code", [
    ("javascript", "function f(n) { return n === 0 ? 0 : 1 + f(n - 1); }\nconsole.log(f(20000));\n"),
    ("javascript", "function f(n) { return 1 + f(n + 1); }\nconsole.log(f(0));\n"),
    ("c", "#include <stdio.h>\nint f(int n);\nint (*volatile g)(int) = f;  /* an opaque call: no loop */\n"
          "int f(int n) { char buf[1024]; snprintf(buf, sizeof buf, \"%d\", n); return g(n + 1) + buf[0]; }\n"
          "int main(void) { return f(0); }\n"),
])
async def test_deep_recursion_runs_or_fails_as_a_runtime_error_never_a_sandbox_fault(pool, builder, language, code):
    outcome = await score(pool, builder, language, code, io(("", "20000\n")))
    if "20000" in code:
        assert outcome.status == "passed", outcome.stderr
    else:
        assert outcome.status == "runtime_error", (outcome.status, outcome.stderr[-300:])
