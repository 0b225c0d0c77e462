"""Distributed mode: a snapshot uploaded to one API process is graded by a worker process, through Redis only, and
the shared store keeps its byte budget."""

from __future__ import annotations

import random

import httpx

from rewardbox.archive import repo_archive
from service.compat import swebench
from service.repos.benchmark import tasks

from .distributed import start_api, start_cluster
from .test_distributed import procs, redis_server  # noqa: F401 - the fixtures

TOOLZ = next(t for t in tasks() if t["instance_id"] == "toolz-1.2.0-bug0")


def test_a_snapshot_uploaded_to_one_api_is_graded_by_a_worker_and_seen_by_another_api(redis_server, procs):  # noqa: F811
    budget_mb = 0.2  # the toolz snapshot (~52 KB) and a little more
    prefix, env, r, _api, url = start_cluster(redis_server, procs, workers=1, REWARDBOX_REPO_STORE_MB=str(budget_mb))
    other_api, other_url = start_api(env)
    procs.append(other_api)
    with httpx.Client(base_url=url, timeout=300) as client, httpx.Client(base_url=other_url, timeout=300) as other:
        up = client.post("/repos", content=TOOLZ["archive"], headers={"content-type": "application/gzip"})
        assert up.status_code == 201, up.text
        repo_id = up.json()["id"]
        assert other.get(f"/repos/{repo_id}").json()["exists"]
        results = other.post("/reward/batch", json={"items": [
            swebench.to_item(TOOLZ, repo_id, TOOLZ["patch"]), swebench.to_item(TOOLZ, repo_id, "")]}).json()
        assert [x["status"] for x in results["results"]] == ["passed", "failed"], results
        assert r.exists(f"{prefix}:repo:{repo_id}") and int(r.get(f"{prefix}:repos-bytes")) <= budget_mb * (1 << 20)
        for seed in range(4):  # more than the budget: the least recently used go, the total stays within it
            blob = repo_archive({"blob": random.Random(seed).randbytes(60 << 10)}, f"filler{seed}")
            assert client.post("/repos", content=blob, headers={"content-type": "application/gzip"}).status_code == 201
            assert int(r.get(f"{prefix}:repos-bytes")) <= budget_mb * (1 << 20)
        assert not other.get(f"/repos/{repo_id}").json()["exists"]
        gone = other.post("/reward", json=swebench.to_item(TOOLZ, repo_id, ""))
        assert gone.status_code == 422 and "upload it again" in gone.text
