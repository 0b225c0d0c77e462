"""Attacks through the compilers, run for real against both backends: reading secrets at compile time, compile
bombs (time, memory, output), and leftovers of a compile reaching the next job."""

from __future__ import annotations

import pytest
import pytest_asyncio

from graders.tests import job_limits, run_tests
from sandboxes.builds import Builder
from service.models import IOTests

LIMITS = job_limits(timeout_s=5, memory_mb=256, max_item_s=60)
ONE_CASE = IOTests(kind="io", cases=[{"stdin": "", "stdout": "x\n"}])


@pytest_asyncio.fixture(scope="session")
async def builder(pool):
    return Builder(pool)


async def compile_and_run(pool, builder, language, code, compile_timeout_s=20.0):
    return await run_tests(pool, code, ONE_CASE, LIMITS, language, builder, compile_timeout_s)


@pytest.mark.parametrize("path", ["/etc/shadow", "/proc/1/environ", "/run/rewardbox/runner.sock", "/scratch/j/x"])
async def test_c_include_of_a_file_only_root_or_the_judge_may_read_fails_to_compile(pool, builder, path):
    outcome = await compile_and_run(pool, builder, "c", f'#include "{path}"\nint main(void) {{ return 0; }}\n')
    assert outcome.status == "syntax_error"
    assert "root:" not in outcome.message and "PATH=" not in outcome.message
    assert any(m in outcome.message for m in ("Permission denied", "No such file", "No such device"))


async def test_rust_include_str_of_etc_shadow_fails_to_compile(pool, builder):
    code = 'fn main() { print!("{}", include_str!("/etc/shadow")); }\n'
    outcome = await compile_and_run(pool, builder, "rust", code)
    assert outcome.status == "syntax_error"
    assert "root:" not in outcome.message and "Permission denied" in outcome.message


async def test_a_program_cannot_read_its_compile_jobs_leftovers_or_the_artefact_cache(pool, builder):
    # The compile ran in some sandbox as the candidate uid; the run (maybe in the same sandbox) sees only its own
    # copy of the artefacts: the compile's working files were wiped with the compile job.
    code = ('#include <stdio.h>\n#include <dirent.h>\nint main(void) { DIR *d = opendir(".");'
            ' struct dirent *e; while ((e = readdir(d))) if (e->d_name[0] != \'.\') printf("%s\\n", e->d_name);'
            ' return 0; }\n')
    outcome = await compile_and_run(pool, builder, "c", code)
    assert sorted(outcome.stdout.split()) == ["main"]


async def test_cpp_compile_time_bomb_hits_the_compile_time_limit_and_the_sandbox_stays_usable(pool, builder):
    # Compile-time evaluation of 4e10 steps (each loop stays under gcc's constexpr loop limit, and its ops limit
    # is minutes away), plus a template instantiated at every depth up to 800.
    bomb = ("template <int N> struct Deep { static constexpr long v = Deep<N - 1>::v + N; };\n"
            "template <> struct Deep<0> { static constexpr long v = 0; };\n"
            "constexpr long spin() { long s = 0;\n"
            "  for (long i = 0; i < 200000; i++) for (long j = 0; j < 200000; j++) s += (i ^ j) % 7;\n"
            "  return s; }\n"
            "static_assert(spin() + Deep<800>::v > 0, \"bomb\");\nint main() { return 0; }\n")
    outcome = await compile_and_run(pool, builder, "cpp", bomb, compile_timeout_s=3)
    assert outcome.status == "timeout"
    assert not outcome.executable
    assert "compilation exceeded" in outcome.message
    after = await compile_and_run(pool, builder, "c", '#include <stdio.h>\nint main(void) { puts("x"); }\n')
    assert after.status == "passed"


async def test_an_endless_include_recursion_fails_to_compile(pool, builder):
    outcome = await compile_and_run(pool, builder, "c", '#include __FILE__\nint main(void) { return 0; }\n')
    assert outcome.status == "syntax_error"
    assert "nested" in outcome.message


async def test_including_dev_zero_ends_at_a_compile_limit(pool, builder):
    outcome = await compile_and_run(pool, builder, "c", '#include "/dev/zero"\nint main(void) { return 0; }\n',
                                    compile_timeout_s=5)
    assert outcome.status in ("timeout", "memory_limit", "syntax_error")
    assert not outcome.executable


async def test_a_compiler_flooding_diagnostics_is_capped(pool, builder):
    code = "int main(void) {\n" + "  undefined_function_name();\n" * 20000 + "}\n"
    outcome = await compile_and_run(pool, builder, "c", code)
    assert outcome.status == "syntax_error"
    assert len(outcome.message) <= 2000


SHADOW_READERS = {
    "php": "<?php\n$s = @file_get_contents('/etc/shadow');\nif ($s === false) { fwrite(STDERR, 'denied'); exit(1); }\n"
           "echo $s;\n",
    "ruby": "print File.read('/etc/shadow')\n",
    "lua": "local f, err = io.open('/etc/shadow')\nif not f then io.stderr:write(err) os.exit(1) end\n"
           "print(f:read('a'))\n",
    "perl": "open(my $f, '<', '/etc/shadow') or die \"denied: $!\\n\";\nprint <$f>;\n",
    "csharp": "public class Program {\n  static void Main() {\n"
              "    System.Console.Write(System.IO.File.ReadAllText(\"/etc/shadow\"));\n  }\n}\n",
}


@pytest.mark.parametrize("language", SHADOW_READERS)
async def test_an_interpreted_program_cannot_read_a_file_only_root_may_read(pool, builder, language):
    outcome = await compile_and_run(pool, builder, language, SHADOW_READERS[language])
    assert outcome.status == "runtime_error", (outcome.status, outcome.stderr)
    assert "root:" not in outcome.stdout + outcome.stderr


async def test_perl_code_run_by_the_syntax_check_is_sandboxed_too(pool, builder):
    # `perl -c` runs BEGIN blocks: the syntax check runs the candidate's code, as the candidate uid in the sandbox
    code = "BEGIN { open(my $f, '<', '/etc/shadow') or die \"denied: $!\\n\"; print <$f>; }\nprint \"x\\n\";\n"
    outcome = await compile_and_run(pool, builder, "perl", code)
    assert outcome.status == "syntax_error"
    assert "root:" not in outcome.message and "Permission denied" in outcome.message
