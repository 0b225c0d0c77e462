"""The pure rules behind judging integrity (issue 12), no sandbox needed: reward ordering (a property test), flags
computed from the source, the codec's big ints, tolerance rules, dead-code counting and Rust refusals.
The same classes run for real against the sandbox in tests/test_judging_integrity.py."""

from __future__ import annotations

import base64
import codecs
import re
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.flags import js_flags, python_flags
from graders.rust_tests import forbidden_constructs
from graders.verdicts import outputs_match
from service.models import FloatTolerance
from service.reward import MARGIN, aggregate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sandboxes" / "inside"))
import codec  # noqa: E402
import dead_code  # noqa: E402
import judge  # noqa: E402

# ------------------------------------------------------------------------------------ class 9: reward ordering

unit = st.floats(0, 1, allow_nan=False)
maybe = st.one_of(st.none(), unit)
weight = st.floats(0, 10, allow_nan=False)


@st.composite
def weights(draw):
    w = {c: draw(weight) for c in ("executability", "pass_rate", "quality", "efficiency")}
    if w["executability"] + w["pass_rate"] < 1e-4:  # what the validator and the 6-decimal reward allow
        w["pass_rate"] = 1e-4 + draw(weight)
    return w


@pytest.mark.parametrize("profile", ["seed", "gated"])
@settings(max_examples=1500, deadline=None)
@given(w=weights(), passing_quality=maybe, passing_efficiency=maybe, executable=st.booleans(),
       rate=st.floats(0, 1, exclude_max=True), quality=maybe, efficiency=maybe)
def test_passing_every_test_always_outscores_not_passing(profile, w, passing_quality, passing_efficiency,
                                                         executable, rate, quality, efficiency):
    passing = aggregate(profile, w, {"executability": 1.0, "pass_rate": 1.0, "quality": passing_quality,
                                     "efficiency": passing_efficiency}, "passed", True, False, 0.0)
    failing = aggregate(profile, w, {"executability": float(executable), "pass_rate": rate, "quality": quality,
                                     "efficiency": efficiency}, "failed", False, False, 0.0)
    assert passing > failing, (passing, failing)


@pytest.mark.parametrize("profile", ["seed", "gated"])
@settings(max_examples=500, deadline=None)
@given(w=weights(), low=st.floats(0, 1, exclude_max=True), high=st.floats(0, 1, exclude_max=True), quality=maybe)
def test_among_failing_programs_a_higher_pass_rate_never_scores_lower(profile, w, low, high, quality):
    low, high = min(low, high), max(low, high)
    score = lambda rate: aggregate(profile, w, {"executability": 1.0, "pass_rate": rate, "quality": quality,  # noqa: E731
                                                "efficiency": None}, "failed", False, False, 0.0)
    assert score(high) >= score(low)


def test_the_documented_best_non_solving_rewards_with_default_weights():
    w = {"executability": 0.4, "pass_rate": 0.35, "quality": 0.15, "efficiency": 0.1}
    near = {"executability": 1.0, "pass_rate": 0.999999, "quality": 1.0, "efficiency": None}
    stub = {"executability": 1.0, "pass_rate": 0.0, "quality": 1.0, "efficiency": None}
    worst_pass = {"executability": 1.0, "pass_rate": 1.0, "quality": 0.0, "efficiency": 0.0}
    assert aggregate("seed", w, near, "failed", False, False, 0) == pytest.approx(0.75 * (1 - MARGIN) * 0.9, abs=1e-5)
    assert aggregate("seed", w, stub, "failed", False, False, 0) == pytest.approx(0.75 * (1 - MARGIN) * 0.55)
    assert aggregate("gated", w, near, "failed", False, False, 0) == pytest.approx(0.75 * (1 - MARGIN), abs=1e-5)
    assert aggregate("gated", w, stub, "failed", False, False, 0) == pytest.approx(0.4 * (1 - MARGIN))
    assert aggregate("seed", w, worst_pass, "passed", True, False, 0) == 0.75
    # the example: a wrong tidy program (0.846 before) against a right, slow, badly formatted one (0.812)
    wrong = aggregate("seed", w, {"executability": 1, "pass_rate": 0.9, "quality": 0.96, "efficiency": None},
                      "failed", False, False, 0)
    right = aggregate("seed", w, {"executability": 1, "pass_rate": 1, "quality": 0.3, "efficiency": 0.17},
                      "passed", True, False, 0)
    assert right > wrong


def test_weights_that_cannot_rank_passing_first_are_rejected():
    from pydantic import ValidationError

    from service.models import RewardItem

    with pytest.raises(ValidationError, match="executability \\+ pass_rate"):
        RewardItem.model_validate({"code": "", "weights": {"executability": 0, "pass_rate": 0, "quality": 1}})
    RewardItem.model_validate({"code": "", "profile": "binary",
                               "weights": {"executability": 0, "pass_rate": 0, "quality": 1}})


# ---------------------------------------------------------------------------------------- class 3: flags

HIDDEN = "class A:\n    def __eq__(self, other):\n        return True\nimport os\nos._exit(0)\n"
HIDDEN_FLAGS = {"eq_override", "exit_call"}


@pytest.mark.parametrize("payload", [
    f"exec(bytes.fromhex({HIDDEN.encode().hex()!r}))\n",
    f"import base64\nexec(base64.b64decode({base64.b64encode(HIDDEN.encode()).decode()!r}).decode())\n",
    f"from base64 import b64decode as d\nP = {base64.b64encode(HIDDEN.encode()).decode()!r}\nexec(d(P))\n",
    f"import zlib, base64\nexec(zlib.decompress(base64.b64decode("
    f"{base64.b64encode(zlib.compress(HIDDEN.encode())).decode()!r})))\n",
    f"import codecs\nexec(codecs.decode({codecs.encode(HIDDEN, 'rot13')!r}, 'rot13'))\n",
    f"exec({HIDDEN[::-1]!r}[::-1])\n",
    f"exec(''.join(chr(c) for c in {[ord(c) for c in HIDDEN]!r}))\n",
    f"exec(''.join(map(chr, {[ord(c) for c in HIDDEN]!r})))\n",
    f"SRC = {HIDDEN!r}\nrun = compile(SRC, 'x', 'exec')\nexec(run)\n",
])
def test_decoded_payloads_are_flagged_with_what_they_hide(payload):
    flags = set(python_flags(payload))
    assert {"dynamic_code"} | HIDDEN_FLAGS <= flags, flags


@pytest.mark.parametrize("code", [
    "run = exec\nrun('x = 1')\n",
    "def f(x):\n    return eval(CODE)\nCODE = '1 + 1'\n",
    "import os\nname = input()\ngetattr(os, name)(0)\n",
    "m = __import__(input())\n",
    "import marshal\nexec(marshal.loads(b''))\n",
])
def test_code_run_from_data_is_flagged(code):
    assert "dynamic_code" in python_flags(code)


def test_exits_hidden_behind_getattr_and_dunder_import_are_flagged():
    assert "exit_call" in python_flags("import os\ngetattr(os, '_ex' + 'it')(0)\n")
    assert "exit_call" in python_flags("__import__('o' + 's')._exit(0)\n")


@pytest.mark.parametrize("code", [
    "def do_algebra(operator, operand):\n    expression = str(operand[0])\n"
    "    for oprt, oprn in zip(operator, operand[1:]):\n        expression += oprt + str(oprn)\n"
    "    return eval(expression)\n",  # HumanEval/160's canonical solution evaluates its input
    "import re\nP = re.compile('a+')\nfrom re import compile\nQ = compile('b')\n",
    "def add(a, b):\n    return a + b\n",
])
def test_ordinary_programs_are_not_flagged(code):
    assert python_flags(code) == []


def test_payload_folding_is_bounded():
    assert "dynamic_code" in python_flags("exec('a' * 10**12)\n")  # flagged, never built
    bomb = zlib.compress(b"#" * 50_000_000)
    assert "dynamic_code" in python_flags(f"import zlib\nexec(zlib.decompress({bomb!r}))\n")
    assert python_flags("(" * 10_000) == []  # does not parse: nothing of it runs


def test_encoding_declarations_change_nothing_the_flags_read():
    code = "import os\nos._exit(0)\n"
    assert python_flags("# -*- coding: unicode_escape -*-\n" + code) == python_flags(code) == ["exit_call"]


def test_javascript_flags_ignore_comments_and_strings():
    assert js_flags("process.exit(0);\n") == ["exit_call"]
    assert js_flags("const f = new Function('return 1');\n") == ["dynamic_code"]
    assert js_flags("const t = `a${eval('1')}b`;\n") == ["dynamic_code"]
    assert js_flags("// process.exit(0) and eval(x)\nconst s = 'eval(' + \"process.exit\";\n"
                    "const r = /eval(/g;\n") == []


# ------------------------------------------------------------------------------ classes 6 and 8: values

def test_float_tolerance_never_applies_to_integer_tokens():
    tol = FloatTolerance(float_tol=1e-6)
    assert not outputs_match("123456700\n", "123456789\n", tol)
    assert not outputs_match("123456700.0\n", "123456789\n", tol)
    assert outputs_match("+0123456789\n", "123456789\n", tol)
    assert outputs_match("3.0000001 2\n", "3.0 2\n", tol)
    assert outputs_match("9" * 5000 + "\n", "9" * 5000 + "\n", tol)
    assert not outputs_match("9" * 5000 + "8\n", "9" * 5001 + "\n", tol)  # no int() of a 5,000-digit token


def test_function_float_tolerance_applies_to_expected_floats_only():
    assert judge.values_match(123456700, 123456789, 1e-6) is False
    assert judge.values_match(123456700.0, 123456789, 1e-6) is False
    assert judge.values_match(2.0, 2, 1e-6) is True
    assert judge.values_match(2.0000001, 2.0, 1e-6) is True


@pytest.mark.parametrize("value", [2**20000, -(3**30000), 10**3999, 10**4000, {"k": [2**50000]}],
                         ids=["2^20000", "-3^30000", "10^3999", "10^4000", "nested 2^50000"])
def test_big_ints_cross_the_codec_exactly(value):
    assert codec.decode(codec.encode(value)) == value


def test_the_codec_rejects_references_on_the_judges_side():
    with pytest.raises(codec.Unencodable):
        codec.decode(["r", "add"])
    assert codec.decode(["r", "add"], resolve=lambda name: name.upper()) == "ADD"


# ------------------------------------------------------------------------------ class 4: dead statements

@pytest.mark.parametrize("padding", [
    "".join(f"PAD_{i} = {i}\n" for i in range(50)),
    "".join(f"PAD_{i}: int = abs(-{i})\n" for i in range(50)),
    "".join(f'\n\ndef pad_{i}():\n    """Pad."""\n    return {i}\n' for i in range(20)),
    "if False:\n" + "".join(f"    Q{i} = {i}\n" for i in range(50)),
    "class Pad:\n    \"\"\"Pad.\"\"\"\n" + "".join(f"    P{i} = {i}\n" for i in range(50)),
])
def test_padding_adds_only_dead_statements(padding):
    import ast

    program = "import os\n\n\ndef solve(x):\n    return os.path.join(x, 'a')\n"
    padded = program + padding
    live = dead_code.count_statements(ast.parse(program)) - dead_code.dead_statements(ast.parse(program), ["solve"])
    live_padded = (dead_code.count_statements(ast.parse(padded))
                   - dead_code.dead_statements(ast.parse(padded), ["solve"]))
    assert live_padded == live


def test_constants_read_only_by_dead_code_are_dead_too():
    import ast

    code = ("def solve(x):\n    _ = (PAD_0, PAD_1)\n    return x\n    y = 1\n" + "PAD_0 = 0\nPAD_1 = 1\n")
    tree = ast.parse(code)
    assert dead_code.count_statements(tree) - dead_code.dead_statements(tree, ["solve"]) == 2  # def, return


def test_code_the_program_needs_stays_live():
    import ast

    code = ("import math\nTABLE = []\nfor i in range(10):\n    TABLE.append(math.sqrt(i))\n\n\n"
            "def solve(i):\n    return TABLE[i]\n")
    tree = ast.parse(code)
    assert dead_code.dead_statements(tree, ["solve"]) == 0
    script = "n = int(input())\nprint(n * 2)\n"
    assert dead_code.dead_statements(ast.parse(script), []) == 0


# ------------------------------------------------------------------------------ class 7: Rust impostors

EXPLAIN_TEST = ("#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn test_explain() {\n"
                "        let e = explain();\n        assert!(e.to_lowercase().contains(\"prime\"));\n    }\n}\n")


@pytest.mark.parametrize("code", [
    "struct Fake;\nimpl Fake {\n    fn to_lowercase(&self) -> Fake { Fake }\n"
    "    fn contains(&self, _: &str) -> bool { true }\n}\nfn explain() -> Fake { Fake }\n",
    "trait Lie { fn contains(&self, _: &str) -> bool; }\n"
    "impl Lie for String { fn contains(&self, _: &str) -> bool { true } }\nfn explain() -> String { String::new() }\n",
    "macro_rules! m { ($n:ident) => { struct F; impl F { fn $n(&self) -> bool { true } } } }\nm!(contains);\n"
    "fn explain() -> String { String::new() }\n",
])
def test_rust_types_posing_as_the_answer_are_refused(code):
    assert forbidden_constructs(code, EXPLAIN_TEST)


def test_rust_canonical_style_code_is_not_refused():
    code = ("fn explain() -> String {\n    let s = String::from(\"checks whether n is prime\");\n"
            "    s.to_lowercase()\n}\n")
    assert forbidden_constructs(code, EXPLAIN_TEST) == []


def test_the_service_process_parses_python_only_through_the_locked_parser():
    """Flags, lint roots and validation parse from the event loop and from threads at once; CPython 3.11's AST
    conversion is not thread-safe (graders/pyast.py), so no host-side module may call ast.parse itself."""
    root = Path(__file__).resolve().parent.parent
    direct = re.compile(r"(?<!\w)ast\.parse\(")
    offenders = [str(p.relative_to(root)) for folder in ("service", "graders", "sandboxes", "rewardbox")
                 for p in (root / folder).rglob("*.py")
                 if "inside" not in p.parts and p.name != "pyast.py" and direct.search(p.read_text())]
    assert offenders == []
