"""The validation module's pure checks, table-tested (the routes' behaviour is tested over HTTP in
test_client_mistakes.py and test_sandbox_fusion.py)."""

from __future__ import annotations

import base64

import pytest

from service.config import Settings
from service.models import RewardItem
from service.validation import (
    MAX_FILES_BYTES,
    InvalidRequest,
    Problem,
    check_files,
    item_work,
    parse_item,
    path_problem,
    value_problem,
)


@pytest.mark.parametrize(("path", "ok"), [
    ("a.txt", True), ("d/e/f.bin", True), ("ünïcode.txt", True), ("a b", True),
    ("", False), ("/abs", False), ("../x", False), ("a/../b", False), (".", False), ("./a", False), ("d/", False),
    ("a//b", False), ("a\x00b", False), ("a\nb", False), ("\ud800", False), ("x" * 256, False),
    ("/".join(["d"] * 600), False),
])
def test_paths_inside_the_job_directory(path, ok):
    assert (path_problem(path) is None) == ok


def test_files_together_are_capped_and_a_file_cannot_be_a_folder():
    chunk = base64.b64encode(b"x" * (MAX_FILES_BYTES // 2 + 1)).decode()
    with pytest.raises(InvalidRequest) as raised:
        check_files({"a": chunk, "b": chunk}, [])
    assert raised.value.problems[0].loc == ("files", "b")
    with pytest.raises(InvalidRequest):
        check_files({"pkg": "", "pkg/mod.py": ""}, [])
    files, fetch = check_files({"pkg/__init__.py": "", "pkg/mod.py": base64.b64encode(b"X = 1").decode()},
                               ["out.txt"])
    assert set(files) == {"pkg/__init__.py", "pkg/mod.py"} and fetch == ["out.txt"]


def test_values_pydantic_cannot_judge():
    deep: object = 1
    for _ in range(1_000_000):  # iterative: a million levels cost a loop, not the stack
        deep = [deep]
    assert value_problem({"a": deep}).type == "too_deep"
    assert value_problem({"a": deep}).loc == ("a",)
    assert value_problem({"k\udc00": 1}).type == "string_unicode"
    assert value_problem([1.0, float("nan")]).loc == (1,)
    assert value_problem({"fine": ["ok", 1, 2.5, None, {"x": "ü"}]}) is None


def test_parse_item_names_the_first_mistake_and_weighs_work_before_validation():
    settings = Settings(max_cases=3)
    raw = {"code": "pass", "tests": {"kind": "io", "cases": [{"stdout": ""}] * 4}}
    problem = parse_item(raw, settings)
    assert isinstance(problem, Problem) and problem.loc == ("tests", "cases")
    assert item_work(raw) == 4 and item_work({"code": "x"}) == 1 and item_work("not an item") == 1
    assert isinstance(parse_item({"code": "pass"}, settings), RewardItem)
