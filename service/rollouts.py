"""Rollout routes: list (filters, cursor pagination), one rollout, JSONL export, replay with a diff."""

from __future__ import annotations

import json
from datetime import datetime

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from .models import RewardItem
from .replay import diff_results

router = APIRouter()
SUMMARY = ("id", "client_id", "created_at", "status", "language", "profile", "reward", "seq")


def _since(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise HTTPException(422, detail=[{"loc": ["query", "since"], "msg": "epoch seconds or ISO 8601"}]) from None


def _store(request: Request):
    store = request.app.state.store
    if store is None:
        raise HTTPException(404, detail="the rollout store is disabled (REWARDBOX_DB=off)")
    return store


@router.get("/rollouts")
async def list_rollouts(request: Request, status: str | None = None, failed: bool = False,
                        language: str | None = None, since: str | None = None,
                        limit: int = Query(100, ge=1, le=1000), cursor: int | None = None) -> dict:
    items, next_cursor = _store(request).list(status=status, failed=failed, language=language, since=_since(since),
                                              limit=limit, cursor=cursor)
    return {"rollouts": [{k: r[k] for k in SUMMARY} for r in items], "next_cursor": next_cursor}


@router.get("/rollouts/export")
async def export_rollouts(request: Request, status: str | None = None, failed: bool = False,
                          language: str | None = None, since: str | None = None) -> StreamingResponse:
    store = _store(request)
    rows = store.export(status=status, failed=failed, language=language, since=_since(since))
    return StreamingResponse((json.dumps(r) + "\n" for r in rows), media_type="application/x-ndjson")


@router.post("/runs")
async def record_run(request: Request) -> dict:
    """Record a benchmark run's summary (`rewardbox bench` posts it)."""
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("name"), str) or not isinstance(body.get("summary"), dict):
        raise HTTPException(422, detail=[{"loc": ["body"], "msg": "expected {name: str, summary: object}"}])
    return {"id": _store(request).add_run(body["name"], body["summary"])}


@router.get("/runs")
async def list_runs(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict:
    return {"runs": _store(request).runs(limit)}


@router.get("/rollouts/{rollout_id}")
async def get_rollout(rollout_id: str, request: Request) -> dict:
    record = _store(request).get(rollout_id)
    if record is None:
        raise HTTPException(404, detail=f"no rollout {rollout_id}")
    return record


@router.post("/rollouts/{rollout_id}/replay")
async def replay_rollout(rollout_id: str, request: Request) -> dict:
    """Score the stored request again, in the same kind of sandbox, and report every difference: a difference
    between two runs of the same program is nondeterminism (or a changed image/grader), shown rather than hidden."""
    record = _store(request).get(rollout_id)
    if record is None:
        raise HTTPException(404, detail=f"no rollout {rollout_id}")
    try:
        item = RewardItem.model_validate({**record["request"],
                                          "metadata": {**record["request"].get("metadata", {}),
                                                       "replay_of": rollout_id}})
    except ValidationError as e:
        raise HTTPException(409, detail=f"the stored request no longer validates: {e}") from None
    executor = request.app.state.executor
    result = (await executor.score_many([item], use_cache=False))[0].model_dump(mode="json")
    diff = diff_results(record["result"], result)
    same_env = record["image"] == executor.image_id and record["versions"] == executor.versions
    return {"rollout_id": result["rollout_id"], "replay_of": rollout_id, "identical": not diff, "diff": diff,
            "same_image_and_versions": same_env, "result": result}
