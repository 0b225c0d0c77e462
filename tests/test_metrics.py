"""GET /metrics in Prometheus format, reflecting real scored items."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(api) -> dict:
    r = api.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_items_rewards_stages_and_pool(api):
    before = samples(api)
    key = ("rewardbox_items_total", (("profile", "binary"), ("status", "passed")))
    api.post("/reward", json={"code": "def f():\n    return 1\n", "profile": "binary",
                              "tests": {"kind": "assert", "test_code": "assert f() == 1\n"}})
    after = samples(api)
    assert after[key] == before.get(key, 0) + 1
    assert after[("rewardbox_reward_count", ())] >= 1
    assert after[("rewardbox_stage_seconds_count", (("stage", "tests"),))] >= 1
    assert after[("rewardbox_pool_sandboxes", (("state", "size"),))] == 2
    assert after[("rewardbox_http_requests_total", (("code", "200"), ("path", "/reward")))] >= 1
