"""GET /dashboard (a page) and GET /dashboard/data (what it draws), from the rollout store."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from .models import COMPONENTS

router = APIRouter()
STATIC = Path(__file__).parent / "static"
WINDOW = 20_000  # newest rollouts the dashboard aggregates


def _reason(result: dict) -> str:
    """Why a rollout failed, in one line: its message, else its first failing test."""
    if result.get("message"):
        return result["message"]
    failing = next((t for t in result.get("tests") or [] if not t.get("passed")), None)
    return f"{failing['name']}: {failing['message']}" if failing else ""


@router.get("/dashboard", response_class=HTMLResponse)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((STATIC / "dashboard.html").read_text())


@router.get("/dashboard/data")
async def dashboard_data(request: Request) -> dict:
    store = request.app.state.store
    if store is None:
        raise HTTPException(404, detail="the rollout store is disabled (REWARDBOX_DB=off)")
    db = store.db
    recent = f"(SELECT * FROM rollouts ORDER BY seq DESC LIMIT {WINDOW})"
    per_minute = db.execute(
        f"SELECT CAST(created_at / 60 AS INTEGER) * 60 AS minute, COUNT(*),"
        f" AVG(json_extract(result, '$.details.timings.tests_ms')), AVG(reward)"
        f" FROM {recent} GROUP BY minute ORDER BY minute").fetchall()
    rewards = db.execute(
        f"SELECT ROUND(reward, 1) AS bin, COUNT(*) FROM {recent} WHERE reward IS NOT NULL GROUP BY bin ORDER BY bin"
    ).fetchall()
    components = {c: db.execute(f"SELECT AVG(json_extract(result, '$.components.{c}')) FROM {recent}").fetchone()[0]
                  for c in COMPONENTS}
    statuses = db.execute(f"SELECT status, COUNT(*) FROM {recent} GROUP BY status ORDER BY COUNT(*) DESC").fetchall()
    slowest = db.execute(
        f"SELECT id, status, reward, json_extract(result, '$.details.timings.tests_ms') AS ms, client_id"
        f" FROM {recent} WHERE ms IS NOT NULL ORDER BY ms DESC LIMIT 10").fetchall()
    failed = [(i, st, _reason(json.loads(result)), c) for i, st, result, c in db.execute(
        f"SELECT id, status, result, client_id FROM {recent} WHERE status != 'passed' ORDER BY seq DESC LIMIT 10")]
    return {
        "throughput": [{"t": m, "count": n, "tests_ms": ms, "reward": r} for m, n, ms, r in per_minute],
        "reward_histogram": [{"bin": b, "count": n} for b, n in rewards],
        "components": components,
        "statuses": [{"status": s, "count": n} for s, n in statuses],
        "slowest": [{"id": i, "status": s, "reward": r, "tests_ms": ms, "client_id": c} for i, s, r, ms, c in slowest],
        "recent_failures": [{"id": i, "status": s, "message": m or "", "client_id": c} for i, s, m, c in failed],
        "runs": store.runs(20),
        "pool": request.app.state.pool.snapshot(),
    }
