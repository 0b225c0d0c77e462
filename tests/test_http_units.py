"""The HTTP shape of the API, in-process and without a sandbox: `create_app(settings, executor=...)` around an
executor that validates every item as the real ones do (service.executor.checked) and passes each valid one
unrun. What is checked is what the routes and middleware add: status codes, error bodies naming the field, the
body limit, auth, /v1/info. Scoring itself is tested against the real service (test_reward_api.py and others)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings
from service.executor import checked, invalid_result
from service.models import SUPPORTED_LANGUAGES, ItemResult, RewardItem
from service.validation import Problem

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = {"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}


class ValidatingExecutor:
    """Validates like every executor; each valid item "passes" without running. Records what it was given."""

    image_id = "sha256:unit"
    versions: dict[str, str] = {}
    store = None
    builder = None

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.scored: list[RewardItem] = []

    async def score_many(self, items: Sequence[Any], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]:
        results = []
        for raw, c in zip(items, await checked(items, self.settings, {}), strict=True):
            if isinstance(c.item, Problem):
                results.append(invalid_result(raw, c.item))
                continue
            self.scored.append(c.item)
            results.append(ItemResult(id=c.item.id, rollout_id="unit", status="passed", reward=1.0,
                                      profile=c.item.profile, components={"executability": 1.0, "pass_rate": 1.0}))
        return results

    def snapshot(self) -> dict:
        return {"backend": "unit", "size": 3, "warm": True}

    def lint_cache_hits(self) -> int:
        return 0

    def queued(self) -> int:
        return 0


@contextmanager
def client_for(**settings: Any) -> Iterator[tuple[TestClient, ValidatingExecutor]]:
    s = Settings(**settings)
    executor = ValidatingExecutor(s)
    with TestClient(create_app(s, executor=executor)) as client:
        yield client, executor


@pytest.fixture(scope="module")
def api() -> Iterator[TestClient]:
    with client_for(max_body_mb=1, max_batch=3) as (client, _):
        yield client


def first_error(response) -> tuple[int, list, str]:
    detail = response.json()["detail"][0]
    assert {"loc", "msg", "type"} <= detail.keys(), response.text
    return response.status_code, detail["loc"], detail["type"]


def test_a_valid_item_reaches_the_executor_and_its_result_comes_back(api):
    r = api.post("/reward", json={"code": ADD, "tests": ADD_TESTS, "id": "x"})
    assert r.status_code == 200 and r.json()["id"] == "x" and r.json()["reward"] == 1.0


def test_reward_with_an_unknown_language_is_400_naming_the_field_and_listing_the_supported(api):
    r = api.post("/reward", json={"code": "x", "language": "cobol"})
    assert first_error(r)[:2] == (400, ["body", "language"])
    assert r.json()["detail"][0]["supported"] == list(SUPPORTED_LANGUAGES)


def test_the_supported_list_goes_with_the_language_error_alone(api):
    r = api.post("/reward", json={"code": "x", "language": "cobol", "tests": {"kind": "io", "cases": []}})
    assert r.status_code == 400 and len(r.json()["detail"]) > 1, r.text
    with_list = [d["loc"] for d in r.json()["detail"] if "supported" in d]
    assert with_list == [["body", "language"]], r.text


def test_reward_with_a_bad_field_is_422_naming_it(api):
    assert first_error(api.post("/reward", json={"code": ADD, "limits": {"timeout_s": 31}})) == (
        422, ["body", "limits", "timeout_s"], "less_than_equal")
    assert first_error(api.post("/reward", json={"code": ADD, "profile": "greedy"}))[:2] == (422, ["body", "profile"])


def test_a_batch_item_with_an_unknown_language_fails_alone(api):
    items = [{"id": "a", "code": ADD, "tests": ADD_TESTS}, {"id": "b", "language": "cobol", "code": "x"}]
    r = api.post("/reward/batch", json={"items": items})
    assert r.status_code == 200, r.text
    a, b = r.json()["results"]
    assert (a["status"], b["status"], b["reward"]) == ("passed", "invalid_input", None)
    assert b["details"]["invalid"][0]["loc"] == ["language"] and "python" in b["message"]


def test_batch_fields_are_422_naming_the_field(api):
    assert first_error(api.post("/reward/batch", json={"items": []})) == (422, ["body", "items"], "too_short")
    assert first_error(api.post("/reward/batch", json={"items": [{"code": "pass"}], "deadlin_s": 5})) == (
        422, ["body", "deadlin_s"], "extra_forbidden")
    assert first_error(api.post("/reward/batch", json={"items": [{"code": "pass"}] * 4})) == (
        422, ["body", "items"], "too_long")


def label_query(label: dict) -> dict:
    return {"query": ["Q```python\n" + ADD + "```"], "prompts": ["Q"], "labels": [json.dumps(label)]}


@pytest.mark.parametrize(("label", "status", "loc"), [
    ({"language": "cobol", "tests": ADD_TESTS}, 400, ["body", "labels", 0, "language"]),
    ({"tests": ADD_TESTS, "limits": {"timeout_s": 1000}}, 422, ["body", "labels", 0, "limits", "timeout_s"]),
    ({"tests": ADD_TESTS, "profile": "greedy"}, 422, ["body", "labels", 0, "profile"]),
])
def test_openrlhf_label_mistakes_are_4xx_naming_the_label_and_field_never_503(api, label, status, loc):
    assert first_error(api.post("/openrlhf/get_reward", json=label_query(label)))[:2] == (status, loc)


def test_openrlhf_a_good_label_is_scored(api):
    r = api.post("/openrlhf/get_reward", json=label_query({"tests": ADD_TESTS}))
    assert r.status_code == 200 and r.json()["rewards"] == [1.0]


def test_a_body_over_the_limit_is_413_and_never_reaches_the_executor():
    with client_for(max_body_mb=1 / 1024) as (client, executor):
        r = client.post("/reward", content=json.dumps({"code": "#" * 2048}),
                        headers={"content-type": "application/json"})
        assert r.status_code == 413 and executor.scored == []
        assert client.post("/reward", json={"code": "pass"}).status_code == 200


def test_with_a_token_every_endpoint_wants_it():
    with client_for(token="s3cret") as (client, executor):
        assert client.get("/healthz").status_code == 401
        assert client.post("/reward", json={"code": "pass"}).status_code == 401
        assert client.get("/v1/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert executor.scored == []
        good = {"Authorization": "Bearer s3cret"}
        assert client.post("/reward", json={"code": "pass"}, headers=good).status_code == 200


def test_info_reports_the_settings_and_the_executor(api):
    info = api.get("/v1/info").json()
    assert info["name"] == "rewardbox" and info["languages"] == list(SUPPORTED_LANGUAGES)
    assert {"binary", "coderl"} <= set(info["profiles"])
    assert info["limits"]["max_batch"] == 3 and info["limits"]["max_body_bytes"] == 1 << 20
    assert info["limits"]["max_code_bytes"] == 256 << 10
    assert info["mode"] == "embedded"
    assert info["sandbox"] == {"backend": "unit", "image": "sha256:unit", "pool_size": 3}
