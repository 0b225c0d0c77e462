"""Judging integrity (issue 12): no program earns a reward it did not earn, or dodges the penalty it did earn.

Each class of the issue runs for real, through the Scorer, against the real sandbox on both backends (the `pool`
fixture). Every attack asserts what the issue's Proof asks: not passed, not null, the status the program earned,
and the flags of the constructs we flag. The pure rules behind them are in tests/test_integrity_rules.py;
HumanEval-164 x every class is tests/test_humaneval_integrity.py.
"""

from __future__ import annotations

import base64

import pytest

from graders.quality import QualityGrader
from service.benchmark import humaneval_tests
from service.config import Settings
from service.models import ItemResult, RewardItem
from service.scoring import Scorer
from tests.test_efficiency import EQUAL_COST, TOTAL_TESTS, UNIQUE_QUADRATIC, UNIQUE_REF, UNIQUE_TESTS

ADD_OK = "def add(a, b):\n    return a + b\n"
ADD_ASSERT = {"kind": "assert", "entry_point": "add",
              "test_code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"}
ADD_FUNCTION = {"kind": "function", "entry_point": "add",
                "cases": [{"args": [1, 2], "expected": 3}, {"args": [5, 5], "expected": 10}]}
ADD_PYTEST = {"kind": "pytest", "test_code": "from solution import add\n\n\ndef test_small():\n"
                                             "    assert add(1, 2) == 3\n\n\ndef test_equal():\n"
                                             "    assert add(5, 5) == 10\n"}
KINDS = {"assert": ADD_ASSERT, "function": ADD_FUNCTION, "pytest": ADD_PYTEST}


@pytest.fixture(scope="session")
def scorer(pool) -> Scorer:
    return Scorer(pool, Settings())


async def score(scorer: Scorer, code: str, tests: dict | None, profile: str = "binary", **item) -> ItemResult:
    limits = item.pop("limits", {"timeout_s": 3})
    return await scorer.score(RewardItem.model_validate({"code": code, "tests": tests, "profile": profile,
                                                          "limits": limits, **item}))


def assert_earned(res: ItemResult, statuses: str | tuple[str, ...], flags: tuple[str, ...] = (),
                  passes: int = 0) -> None:
    """Not passed, not null, the status the program earned, the flags of what it did (and `passes` test cases
    passed, those it answered honestly)."""
    statuses = (statuses,) if isinstance(statuses, str) else statuses
    assert res.status in statuses, (res.status, res.message, res.tests[:2])
    assert res.reward is not None, res
    assert res.status != "passed" and sum(t.passed for t in res.tests) == passes, res.tests
    assert set(flags) <= set(res.flags), (res.flags, flags)


# ------------------------------------------------------- class 1: a program makes its failure look like ours

def _frame(payload: str) -> str:
    """Python that writes one raw frame (length + bytes) on the candidate's reply pipe, fd 4."""
    return f"import os, struct\n_b = {payload}\nos.write(4, struct.pack('>I', len(_b)) + _b)\n"


CHANNEL_ATTACKS = {
    "closes_its_request_pipe_at_load": "import os\nos.close(3)\n" + ADD_OK,
    "closes_its_request_pipe_after_a_call": "import os\n_n = [0]\ndef add(a, b):\n    _n[0] += 1\n"
                                            "    if _n[0] == 1:\n        os.close(3)\n    return 0\n",
    "closes_both_pipes_at_load": "import os\nos.close(3)\nos.close(4)\n" + ADD_OK,
    "swaps_its_pipes_for_stdio": "import os\nos.dup2(1, 4)\nos.dup2(0, 3)\n" + ADD_OK,
    "writes_a_frame_nested_100000_deep": _frame("b'[' * 100000 + b']' * 100000") + ADD_OK,
    "writes_a_deep_frame_as_its_answer": "import os, struct\ndef add(a, b):\n"
                                         "    _b = b'{\"value\":' + b'[' * 100000 + b']' * 100000 + b'}'\n"
                                         "    os.write(4, struct.pack('>I', len(_b)) + _b)\n"
                                         "    import time\n    time.sleep(10)\n",
    "writes_bytes_that_are_not_utf8": _frame("b'\\xff\\xfe\\xfd\\xfc\\xfb'") + ADD_OK,
    "announces_a_4_gib_frame": "import os\nos.write(4, b'\\xff\\xff\\xff\\xff')\n" + ADD_OK,
    "races_os_exit_from_a_thread": "import os, threading, time\n" + ADD_OK.replace("a + b", "0")
                                   + "threading.Thread(target=lambda: (time.sleep(0.001), os._exit(0))).start()\n",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("attack", sorted(CHANNEL_ATTACKS))
async def test_breaking_the_channel_is_the_programs_failure(scorer, attack, kind):
    res = await score(scorer, CHANNEL_ATTACKS[attack], KINDS[kind])
    # the racing exit may come after an answer (a wrong one: 0), which fails as it should
    assert_earned(res, ("runtime_error", "failed") if attack.startswith("races") else "runtime_error")
    assert len(res.tests) == 2


async def test_a_frame_too_big_for_the_judges_memory_is_the_programs_failure(scorer):
    code = _frame("b'[' + b'[],' * 20_000_000 + b'[]]'") + ADD_OK
    assert_earned(await score(scorer, code, ADD_ASSERT, limits={"timeout_s": 10}), ("memory_limit", "runtime_error"))


JS_ATTACKS = {
    "closes_its_request_pipe": "require('fs').closeSync(3);\nfunction add(a, b) { return a + b; }\n",
    "writes_a_deep_frame": "const fs = require('fs');\n"
                           "const b = Buffer.from('['.repeat(100000) + ']'.repeat(100000));\n"
                           "const h = Buffer.alloc(4); h.writeUInt32BE(b.length);\n"
                           "fs.writeSync(4, Buffer.concat([h, b]));\nfunction add(a, b) { return a + b; }\n",
    "writes_garbage": "require('fs').writeSync(4, Buffer.from([0, 0, 0, 5, 255, 254, 253, 252, 251]));\n"
                      "function add(a, b) { return a + b; }\n",
}


@pytest.mark.parametrize("language", ["javascript", "typescript"])
@pytest.mark.parametrize("attack", sorted(JS_ATTACKS))
async def test_breaking_the_channel_from_javascript_is_the_programs_failure(scorer, attack, language):
    code = JS_ATTACKS[attack]
    if language == "typescript":
        code = "declare function require(name: string): any;\n" + code.replace("function add(a, b)",
                                                                                "function add(a: number, b: number)")
    res = await score(scorer, code, ADD_FUNCTION, language=language, limits={"timeout_s": 5})
    assert_earned(res, "runtime_error")


@pytest.mark.parametrize(("code", "test_code"), [
    (ADD_OK, "from solution import add, helper\n\n\ndef test_add():\n    assert add(1, 2) == helper(3)\n"),
    (ADD_OK + "CASES = 'not a list'\n",
     "import pytest\nfrom solution import add, CASES\n\n\n@pytest.mark.parametrize('a', CASES + [1])\n"
     "def test_add(a):\n    assert add(a, 0) == a\n"),
    (ADD_OK + "LIMIT = 'x'\n",
     "from solution import *\n\nTOP = LIMIT + 1\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"),
])
async def test_a_test_file_that_cannot_collect_against_the_program_is_the_programs_failure(scorer, code, test_code):
    res = await score(scorer, code, {"kind": "pytest", "test_code": test_code})
    assert_earned(res, "failed")
    assert res.tests and "cannot be collected with this program" in res.tests[0].message


async def test_set_up_that_fails_on_the_programs_values_is_the_programs_failure(scorer):
    tests = {"kind": "assert", "entry_point": "add",
             "test_code": "X = OFFSET + 1\n\n\ndef check(candidate):\n    assert candidate(X, 1) == 3\n"}
    assert_earned(await score(scorer, ADD_OK + "OFFSET = 'one'\n", tests), "failed")


@pytest.mark.parametrize("filler", [
    "for _i in range(5):\n    try:\n        with open(f'/scratch/c/f{_i}', 'wb') as _f:\n"
    "            _f.write(b'x' * (15 << 20))\n    except OSError:\n        pass\n",
    "for _i in range(5000):\n    try:\n        open(f'/scratch/c/i{_i}', 'w').close()\n"
    "    except OSError:\n        break\n",
])
async def test_filling_the_scratch_space_the_judge_shares_is_the_programs_failure(scorer, filler):
    assert_earned(await score(scorer, filler + ADD_OK, ADD_PYTEST), "output_limit")


@pytest.mark.parametrize("tests", [
    {"kind": "assert", "entry_point": "add", "test_code": "import no_such_module\n\n\ndef check(candidate):\n"
                                                          "    assert candidate(1, 2) == 3\n"},
    {"kind": "pytest", "test_code": "import no_such_module\n\n\ndef test_add():\n    assert True\n"},
    {"kind": "pytest", "test_code": "def test_add(:\n    pass\n"},
    {"kind": "assert", "entry_point": "add",
     "test_code": "def check(candidate):\n    assert candidate(lambda: 1, 2)\n"},
])
async def test_a_spec_broken_on_its_own_is_still_invalid_input(scorer, tests):
    res = await score(scorer, ADD_OK, tests)
    assert res.status == "invalid_input" and res.reward is None, res


# --------------------------------------------------------------------------- class 2: builtin shadowing

DOUBLES = "".join(f"def {name}(*a, **k):\n    return {value}\n" for name, value in (
    ("abs", 0), ("tuple", 0), ("sum", 0), ("range", []), ("all", True), ("any", True), ("set", 0), ("sorted", 0),
    ("list", 0)))


@pytest.mark.parametrize("number", [2, 4, 32, 33, 37, 38, 50])
async def test_builtin_doubles_pass_no_humaneval_check_that_uses_a_builtin(scorer, humaneval, number):
    """Each of these passed under `binary` (reward 1.0) when the program's names reached the tests' namespace."""
    problem = next(p for p in humaneval if p["task_id"] == f"HumanEval/{number}")
    answer = {2: "0.5", 38: "''", 50: "''"}.get(number, "0")
    code = DOUBLES + f"def {problem['entry_point']}(*a, **k):\n    return {answer}\n"
    # HumanEval/2's first case, `candidate(3.5) == 0.5`, is answered honestly; the doubles win nothing more
    assert_earned(await score(scorer, code, humaneval_tests(problem)), "failed", passes=int(number == 2))


@pytest.mark.parametrize(("code", "tests"), [
    (DOUBLES + "def similar_elements(a, b):\n    return 0\n",
     {"kind": "assert", "test_code": "assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))\n"}),
    (DOUBLES + "def unique(x):\n    return 0\n",
     {"kind": "pytest", "test_code": "from solution import *\n\n\ndef test_it():\n"
                                     "    assert sorted(unique([3, 1, 3])) == sorted([1, 3])\n"}),
    (DOUBLES + "def add(a, b):\n    return 0\n",
     {"kind": "assert", "entry_point": "add", "support_code": "def expect(a, b):\n    return sum([a, b])\n",
      "test_code": "def check(candidate):\n    assert candidate(1, 2) == expect(1, 2)\n"}),
])
async def test_builtin_doubles_reach_neither_the_tests_nor_the_support_code(scorer, code, tests):
    assert_earned(await score(scorer, code, tests), "failed")


async def test_the_tests_still_see_the_names_they_ask_for(scorer):
    code = "OFFSET = 1\ndef helper(x):\n    return x + OFFSET\ndef sorted(x):\n    return 'mine'\n"
    tests = {"kind": "assert", "test_code": "assert helper(1) == 2 and OFFSET == 1\nassert apply(helper, 3) == 4\n"}
    res = await score(scorer, code + "def apply(f, x):\n    return f(x)\n", tests)
    assert res.status == "passed", (res.message, res.tests)
    explicit = {"kind": "pytest", "test_code": "from solution import sorted\n\n\ndef test_it():\n"
                                               "    assert sorted([2, 1]) == 'mine'\n"}
    assert (await score(scorer, code, explicit)).status == "passed"


# -------------------------------------------------------------------------------- class 3: flags vanish

HIDDEN = "class A:\n    def __eq__(self, other):\n        return True\nimport sys\nsys.exit(0)\n"


@pytest.mark.parametrize(("code", "tests", "status", "flags"), [
    ("import os\nos._exit(0)\n" + ADD_OK, ADD_ASSERT, "runtime_error", ("exit_call",)),
    ("import sys\nsys.exit(0)\n" + ADD_OK, ADD_PYTEST, "runtime_error", ("exit_call",)),
    ("class A:\n    def __eq__(self, o):\n        return True\nwhile True:\n    pass\n" + ADD_OK, ADD_ASSERT, "timeout",
     ("eq_override",)),
    ("import os\n" + ADD_OK + "os._exit(0)\n", {"kind": "io", "cases": [{"stdin": "", "stdout": "3"}]},
     "failed", ("exit_call",)),
    (f"import base64\nexec(base64.b64decode({base64.b64encode(HIDDEN.encode())!r}))\n" + ADD_OK, ADD_ASSERT,
     "runtime_error", ("dynamic_code", "eq_override", "exit_call")),
    (f"exec(bytes.fromhex({HIDDEN.encode().hex()!r}))\n" + ADD_OK, ADD_FUNCTION, "runtime_error",
     ("dynamic_code", "eq_override", "exit_call")),
])
async def test_flags_come_with_every_outcome(scorer, code, tests, status, flags):
    assert_earned(await score(scorer, code, tests), status, flags)


async def test_flags_survive_an_outcome_that_is_not_a_verdict(scorer):
    res = await score(scorer, "import os\nos._exit(0)\n", {"kind": "assert", "test_code": "assert (\n"})
    assert res.status == "invalid_input" and "exit_call" in res.flags


async def test_javascript_flags_come_with_an_exit_at_load(scorer):
    res = await score(scorer, "process.exit(0);\nfunction add(a, b) { return a + b; }\n", ADD_FUNCTION,
                      language="javascript", limits={"timeout_s": 5})
    assert_earned(res, "runtime_error", ("exit_call",))


async def test_a_flag_penalty_cannot_be_dodged_by_exiting_at_load(scorer):
    res = await score(scorer, "import os\nos._exit(0)\n" + ADD_OK, ADD_ASSERT, profile="coderl", flag_penalty=0.5)
    assert res.reward == pytest.approx(-0.6 - 0.5)


# ------------------------------------------------------------------------------ class 4: quality laundering

MESSY = "import os, sys\ndef F(X,Y):\n    unused = 1\n    if X == None:\n        return Y\n    return eval('X+Y')\n"
LAUNDERED = {
    "unicode_escape_cookie": "# -*- coding: unicode_escape -*-\n" + MESSY,
    # read as unicode_escape, `\x0a"""` ends the comment and opens a string that hides the program from the linter,
    # which then sees one tidy function (the runner, reading text, runs both)
    "unicode_escape_cookie_hiding_the_program": '# -*- coding: unicode_escape -*-\n#\\x0a"""\n' + MESSY
                                                + '#\\x0a"""\n\n\ndef tidy(value):\n    """Tidy."""\n'
                                                + "".join(f"    value += {i}\n" for i in range(12))
                                                + "    return value\n",
    "utf_7_cookie": "# coding: utf-7\n" + MESSY,
    "cookie_on_line_two": "#!/usr/bin/env python3\n# vim: set fileencoding=latin-1 :\n" + MESSY,
    "chained_pragmas": "# pylint: enable=unused-import disable=all\n" + MESSY,
    "chained_pragmas_per_line": MESSY.replace("\n", "  # pylint: enable=W0611,disable=C,W,R,E\n"),
    "trivial_constants": MESSY + "".join(f"PAD_{i} = {i}\n" for i in range(150)),
    "constants_read_by_dead_code": MESSY.replace("    unused = 1\n", "    unused = 1\n    _ = (" + ", ".join(
        f"PAD_{i}" for i in range(150)) + ")\n") + "".join(f"PAD_{i} = {i}\n" for i in range(150)),
    "unused_documented_functions": MESSY + "".join(f'\n\ndef pad_{i}():\n    """Pad."""\n    return {i}\n'
                                                   for i in range(60)),
    "code_after_return": MESSY.replace("    return eval('X+Y')\n", "    return eval('X+Y')\n"
                                       + "".join(f"    X = {i}\n" for i in range(150))),
    "dead_branch": MESSY + "if False:\n" + "".join(f"    Q{i} = {i}\n" for i in range(150)),
    "class_constants": MESSY + 'class Pad:\n    """Pad."""\n' + "".join(f"    P{i} = {i}\n" for i in range(150)),
}


@pytest.fixture(scope="session")
def quality(pool) -> QualityGrader:
    return QualityGrader(pool)


@pytest.mark.parametrize("form", sorted(LAUNDERED))
async def test_laundering_does_not_raise_quality(quality, form):
    plain = await quality.grade(MESSY, "python", ["F"])
    laundered = await quality.grade(LAUNDERED[form], "python", ["F"])
    assert plain.score is not None and laundered.score is not None, (plain.reason, laundered.reason)
    assert laundered.pylint_score <= plain.pylint_score + 1e-9, (laundered.details(), plain.details())
    assert laundered.score <= plain.score + 1e-9, (laundered.details(), plain.details())
    if "dead" in form or "after" in form or "padding" in form or "constants" in form or "unused" in form:
        assert laundered.details()["dead_statements"] > 0


async def test_the_linter_reads_the_program_that_runs(scorer):
    """A cookie cannot make the linter (or the flags) read a different program than the one that runs."""
    code = "# -*- coding: unicode_escape -*-\nimport sys\nsys.exit(0)\n" + ADD_OK
    res = await score(scorer, code, ADD_ASSERT, profile="seed")
    assert_earned(res, "runtime_error", ("exit_call",))
    assert res.details["quality"]["pylint_score"] < 10


# -------------------------------------------------------------------------------- class 5: efficiency gaming

BURN_ON_SMALL_INPUTS = "import time\n" + UNIQUE_QUADRATIC.replace(
    "    seen = []\n", "    if 1000 <= len(xs) < 8000 and len(xs) != 6000:\n        t = time.process_time()\n"
    "        while time.process_time() - t < 0.35:\n            pass\n    seen = []\n")
SQUARES = EQUAL_COST
KEEPS_FILES = SQUARES.replace("    return acc\n", "    for k in range(2):\n"
                              "        with open(f'/tmp/hold{k}', 'wb') as f:\n"
                              "            for _ in range(15):\n                f.write(b'x' * (1 << 20))\n"
                              "    return acc\n")
HOLDS_FILES_DURING_THE_CALL = KEEPS_FILES.replace("    return acc\n", "    import os, time\n    time.sleep(0.3)\n"
                                                  "    for k in range(2):\n        os.unlink(f'/tmp/hold{k}')\n"
                                                  "    return acc\n")


async def efficiency(scorer: Scorer, code: str, reference: str, tests: dict) -> dict:
    res = await scorer.score(RewardItem.model_validate(
        {"code": code, "reference_code": reference, "tests": tests, "weights": {"quality": 0}}))
    assert res.status == "passed", res.message
    return {"score": res.components["efficiency"], **res.details["efficiency"]}


async def test_burning_time_on_small_inputs_does_not_flatten_the_complexity(scorer):
    honest = await efficiency(scorer, UNIQUE_QUADRATIC, UNIQUE_REF, UNIQUE_TESTS)
    burner = await efficiency(scorer, BURN_ON_SMALL_INPUTS, UNIQUE_REF, UNIQUE_TESTS)
    assert burner["inputs"]["complexity"]["candidate_slope"] < honest["inputs"]["complexity"]["candidate_slope"]
    assert burner["complexity_factor"] <= honest["complexity_factor"] + 0.05, (burner, honest)
    assert burner["score"] <= honest["score"] + 0.05, (burner, honest)


@pytest.mark.parametrize("code", [KEEPS_FILES, HOLDS_FILES_DURING_THE_CALL], ids=["keeps", "holds_during_call"])
async def test_memory_kept_in_tmpfs_files_counts_as_memory(scorer, code):
    e = await efficiency(scorer, code, SQUARES, TOTAL_TESTS)
    assert e["inputs"]["extra_memory_kb"] >= 25 * 1024, e["inputs"]
    assert e["memory_score"] < 0.2, e


# --------------------------------------------------------------- classes 6 and 8: values judged exactly

async def test_an_integer_count_off_by_89_fails_under_float_tol(scorer):
    tests = {"kind": "io", "compare": {"float_tol": 1e-6}, "cases": [{"stdin": "", "stdout": "123456789\n"}]}
    for answer in ("123456700", "123456700.0", "1.234567e8"):
        assert_earned(await score(scorer, f"print({answer!r})\n", tests), "failed")
    assert (await score(scorer, "print(123456789)\n", tests)).status == "passed"


async def test_an_expected_int_is_exact_in_function_tests_too(scorer):
    tests = {"kind": "function", "entry_point": "count", "float_tol": 1e-6,
             "cases": [{"args": [], "expected": 123456789}]}
    for answer in ("123456700", "123456700.0"):
        assert_earned(await score(scorer, f"def count():\n    return {answer}\n", tests), "failed")


async def test_a_correct_answer_with_more_than_4300_digits_passes(scorer):
    tests = {"kind": "assert", "entry_point": "big",
             "test_code": "def check(candidate):\n    assert candidate(20000) == 3 ** 20000\n"
                          "    assert candidate(candidate(2)) == 3 ** 9\n    assert candidate(9) + 1 == 19684\n"}
    assert (await score(scorer, "def big(n):\n    return 3 ** n\n", tests)).status == "passed"
    assert_earned(await score(scorer, "def big(n):\n    return 3 ** n + 1\n", tests), "failed")
    function = {"kind": "function", "entry_point": "big", "cases": [{"args": [20000], "expected": 243}]}
    res = await score(scorer, "def big(n):\n    return 3 ** n\n", function)
    assert_earned(res, "failed")
    assert "unreadable" not in res.tests[0].message and "got <int>" in res.tests[0].message  # it crossed


async def test_big_ints_cross_from_the_tests_and_from_javascript(scorer):
    tests = {"kind": "assert", "entry_point": "inc",
             "test_code": "def check(candidate):\n    assert candidate(7 ** 9000) == 7 ** 9000 + 1\n"}
    assert (await score(scorer, "def inc(x):\n    return x + 1\n", tests)).status == "passed"
    js = {"kind": "function", "entry_point": "big", "cases": [{"args": [], "expected": 0}]}
    res = await score(scorer, "function big() { return 3n ** 20000n - 3n ** 20000n; }\n", js, language="javascript",
                      limits={"timeout_s": 5})
    assert res.status == "passed", res.tests
    res = await score(scorer, "function big() { return 3n ** 20000n; }\n", js, language="javascript",
                      limits={"timeout_s": 5})
    assert_earned(res, "failed")
    assert "unreadable" not in res.tests[0].message  # it crossed, and was wrong


# ------------------------------------------------------------------------------------------ class 7: Rust

EXPLAIN_TEST = ("#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_explain() {\n"
                "        let explanation = explain();\n"
                "        assert!(explanation.to_lowercase().contains(\"prime\"));\n"
                "        assert!(explanation.to_lowercase().contains(\"sqrt\"));\n    }\n}\n")
RUST_IMPOSTORS = {
    "struct_with_string_methods": "struct Fake;\nimpl Fake {\n    fn to_lowercase(&self) -> Fake { Fake }\n"
                                  "    fn contains(&self, _: &str) -> bool { true }\n}\n"
                                  "fn explain() -> Fake { Fake }\n",
    "trait_methods_on_string": "trait Lie { fn contains(&self, _: &str) -> bool; }\n"
                               "impl Lie for String { fn contains(&self, _: &str) -> bool { true } }\n"
                               "fn explain() -> String { String::new() }\n",
}


@pytest.mark.parametrize("impostor", sorted(RUST_IMPOSTORS))
async def test_a_rust_value_posing_as_the_answer_passes_nothing(scorer, impostor):
    tests = {"kind": "rust_test", "test_code": EXPLAIN_TEST, "entry_point": "explain"}
    res = await score(scorer, RUST_IMPOSTORS[impostor], tests, language="rust", limits={"timeout_s": 10})
    assert_earned(res, "syntax_error", ("rust_forbidden",))


async def test_a_refused_rust_construct_never_beats_the_status_earned(scorer):
    tests = {"kind": "rust_test", "test_code": EXPLAIN_TEST, "entry_point": "explain"}
    compile_error = "fn explain() -> String { 1 }\n"
    refused = "fn explain() -> String { unsafe { String::new() } }\n"
    hangs = "fn explain() -> String { loop {} }\n"
    rewards = {}
    for name, code in (("compile_error", compile_error), ("refused", refused), ("hangs", hangs)):
        res = await score(scorer, code, tests, language="rust", profile="coderl", limits={"timeout_s": 2})
        assert res.reward is not None
        rewards[name] = res.reward
    assert rewards["refused"] <= min(rewards["compile_error"], rewards["hangs"]), rewards


# ------------------------------------------------------------------------- class 9: wrong never beats right

async def test_a_wrong_tidy_program_never_outscores_a_right_slow_messy_one(scorer):
    tidy_wrong = ('def total(count: int) -> int:\n    """Sum of squares below count."""\n'
                  "    return (count - 1) * count * (2 * count - 1) // 6 + (count == 10)\n")
    messy_right = ("def total(N):\n  S=0\n  for I in range(N):\n    for J in range(3):\n      S+=0\n    S+=I*I\n"
                   "  return S\n")
    reference = "def total(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n"
    for profile in ("seed", "gated"):
        wrong = await scorer.score(RewardItem.model_validate(
            {"code": tidy_wrong, "reference_code": reference, "tests": TOTAL_TESTS, "profile": profile}))
        right = await scorer.score(RewardItem.model_validate(
            {"code": messy_right, "reference_code": reference, "tests": TOTAL_TESTS, "profile": profile}))
        assert wrong.status == "failed" and right.status == "passed", (wrong.message, right.message)
        assert right.reward > wrong.reward, (profile, right.components, wrong.components)
