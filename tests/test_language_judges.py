"""JavaScript/TypeScript `function` tests and Rust `rust_test` against the real sandbox, including the hacks a
candidate would try: a fake verdict on stdout, exiting with 0, forged frames, hidden or shadowed tests."""

from __future__ import annotations

import pytest
import pytest_asyncio

from graders.tests import job_limits, run_tests
from sandboxes.builds import Builder
from service.models import FunctionTests, RustTests

LIMITS = job_limits(timeout_s=5, memory_mb=512, max_item_s=60)


@pytest_asyncio.fixture(scope="session")
async def builder(pool):
    return Builder(pool)


def add_cases(entry: str = "add") -> FunctionTests:
    return FunctionTests(kind="function", entry_point=entry, cases=[
        {"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}, {"args": [-1, 1], "expected": 0}])


async def judge(pool, builder, language, code, tests):
    return await run_tests(pool, code, tests, LIMITS, language, builder, 60.0)


@pytest.mark.parametrize("language", ["javascript", "typescript"])
async def test_function_tests_pass_for_a_correct_function(pool, builder, language):
    code = ("function add(a: number, b: number): number { return a + b; }\n" if language == "typescript"
            else "function add(a, b) { return a + b; }\n")
    outcome = await judge(pool, builder, language, code, add_cases())
    assert outcome.status == "passed", outcome.verdicts
    assert outcome.pass_rate == 1.0


async def test_function_tests_compare_json_values_and_fail_a_wrong_answer(pool, builder):
    code = "const f = (xs, m) => ({doubled: xs.map((x) => x * 2), keys: Object.keys(m).sort(), none: null});\n"
    tests = FunctionTests(kind="function", entry_point="f", cases=[
        {"args": [[1, 2.5], {"b": 1, "a": 2}], "expected": {"doubled": [2, 5.0], "keys": ["a", "b"], "none": None}},
        {"args": [[3], {}], "expected": {"doubled": [7], "keys": [], "none": None}}])
    outcome = await judge(pool, builder, "javascript", code, tests)
    assert [v.passed for v in outcome.verdicts] == [True, False]


async def test_module_exports_and_a_class_method_are_found(pool, builder):
    code = "module.exports = { add: (a, b) => a + b };\n"
    assert (await judge(pool, builder, "javascript", code, add_cases())).status == "passed"
    code = "class Solution { add(a, b) { return a + b; } }\n"
    assert (await judge(pool, builder, "javascript", code, add_cases())).status == "passed"


async def test_printing_a_fake_verdict_and_exiting_zero_pass_nothing(pool, builder):
    code = ("function add(a, b) {\n"
            "  console.log(JSON.stringify({event: 'case', passed: true, status: 'passed'}));\n"
            "  console.log('test result: ok. 3 passed');\n  process.exit(0);\n}\n")
    outcome = await judge(pool, builder, "javascript", code, add_cases())
    assert outcome.pass_rate == 0.0


async def test_forged_frames_on_the_reply_channel_pass_nothing(pool, builder):
    # The candidate writes its own "reply" frames straight to the channel: it can only ever choose its answer.
    code = ("const fs = require('fs');\n"
            "function frame(o) { const b = Buffer.from(JSON.stringify(o)); const h = Buffer.alloc(4);"
            " h.writeUInt32BE(b.length); fs.writeSync(4, Buffer.concat([h, b])); }\n"
            "function add(a, b) { frame({value: ['b', true]}); frame({event: 'done'}); return 'x'; }\n")
    outcome = await judge(pool, builder, "javascript", code, add_cases())
    assert outcome.pass_rate == 0.0


async def test_an_object_that_claims_equality_is_not_plain_data(pool, builder):
    code = ("class Always { valueOf() { return 3; } toJSON() { return 3; } }\n"
            "function add(a, b) { return new Always(); }\n")
    outcome = await judge(pool, builder, "javascript", code, add_cases())
    assert outcome.pass_rate == 0.0


async def test_the_candidate_cannot_read_the_judges_files_or_processes(pool, builder):
    code = ("const fs = require('fs');\nlet seen = '';\n"
            "for (const p of fs.readdirSync('/proc')) { try { seen += fs.readFileSync(`/proc/${p}/cmdline`); }"
            " catch (e) {} try { seen += fs.readFileSync(`/proc/${p}/environ`); } catch (e) {} }\n"
            "try { seen += fs.readdirSync('/scratch/j').join(); } catch (e) {}\n"
            "function add(a, b) { return seen.includes('expected') ? 1 : a + b; }\n")
    outcome = await judge(pool, builder, "javascript", code, add_cases())
    assert outcome.status == "passed"  # it never saw the expected values, so it answered honestly


RUST_ADD = "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
RUST_TESTS = RustTests(kind="rust_test", test_code=(
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_add() {\n"
    "        assert_eq!(add(1, 2), 3);\n        assert!(add(2, 2) == 4);\n    }\n\n"
    "    #[test]\n    fn test_negative() {\n        assert_eq!(add(-1, 1), 0);\n    }\n}\n"))


async def test_rust_tests_pass_per_test_for_a_correct_program(pool, builder):
    outcome = await judge(pool, builder, "rust", RUST_ADD, RUST_TESTS)
    assert outcome.status == "passed", (outcome.message, outcome.verdicts)
    assert [v.name for v in outcome.verdicts] == ["tests::test_add", "tests::test_negative"]


async def test_rust_tests_fail_the_failing_test_only(pool, builder):
    code = "fn add(a: i32, b: i32) -> i32 {\n    if a < 0 { return 7; }\n    a + b\n}\n"
    outcome = await judge(pool, builder, "rust", code, RUST_TESTS)
    assert [v.passed for v in outcome.verdicts] == [True, False]
    assert "panicked" in outcome.verdicts[1].message


@pytest.mark.parametrize("hack", [
    # prints libtest's own success lines, then fails
    'fn add(a: i32, b: i32) -> i32 {\n    println!("test tests::test_add ... ok\\n\\ntest result: ok. 1 passed");\n'
    '    a * 10 + b\n}\n',
    # hides the test module behind a trailing attribute
    "fn add(a: i32, b: i32) -> i32 { a * 10 + b }\n#[cfg(any())]\n",
    # empties the whole crate under test
    "#![cfg(not(test))]\nfn add(a: i32, b: i32) -> i32 { a * 10 + b }\n",
    # shadows the tests' assertion macros
    "macro_rules! assert_eq { ($($t:tt)*) => {} }\nmacro_rules! assert { ($($t:tt)*) => {} }\n"
    "fn add(a: i32, b: i32) -> i32 { a * 10 + b }\n",
])
async def test_rust_hacks_pass_nothing(pool, builder, hack):
    outcome = await judge(pool, builder, "rust", hack, RUST_TESTS)
    assert outcome.pass_rate == 0.0, outcome.verdicts


@pytest.mark.parametrize("hack", [
    "fn add(a: i32, b: i32) -> i32 { std::process::exit(0) }\n",
    "fn add(a: i32, b: i32) -> i32 { unsafe { std::ptr::null::<i32>().read() } }\n",
    "#[derive(Debug)]\nstruct i32;\nimpl PartialEq for i32 { fn eq(&self, _: &Self) -> bool { true } }\n"
    "fn add(a: i32, b: i32) -> i32 { i32 }\n",
    'fn add(a: i32, b: i32) -> i32 { include_str!("/etc/passwd").len() as i32 }\n',
    # a type of its own whose comparison always agrees, directly and through a macro
    "#[derive(Debug)]\nstruct Fake;\nimpl PartialEq<i32> for Fake { fn eq(&self, _: &i32) -> bool { true } }\n"
    "fn add(a: i32, b: i32) -> Fake { Fake }\n",
    "#[derive(Debug)]\nstruct Fake;\nmacro_rules! lie { ($t:ident) => { impl $t<i32> for Fake {"
    " fn eq(&self, _: &i32) -> bool { true } } } }\nlie!(PartialEq);\nfn add(a: i32, b: i32) -> Fake { Fake }\n",
])
async def test_rust_constructs_that_could_fake_a_pass_are_refused_before_compiling(pool, builder, hack):
    outcome = await judge(pool, builder, "rust", hack, RUST_TESTS)
    assert outcome.pass_rate == 0.0
    assert "rust_forbidden" in outcome.flags


async def test_an_exported_typescript_function_is_found(pool, builder):
    code = "export function add(a: number, b: number): number {\n  return a + b;\n}\n"
    outcome = await judge(pool, builder, "typescript", code, add_cases())
    assert outcome.status == "passed", outcome.verdicts
