"""Rollout store, listing, export and replay, through the real service."""

from __future__ import annotations

import json
import uuid

from service.rollouts.store import RolloutStore

TESTS = {"kind": "assert", "test_code": "assert f(1) == 2\nassert f(2) == 4\n"}


def score(api, code: str, **extra) -> dict:
    r = api.post("/reward", json={"id": f"t-{uuid.uuid4().hex[:8]}", "code": code, "tests": TESTS,
                                  "profile": "binary", **extra})
    assert r.status_code == 200
    return r.json()


def test_failed_rollouts_are_listed_and_stored_with_request_result_and_versions(api):
    bad = score(api, "def f(x):\n    return x + 1\n")
    good = score(api, "def f(x):\n    return 2 * x\n")
    listed = api.get("/rollouts", params={"failed": "true", "limit": 1000}).json()["rollouts"]
    ids = {r["id"] for r in listed}
    assert bad["rollout_id"] in ids and good["rollout_id"] not in ids
    record = api.get(f"/rollouts/{bad['rollout_id']}").json()
    assert record["client_id"] == bad["id"] and record["status"] == "failed"
    assert record["request"]["code"] == "def f(x):\n    return x + 1\n"
    assert [t["passed"] for t in record["result"]["tests"]] == [True, False]
    assert record["image"] and record["versions"]["runner"]
    assert api.get("/rollouts/nope").status_code == 404


def test_cursor_pagination_visits_each_rollout_once(api):
    made = {score(api, f"def f(x):\n    return {i}\n")["rollout_id"] for i in range(5)}
    seen, cursor = [], None
    while True:
        params = {"limit": 2, "status": "failed", **({"cursor": cursor} if cursor else {})}
        page = api.get("/rollouts", params=params).json()
        seen += [r["id"] for r in page["rollouts"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) and made <= set(seen)


def test_export_streams_jsonl(api):
    rid = score(api, "def f(x):\n    return 0\n")["rollout_id"]
    with api.stream("GET", "/rollouts/export", params={"failed": "true"}) as r:
        rows = [json.loads(line) for line in r.iter_lines() if line]
    assert any(row["id"] == rid for row in rows)


def test_replay_of_a_deterministic_rollout_is_identical(api):
    rid = score(api, "def f(x):\n    return x + 1\n")["rollout_id"]
    replay = api.post(f"/rollouts/{rid}/replay").json()
    assert replay["identical"] is True and replay["diff"] == {}
    assert replay["same_image_and_versions"] is True
    assert replay["result"]["status"] == "failed" and replay["rollout_id"] != rid


def test_replays_of_passing_seed_rollouts_agree_within_the_documented_tolerances(api):
    """Efficiency is a measurement: it moves a little between two runs of the same program. Within its
    tolerance that is `identical` (the exact differences still listed); beyond it, DIFFERENT."""
    for i in range(6):
        code = f"def f(x):\n    return {i} * 0 + 2 * x\n"
        rollout = score(api, code, profile="seed", reference_code="def f(x):\n    return x + x\n")
        assert rollout["status"] == "passed" and rollout["components"]["efficiency"] is not None
        replay = api.post(f"/rollouts/{rollout['rollout_id']}/replay").json()
        assert replay["identical"] is True and replay["diff"] == {}, replay["diff"]
        assert set(replay["exact_diff"]) <= {"reward", "components"}
        assert set(replay["exact_diff"].get("components", {})) <= {"efficiency"}
        assert replay["tolerances"]["efficiency"] == 0.05


def test_replay_reports_nondeterminism_instead_of_hiding_it(api):
    code = "import random\nFLIP = random.random() < 0.5\nprint(random.random())\ndef f(x):\n" \
           "    return 2 * x if FLIP else x\n"
    rid = score(api, code, tests={"kind": "io", "cases": [{"stdin": "", "stdout": "never"}]})["rollout_id"]
    replay = api.post(f"/rollouts/{rid}/replay").json()
    assert replay["identical"] is False
    assert "stdout" in replay["diff"]


def test_store_survives_a_restart(tmp_path):
    path = tmp_path / "r.sqlite3"
    store = RolloutStore(path)
    store.add({"code": "x", "language": "python"}, {"rollout_id": "abc", "status": "passed", "reward": 1.0}, "img",
              {"runner": "v"})
    store.close()
    again = RolloutStore(path)
    assert again.get("abc")["result"]["reward"] == 1.0
    again.close()


def test_cli_lists_replays_and_exports(api, server, tmp_path):
    import os
    import subprocess
    import sys

    rid = score(api, "def f(x):\n    return x + 1\n")["rollout_id"]
    env = {**os.environ, "REWARDBOX_URL": server}
    run = [sys.executable, "-m", "service.cli"]
    listed = subprocess.run([*run, "rollouts", "list", "--failed", "--limit", "500"], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert rid in listed and "status" in listed
    replayed = subprocess.run([*run, "replay", rid], env=env, capture_output=True, text=True, check=True).stdout
    assert f"replay of {rid}" in replayed and "identical" in replayed
    exported = subprocess.run([*run, "export", "--failed"], env=env, capture_output=True, text=True, check=True)
    assert any(json.loads(line)["id"] == rid for line in exported.stdout.splitlines())


def test_cli_replays_locally_from_the_local_store(tmp_path):
    import os
    import subprocess
    import sys

    db = tmp_path / "local.sqlite3"
    store = RolloutStore(db)
    request = {"code": "def f(x):\n    return 2 * x\n", "tests": TESTS, "profile": "binary"}
    store.add(request, {"rollout_id": "local1", "status": "failed", "reward": 0.0, "components": {},
                        "tests": [], "execution": {}}, "old-image", {"runner": "old"})
    store.close()
    env = {**os.environ, "REWARDBOX_DB": str(db)}
    out = subprocess.run([sys.executable, "-m", "service.cli", "replay", "local1", "--local"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "DIFFERENT" in out and "status" in out and "passed" in out
    assert "image or grader versions differ" in out


def test_retention_keeps_only_the_newest_rollouts(tmp_path):
    store = RolloutStore(tmp_path / "r.sqlite3", retention=3)
    for i in range(6):
        store.add({"code": "x"}, {"rollout_id": f"r{i}", "status": "passed"}, "img", {})
    items, _ = store.list(limit=10)
    assert [r["id"] for r in items] == ["r5", "r4", "r3"]
    store.close()
