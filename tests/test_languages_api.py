"""The languages over real HTTP: /v1/info advertises them, /reward scores them, bad combinations are 4xx."""

from __future__ import annotations

from tests.language_programs import FIZZBUZZ, fizzbuzz


def test_info_lists_every_language_with_its_test_kinds(api):
    info = api.get("/v1/info").json()
    assert set(info["languages"]) >= {"python", "javascript", "typescript", "c", "cpp", "java", "go", "rust", "bash"}
    assert info["test_kinds"]["javascript"] == ["function", "io", "repo"]
    assert info["test_kinds"]["rust"] == ["io", "rust_test"]
    assert info["test_kinds"]["c"] == ["io"]


def test_a_cpp_item_is_scored_with_io_tests(api):
    item = {"language": "cpp", "code": FIZZBUZZ["cpp"], "profile": "binary",
            "tests": {"kind": "io", "cases": [{"stdin": "15", "stdout": fizzbuzz(15)}]}}
    body = api.post("/reward", json=item).json()
    assert body["status"] == "passed" and body["reward"] == 1.0


def test_a_javascript_item_gets_an_eslint_quality(api):
    item = {"language": "javascript", "code": "function add(a, b) {\n  return a + b;\n}\n",
            "tests": {"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}}
    body = api.post("/reward", json=item).json()
    assert body["status"] == "passed"
    assert body["components"]["quality"] == 1.0
    assert body["details"]["quality"]["eslint_score"] == 10


def test_a_compile_error_scores_executability_zero(api):
    item = {"language": "go", "code": "package main\nfunc main() { undefined() }\n",
            "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": ""}]}}
    body = api.post("/reward", json=item).json()
    assert body["status"] == "syntax_error"
    assert body["components"]["executability"] == 0.0
    assert "undefined" in body["message"]


def test_a_test_kind_the_language_lacks_is_422_naming_the_field(api):
    item = {"language": "c", "code": "int main(void) { return 0; }",
            "tests": {"kind": "assert", "test_code": "assert True"}}
    response = api.post("/reward", json=item)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "tests", "kind"]
