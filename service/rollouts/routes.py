"""Rollout routes: list (filters, cursor pagination), one rollout, JSONL export, replay with a diff."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.models import RewardItem
from service.rollouts.replay import compare
from service.rollouts.store import Store
from service.schema import ERRORS
from service.validation import InvalidRequest, Problem, value_problem

router = APIRouter()
SUMMARY = ("id", "client_id", "created_at", "status", "language", "profile", "reward", "seq")


def parse_time(value: str | None, name: str = "since") -> float | None:
    """A query parameter of epoch seconds or ISO 8601; 422 naming it otherwise."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise InvalidRequest([Problem((name,), "epoch seconds or ISO 8601", "datetime")],
                             prefix=("query",)) from None


def _store(request: Request) -> Store:
    store = request.app.state.store
    if store is None:
        raise HTTPException(404, detail="the rollout store is disabled (REWARDBOX_DB=off)")
    return store


@router.get("/rollouts", responses=ERRORS(404, 422))
async def list_rollouts(request: Request, status: str | None = None, failed: bool = False,
                        language: str | None = None, since: str | None = None,
                        limit: int = Query(100, ge=1, le=1000), cursor: int | None = None) -> dict:
    items, next_cursor = _store(request).list(status=status, failed=failed, language=language, since=parse_time(since),
                                              limit=limit, cursor=cursor)
    return {"rollouts": [{k: r[k] for k in SUMMARY} for r in items], "next_cursor": next_cursor}


EXPORT_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "one rollout (as GET /rollouts/{id} returns it) per line, newest first",
          "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}}


@router.get("/rollouts/export", response_class=StreamingResponse, responses={**EXPORT_DOC, **ERRORS(404, 422)})
async def export_rollouts(request: Request, status: str | None = None, failed: bool = False,
                          language: str | None = None, since: str | None = None) -> StreamingResponse:
    store = _store(request)
    rows = store.export(status=status, failed=failed, language=language, since=parse_time(since))
    return StreamingResponse((json.dumps(r) + "\n" for r in rows), media_type="application/x-ndjson")


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    summary: dict[str, Any]


@router.post("/runs", responses=ERRORS(404, 422))
async def record_run(run: RunRecord, request: Request) -> dict:
    """Record a benchmark run's summary (`rewardbox bench` posts it)."""
    problem = value_problem(run.summary, ("summary",))
    if problem:
        raise InvalidRequest([problem])
    return {"id": _store(request).add_run(run.name, run.summary)}


@router.get("/runs", responses=ERRORS(404, 422))
async def list_runs(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict:
    return {"runs": _store(request).runs(limit)}


@router.get("/rollouts/{rollout_id}", responses=ERRORS(404))
async def get_rollout(rollout_id: str, request: Request) -> dict:
    record = _store(request).get(rollout_id)
    if record is None:
        raise HTTPException(404, detail=f"no rollout {rollout_id}")
    return record


@router.post("/rollouts/{rollout_id}/replay", responses=ERRORS(404, 409, 429, 503))
async def replay_rollout(rollout_id: str, request: Request) -> dict:
    """Score the stored request again, in the same kind of sandbox, and compare (service/rollouts/replay.py):
    `identical` when every field agrees within its documented tolerance, `diff` what does not, `exact_diff` every
    difference however small. A difference beyond tolerance is nondeterminism (or a changed image/grader), shown rather
    than hidden."""
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
    same_env = record["image"] == executor.image_id and record["versions"] == executor.versions
    return {"rollout_id": result["rollout_id"], "replay_of": rollout_id, **compare(record["result"], result),
            "same_image_and_versions": same_env, "result": result}
