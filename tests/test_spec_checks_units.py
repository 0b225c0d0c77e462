"""Test specs that can judge no program are the client's mistake: a 4xx naming the field on every route, never a
verdict charged to the program (service/spec_checks.py). No sandbox: the rules read the spec alone."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path

import pytest

from rewardbox.ground_truth import from_verification_info, from_verl
from service.config import Settings
from service.models import RewardItem
from service.spec_checks import case_groups
from service.validation import Problem, check_item

from .test_http_units import client_for, first_error

HUMANEVAL_CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
ADD = "def add(a, b):\n    return a + b\n"

# (test spec, language, the field named under `tests`, the error type)
REFUSED = [
    ({"kind": "assert", "test_code": HUMANEVAL_CHECK}, "python", ("tests", "entry_point"), "missing"),
    ({"kind": "assert", "test_code": "def check(c):\n    assert c(1) == 1\n\ncheck(None)\n"}, "python",
     ("tests", "entry_point"), "missing"),
    ({"kind": "assert", "test_code": "x = 1\nassert True\n"}, "python", ("tests", "test_code"), "no_tests"),
    ({"kind": "assert", "test_code": "print('hello')\n"}, "python", ("tests", "test_code"), "no_tests"),
    ({"kind": "assert", "test_code": "def check(candidate):\n    candidate(1)\n", "entry_point": "add"}, "python",
     ("tests", "test_code"), "no_tests"),
    ({"kind": "assert", "test_code": HUMANEVAL_CHECK, "entry_point": "add(a, b)"}, "python",
     ("tests", "entry_point"), "entry_point"),
    ({"kind": "function", "entry_point": "add numbers", "cases": [{"args": [1], "expected": 1}]}, "python",
     ("tests", "entry_point"), "entry_point"),
    ({"kind": "function", "entry_point": "a.b.c", "cases": [{"args": [1], "expected": 1}]}, "python",
     ("tests", "entry_point"), "entry_point"),
    ({"kind": "function", "entry_point": "$x", "cases": [{"args": [1], "expected": 1}]}, "python",
     ("tests", "entry_point"), "entry_point"),
    ({"kind": "function", "entry_point": "add()", "cases": [{"args": [1], "expected": 1}]}, "javascript",
     ("tests", "entry_point"), "entry_point"),
    ({"kind": "pytest", "test_code": "from solution import add\n\ndef check_add():\n    assert add(1, 2) == 3\n"},
     "python", ("tests", "test_code"), "no_tests"),
    ({"kind": "rust_test", "test_code": "mod tests { fn adds() { assert_eq!(1, 1); } }"}, "rust",
     ("tests", "test_code"), "no_tests"),
]

ACCEPTED = [
    ({"kind": "assert", "test_code": HUMANEVAL_CHECK, "entry_point": "add"}, "python"),
    ({"kind": "assert", "test_code": "assert add(1, 2) == 3\n"}, "python"),
    ({"kind": "assert", "test_code": "for a in range(3):\n    assert add(a, 0) == a\n"}, "python"),
    ({"kind": "assert", "test_code": "assert Solution().twoSum([1], 1) == []\n", "entry_point": "Solution.twoSum"},
     "python"),
    ({"kind": "assert", "test_code": "def check(:\n"}, "python"),  # the judge names the syntax error itself
    ({"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}, "python"),
    ({"kind": "function", "entry_point": "Solution.twoSum", "cases": [{"args": [[1], 1]}]}, "python"),
    ({"kind": "function", "entry_point": "$add", "cases": [{"args": [1, 2], "expected": 3}]}, "javascript"),
    ({"kind": "pytest", "test_code": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"},
     "python"),
    ({"kind": "pytest", "test_code": "class TestAdd:\n    def it_adds(self):\n        pass\n"}, "python"),
    ({"kind": "pytest", "test_code": "from shared_cases import test_shared\n"}, "python"),
    ({"kind": "io", "cases": [{"stdin": "1", "stdout": ""}]}, "python"),
    ({"kind": "rust_test", "test_code": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n}\n"}, "rust"),
]


def problem_of(tests: dict, language: str) -> RewardItem | Problem:
    item = RewardItem.model_validate({"language": language, "code": ADD, "tests": tests})
    return check_item(item, Settings())


@pytest.mark.parametrize(("tests", "language", "loc", "kind"), REFUSED)
def test_a_spec_that_can_judge_no_program_is_refused_naming_the_field(tests, language, loc, kind):
    problem = problem_of(tests, language)
    assert isinstance(problem, Problem), f"accepted: {tests}"
    assert (problem.loc, problem.type) == (loc, kind), problem.message


@pytest.mark.parametrize(("tests", "language"), ACCEPTED)
def test_a_spec_that_can_judge_a_program_is_accepted(tests, language):
    result = problem_of(tests, language)
    assert isinstance(result, RewardItem), result


def test_the_case_groups_are_the_judges_own():
    """service/spec_checks.case_groups must split test code exactly as the judge does, or a spec the judge would
    run could be refused (or the reverse)."""
    inside = Path(__file__).resolve().parents[1] / "sandboxes" / "inside"
    sys.path.insert(0, str(inside))
    try:
        judge = importlib.import_module("judge")
    finally:
        sys.path.remove(str(inside))
    sources = [HUMANEVAL_CHECK, "x = 1\nassert x\ny = 2\nassert True\nassert y == 2\n", "print(1)\n",
               "for i in range(3):\n    if i:\n        assert i\nz = 0\n", "assert (1, 2)\nassert 1 == 1\n"]
    for source in sources:
        body = ast.parse(source).body
        assert [[ast.dump(s) for s in g] for g in case_groups(body)] == \
            [[ast.dump(s) for s in g] for g in judge._case_groups(body)[0]], source


@pytest.mark.parametrize("route", ["/reward", "/reward/batch", "/openrlhf/get_reward"])
def test_every_route_answers_a_check_without_entry_point_4xx_never_a_verdict(route):
    tests = {"kind": "assert", "test_code": HUMANEVAL_CHECK}
    with client_for() as (client, executor):
        if route == "/reward":
            assert first_error(client.post(route, json={"code": ADD, "tests": tests})) == (
                422, ["body", "tests", "entry_point"], "missing")
        elif route == "/reward/batch":
            r = client.post(route, json={"items": [{"code": ADD, "tests": tests}]})
            result = r.json()["results"][0]
            assert (r.status_code, result["status"], result["reward"]) == (200, "invalid_input", None)
            assert result["details"]["invalid"][0]["loc"] == ["tests", "entry_point"]
        else:
            query = {"query": ["Q```python\n" + ADD + "```"], "prompts": ["Q"],
                     "labels": [json.dumps({"tests": tests})]}
            assert first_error(client.post(route, json=query))[:2] == (422, ["body", "labels", 0, "tests",
                                                                             "entry_point"])
        assert executor.scored == []


@pytest.mark.parametrize(("ground_truth", "field"), [
    ({"inputs": ["1\n", "2\n"], "outputs": ["1\n"]}, "tests.outputs"),
    ({"inputs": ["1\n"], "outputs": "1\n"}, "tests.outputs"),
    ({"test_cases": [{"input": "1\n", "type": "stdin_stdout"}]}, "test_cases[0].output"),
    ({"test_cases": [{"input": "1\n", "output": None, "type": "stdin_stdout"}]}, "test_cases[0].output"),
])
def test_ground_truth_with_nothing_to_compare_is_refused_naming_the_field(ground_truth, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        from_verl(ground_truth)


def test_open_r1_cases_keep_their_expected_output():
    spec = from_verification_info({"test_cases": [{"input": "1", "output": "2", "type": "stdin_stdout"}]})
    assert spec["cases"] == [{"stdin": "1", "stdout": "2"}]
