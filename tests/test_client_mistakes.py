"""Every client mistake is a 4xx naming the field, on every route, and one bad item of a batch fails alone; the
error bodies have one shape (loc, msg, type) and are documented in OpenAPI. Against the real service."""

from __future__ import annotations

import json

import pytest

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = {"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}


def post_raw(api, path: str, body: str):
    """A body as text: JSON with NaN, or \\u escapes of lone surrogates, which no UTF-8 encoder would send."""
    return api.post(path, content=body, headers={"content-type": "application/json"})


def post_json(api, path: str, value) -> object:
    return post_raw(api, path, json.dumps(value))


def error_at(response) -> tuple[int, list, str]:
    detail = response.json()["detail"][0]
    assert {"loc", "msg", "type"} <= detail.keys(), response.text
    return response.status_code, detail["loc"], detail["type"]


def deep(levels: int):
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(("body", "loc", "kind"), [
    ({"code": "x = '\ud800'"}, ["body", "code"], "string_unicode"),
    ({"code": ADD, "id": "\udfff"}, ["body", "id"], "string_unicode"),
    ({"code": ADD, "tests": {"kind": "io", "cases": [{"stdin": "\ud83d", "stdout": ""}]}},
     ["body", "tests", "cases", 0, "stdin"], "string_unicode"),
    ({"code": ADD, "tests": {**ADD_TESTS, "cases": [{"args": [], "expected": deep(300)}]}},
     ["body", "tests", "cases", 0, "expected"], "too_deep"),
    ({"code": ADD, "weights": {"executability": 1e308}}, ["body", "weights", "executability"], "less_than_equal"),
    ({"code": ADD, "flag_penalty": False}, ["body", "flag_penalty"], "float_type"),
    ({"code": ADD, "limits": {"memory_mb": True}}, ["body", "limits", "memory_mb"], "int_type"),
    ({"code": ADD, "limits": {"timeout_s": 31}}, ["body", "limits", "timeout_s"], "less_than_equal"),
    ({"code": "#" * (300 << 10)}, ["body", "code"], "too_long"),
    ({"code": ADD, "language": "javascript", "tests": {"kind": "assert", "test_code": "x"}},
     ["body", "tests", "kind"], "test_kind"),
    ({"code": ADD, "metadata": {"tag": deep(150)}}, ["body", "metadata", "tag"], "too_deep"),
], ids=["surrogate-code", "surrogate-id", "surrogate-stdin", "deep-expected", "huge-weight", "false-number",
        "true-int", "timeout-cap", "code-size", "test-kind", "deep-metadata"])
def test_a_mistake_in_one_item_is_422_naming_the_field(api, body, loc, kind):
    assert error_at(post_json(api, "/reward", body)) == (422, loc, kind)


@pytest.mark.parametrize(("text", "loc"), [
    ('{"code": "pass", "limits": {"timeout_s": NaN}}', ["body", "limits", "timeout_s"]),
    ('{"code": "pass", "flag_penalty": NaN}', ["body", "flag_penalty"]),
    ('{"code": "pass", "weights": {"quality": Infinity}}', ["body", "weights", "quality"]),
    ('{"code": "pass", "tests": {"kind": "function", "entry_point": "f", "cases": [{"expected": NaN}]}}',
     ["body", "tests", "cases", 0, "expected"]),
])
def test_non_finite_numbers_are_422_and_the_body_stays_json(api, text, loc):
    status, where, kind = error_at(post_raw(api, "/reward", text))
    assert (status, where, kind) == (422, loc, "finite_number")


def test_a_batch_with_bad_items_scores_the_others_and_names_each_fault(api):
    items = [{"id": f"ok-{i}", "code": ADD, "tests": ADD_TESTS, "profile": "binary"} for i in range(62)]
    items.insert(10, {"id": "surrogate", "code": "print('\ud800')"})
    items.insert(20, {"id": "deep", "code": ADD, "tests": {**ADD_TESTS, "cases": [{"expected": deep(500)}]}})
    r = post_json(api, "/reward/batch", {"items": items})
    assert r.status_code == 200, r.text[:500]
    results = r.json()["results"]
    assert len(results) == 64 and [x["id"] for x in results] == [it["id"] for it in items]
    bad = {x["id"]: x for x in results if x["status"] == "invalid_input"}
    assert bad.keys() == {"surrogate", "deep"}
    assert bad["surrogate"]["details"]["invalid"][0]["loc"] == ["code"]
    assert bad["deep"]["details"]["invalid"][0]["type"] == "too_deep" and bad["deep"]["reward"] is None
    assert all(x["status"] == "passed" for x in results if x["id"].startswith("ok-"))


@pytest.mark.parametrize(("body", "loc", "kind"), [
    ({"items": [{"code": "pass"}], "deadlin_s": 5}, ["body", "deadlin_s"], "extra_forbidden"),
    ({"items": [{"code": "pass"}], "deadline_s": False}, ["body", "deadline_s"], "float_type"),
    ({"items": [{"code": "pass"}], "deadline_s": 1e9}, ["body", "deadline_s"], "less_than_equal"),
    ({"items": []}, ["body", "items"], "too_short"),
])
def test_batch_fields_are_checked_too(api, body, loc, kind):
    assert error_at(post_json(api, "/reward/batch", body)) == (422, loc, kind)


def test_a_non_finite_deadline_is_422(api):
    assert error_at(post_raw(api, "/reward/batch", '{"items": [{"code": "pass"}], "deadline_s": NaN}'))[:2] == \
        (422, ["body", "deadline_s"])
    assert api.post("/reward?deadline_s=inf", json={"code": "pass"}).status_code == 422


def label_query(label: dict) -> dict:
    return {"query": ["Q```python\ndef add(a, b):\n    return a + b\n```"], "prompts": ["Q"],
            "labels": [json.dumps(label)]}


@pytest.mark.parametrize(("label", "status", "loc"), [
    ({"language": "cobol", "tests": ADD_TESTS}, 400, ["body", "labels", 0, "language"]),
    ({"language": "c", "tests": ADD_TESTS}, 422, ["body", "labels", 0, "tests", "kind"]),
    ({"tests": ADD_TESTS, "limits": {"timeout_s": 1000}}, 422, ["body", "labels", 0, "limits", "timeout_s"]),
    ({"tests": {**ADD_TESTS, "cases": [{"expected": deep(200)}]}}, 422,
     ["body", "labels", 0, "tests", "cases", 0, "expected"]),
    ({"tests": ADD_TESTS, "profile": "greedy"}, 422, ["body", "labels", 0, "profile"]),
])
def test_openrlhf_labels_go_through_the_same_validation(api, label, status, loc):
    assert error_at(post_json(api, "/openrlhf/get_reward", label_query(label)))[:2] == (status, loc)


def test_openrlhf_code_over_the_size_cap_is_422(api):
    query = {"query": ["```python\n" + "#" * (300 << 10) + "\n```"], "labels": [json.dumps({"tests": ADD_TESTS})]}
    assert error_at(post_json(api, "/openrlhf/get_reward", query))[:2] == (422, ["body", "labels", 0, "code"])


@pytest.mark.parametrize(("body", "loc"), [
    ({"code": "#" * (300 << 10)}, ["body", "code"]),
    ({"code": "print(1)", "memory_limit_MB": 1}, ["body", "memory_limit_MB"]),
    ({"code": "print(1)", "memory_limit_MB": 1 << 20}, ["body", "memory_limit_MB"]),
    ({"code": "print(1)", "memory_limit_MB": False}, ["body", "memory_limit_MB"]),
    ({"code": "print(1)", "run_timeout": 1000}, ["body", "run_timeout"]),
    ({"code": "print(1)", "stdin": "\ud800"}, ["body", "stdin"]),
    ({"code": "print('\udc80')"}, ["body", "code"]),
])
def test_run_code_mistakes_are_422(api, body, loc):
    assert error_at(post_json(api, "/run_code", body))[:2] == (422, loc)


def test_run_code_nan_timeout_is_422(api):
    assert error_at(post_raw(api, "/run_code", '{"code": "pass", "run_timeout": NaN}'))[:2] == \
        (422, ["body", "run_timeout"])


def test_a_service_that_saw_every_mistake_still_scores(api):
    r = api.post("/reward", json={"code": ADD, "tests": ADD_TESTS, "profile": "binary"})
    assert r.json()["status"] == "passed"
    board = api.get("/dashboard/data")
    assert board.status_code == 200  # nothing unserialisable was stored


def test_error_answers_are_documented_in_openapi(api):
    spec = api.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"400", "422", "429"} <= paths["/reward"]["post"]["responses"].keys()
    assert "404" in paths["/rollouts/{rollout_id}"]["get"]["responses"]
    assert "504" in paths["/run_code"]["post"]["responses"]
    export = paths["/rollouts/export"]["get"]["responses"]["200"]["content"]
    assert "application/x-ndjson" in export
    detail = spec["components"]["schemas"]["ErrorDetail"]["properties"]
    assert {"loc", "msg", "type"} <= detail.keys()
