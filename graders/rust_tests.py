"""`rust_test`: the candidate plus a `#[test]` module (HumanEval-Rust style) built with `rustc --test`.

libtest runs the tests in the candidate's process, so, unlike Python's judge, the tests cannot sit behind a
process boundary. What a candidate could do to fake a pass, and what stops it:
- print "test result: ok" / a fake summary: no verdict is read from output. Each test runs in its own process
  (`--exact NAME`); the verdict is that process's exit status, from the kernel, and the count line libtest
  prints *before* any test (so before any candidate code) must say exactly one test ran.
- end the process early with status 0 (`std::process::exit`), run code before main (`#[link_section]`,
  `#[global_allocator]`), write memory (`unsafe`, `/proc/self/mem` through `std::fs`), pull files in at compile
  time (`include_str!`), or call C (`extern`): rejected before compiling (comments and strings stripped first),
  the cases fail as `not_run` and the item is flagged `rust_forbidden`.
- hide the test module behind a trailing `#[cfg(...)]`: a trusted item separates candidate and tests, and a
  crate emptied by `#![cfg(...)]` runs no test, which fails the count check.
- shadow the tests' macros (`macro_rules! assert_eq`) or the names they use (`struct String`, `fn Some`) through
  `use super::*`: the tests' assertion macros are rewritten to `::std::` paths, and candidate items named like a
  prelude or primitive name are rejected.
- return a type of its own whose hand-written `PartialEq`/`PartialOrd`/operator impl always agrees: naming those
  traits outside `#[derive(...)]` is rejected (none of the 180 HumanEval-Rust canonical solutions does).
- return a type of its own whose methods are named like the ones the tests call on the answer (`contains`,
  `to_lowercase`: a struct whose `contains` always says yes), or add such methods to a std type through a
  trait of its own (a trait method on `String` is found before `str`'s own): a candidate `impl` or `trait` block
  defining a method the test code calls, or a macro that defines functions from a parameter (`fn $name`), is
  rejected (none of the 180 canonical solutions has an impl, a trait or a macro).
A refused program is a `syntax_error` (rejected before compiling, executability 0), the lowest status in every
profile: refusing can never score better than what compiling and running the program would have earned.
Residual risk: a candidate that exploits a soundness bug of rustc itself (safe code reaching undefined
behaviour, e.g. rust-lang/rust#25860) could still corrupt the harness; these need deliberate, version-specific
exploit code.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

from sandboxes import Limits, Status
from sandboxes.builds import Builder, JobRunner
from sandboxes.languages import LANGUAGES, OUT, RUN_BINARY

from .outcome import Outcome, Verdict
from .verdicts import compile_failure, memory_checked

FORBIDDEN_IDENTS = {
    "unsafe", "extern", "process", "fs", "File", "OpenOptions", "Command", "libc", "asm", "global_asm",
    "include", "include_str", "include_bytes", "link_section", "no_mangle", "export_name", "global_allocator",
    "test_runner", "no_main", "no_std", "no_implicit_prelude",
}
PRELUDE_NAMES = {
    "Copy", "Send", "Sized", "Sync", "Unpin", "Drop", "Fn", "FnMut", "FnOnce", "drop", "Box", "ToOwned", "Clone",
    "PartialEq", "PartialOrd", "Eq", "Ord", "AsRef", "AsMut", "Into", "From", "Default", "Iterator", "Extend",
    "IntoIterator", "DoubleEndedIterator", "ExactSizeIterator", "Option", "Some", "None", "Result", "Ok", "Err",
    "String", "ToString", "Vec", "TryFrom", "TryInto", "FromIterator", "std", "core", "alloc", "bool", "char",
    "str", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32", "f64",
    "HashMap", "HashSet", "BTreeMap", "BTreeSet", "VecDeque", "BinaryHeap",
    "assert", "assert_eq", "assert_ne", "vec", "panic", "format", "matches", "println", "print", "write", "writeln",
}
# A candidate type whose hand-written comparison or operator lies (`impl PartialEq<i32> for Fake { ... true }`,
# `impl Sub<f64> for Fake`, even `impl PartialEq<Fake> for i32`) would pass the tests' asserts. Rust cannot build an
# identifier from parts, so an impl of these traits must name them: any mention outside `#[derive(...)]` (derived
# impls compare structurally, and only with the same type) is refused.
LYING_TRAITS = {
    "PartialEq", "PartialOrd", "Eq", "Ord", "Add", "Sub", "Mul", "Div", "Rem", "Neg", "Not", "BitAnd", "BitOr",
    "BitXor", "Shl", "Shr", "AddAssign", "SubAssign", "MulAssign", "DivAssign", "RemAssign", "Index", "IndexMut",
    "Deref", "DerefMut", "Fn", "FnMut", "FnOnce",
}
DERIVE = re.compile(r"#\s*\[\s*derive\s*\([^)]*\)\s*\]")
ITEM_NAME = re.compile(r"\b(?:fn|struct|enum|union|type|trait|mod|const|static|macro_rules\s*!)\s+(?:r#)?(\w+)")
ASSERT_MACROS = re.compile(r"(?<![\w:])(assert|assert_eq|assert_ne|debug_assert|debug_assert_eq|debug_assert_ne|"
                           r"panic|vec|format|matches|unreachable|unimplemented|todo)\s*!")
METHOD_CALL = re.compile(r"\.\s*(?:r#)?([A-Za-z_]\w*)\s*(?:::\s*<[^;{}]*?>\s*)?\(")
IMPL_OR_TRAIT = re.compile(r"\b(?:impl|trait)\b")
MACRO_FN = re.compile(r"\bfn\s+\$")
TEST_FN = re.compile(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?fn\s+(\w+)")
TEST_MOD = re.compile(r"\bmod\s+(\w+)\s*\{")
SEPARATOR = "\n\n#[allow(dead_code)]\nconst __REWARDBOX_TESTS_FOLLOW: () = ();\n\n"
RUST_TEST_ARGV = ("rustc", "--test", "--edition", "2021", "-C", "opt-level=1", "-C", "debuginfo=0", "-C",
                  "strip=symbols", "-o", f"{OUT}/main", "{src}")


def strip_comments_and_strings(code: str) -> str:
    """Rust source with comments, string and char literals blanked (raw strings and nested comments too)."""
    out, i, n, depth = [], 0, len(code), 0
    while i < n:
        c = code[i]
        if code.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if code.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif code.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif code.startswith("//", i):
            while i < n and code[i] != "\n":
                i += 1
        elif (m := re.match(r'b?r(#*)"', code[i:])) and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            end = code.find('"' + m.group(1), i + m.end())
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and code[i] != '"':
                i += 2 if code[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and (m := re.match(r"'(?:\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", code[i:])):
            i += m.end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def forbidden_constructs(code: str, test_code: str = "") -> list[str]:
    """What in the candidate's source rust_test refuses to judge (see the module docstring)."""
    bare = strip_comments_and_strings(code)
    idents = set(re.findall(r"(?:r#)?([A-Za-z_]\w*)", bare))
    found = sorted(idents & FORBIDDEN_IDENTS)
    traits = set(re.findall(r"(?:r#)?([A-Za-z_]\w*)", DERIVE.sub(" ", bare))) & LYING_TRAITS
    found += sorted(f"names {name} outside #[derive]" for name in traits)
    found += sorted(f"defines {name}" for name in set(ITEM_NAME.findall(bare)) & PRELUDE_NAMES)
    called = set(METHOD_CALL.findall(strip_comments_and_strings(test_code)))
    found += sorted(f"defines a method {name} that the tests call" for name in _block_methods(bare) & called)
    if MACRO_FN.search(bare):
        found.append("a macro defining functions from a parameter")
    return found


def _block_methods(bare: str) -> set[str]:
    """Names of the functions defined inside the candidate's impl and trait blocks."""
    names: set[str] = set()
    for m in IMPL_OR_TRAIT.finditer(bare):
        start = bare.find("{", m.end())
        if start < 0:
            continue
        depth, end = 0, len(bare)
        for i in range(start, len(bare)):
            depth += {"{": 1, "}": -1}.get(bare[i], 0)
            if depth == 0:
                end = i
                break
        names |= set(re.findall(r"\bfn\s+(?:r#)?(\w+)", bare[start:end]))
    return names


def qualify_macros(test_code: str) -> str:
    """`assert_eq!(...)` -> `::std::assert_eq!(...)`: a path-qualified macro cannot be shadowed by the candidate."""
    return ASSERT_MACROS.sub(lambda m: f"::std::{m.group(1)}!", test_code)


def test_paths(test_code: str) -> list[str]:
    names = TEST_FN.findall(test_code)
    module = TEST_MOD.search(test_code)
    return [f"{module.group(1)}::{n}" if module else n for n in names]


async def run_rust_tests(pool: JobRunner, builder: Builder, code: str, tests: Any, limits: Limits,
                         compile_timeout_s: float) -> Outcome:
    lang = LANGUAGES["rust"]
    paths = test_paths(tests.test_code)
    if not paths:
        return Outcome("invalid_input", message="tests.test_code: no #[test] function found")
    forbidden = forbidden_constructs(code, tests.test_code)
    if forbidden:  # the lowest status of every profile: a refusal never beats what the program would earn
        outcome = Outcome("syntax_error", executable=False, flags=["rust_forbidden"],
                          message="refused before compiling; rust_test cannot judge programs that use: "
                          + ", ".join(forbidden))
        outcome.verdicts = [Verdict(p, False, "not_run", outcome.message) for p in paths]
        return outcome
    source = code + SEPARATOR + qualify_macros(tests.test_code) + "\n"
    job = replace(lang, compile_argv=RUST_TEST_ARGV).compile_job(source, compile_timeout_s)
    build = await builder.build(lang, source, compile_timeout_s, job=job)
    if not build.ok:
        return compile_failure(build, paths)

    async def one(path: str):
        argv = [*RUN_BINARY, "--exact", path,
                "--test-threads=1", "-q", "--color", "never"]
        job = lang.run_job(source, build.files, "", limits)
        job = replace(job, program={"argv": argv})
        return memory_checked(lang, await pool.run(job), limits.memory_mb)

    runs = await asyncio.gather(*(one(p) for p in paths))
    verdicts = []
    for path, run in zip(paths, runs, strict=True):
        ran_one = run.stdout.lstrip().startswith("running 1 test\n")
        if run.status == Status.SANDBOX_ERROR:
            return Outcome("infra_error", message=run.error or "sandbox error")
        if run.status == Status.OK and ran_one:
            verdicts.append(Verdict(path, True, "passed", "", run.cpu_ms))
        elif run.status == Status.OK:
            verdicts.append(Verdict(path, False, "failed", "the test did not run", run.cpu_ms))
        elif run.status == Status.RUNTIME_ERROR and run.exit_code == 101:
            verdicts.append(Verdict(path, False, "failed", _panic_message(run.stdout), run.cpu_ms))
        else:
            status = "runtime_error" if run.status == Status.KILLED else str(run.status)
            verdicts.append(Verdict(path, False, status, run.stderr.strip()[-200:], run.cpu_ms))
    outcome = Outcome("passed" if all(v.passed for v in verdicts) else "failed", executable=True, verdicts=verdicts)
    bad = [v.status for v in verdicts if v.status not in ("passed", "failed")]
    if bad:
        outcome.status = bad[0]
    first = runs[0]
    outcome.wall_ms, outcome.cpu_ms = sum(r.wall_ms for r in runs), sum(r.cpu_ms for r in runs)
    outcome.peak_memory_kb = max(r.peak_memory_kb for r in runs)
    outcome.stdout, outcome.stderr, outcome.truncated = first.stdout, first.stderr, any(r.truncated for r in runs)
    outcome.details["compile"] = {"ms": round(build.compile_ms, 3), "cached": build.cached}
    return outcome


def _panic_message(stdout: str) -> str:
    for line in stdout.splitlines():
        if "panicked at" in line:
            return line.strip()[:300]
    return "the test panicked"
