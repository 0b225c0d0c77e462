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
RECORDS_WINDOW = 5_000  # the same, where they are aggregated in Python (Redis store)


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
    if not hasattr(store, "db"):  # distributed mode's Redis store: aggregate its newest rollouts here
        return {**_from_records(store.recent(RECORDS_WINDOW)), "runs": store.runs(20),
                "pool": request.app.state.executor.snapshot()}
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
        "pool": request.app.state.executor.snapshot(),
    }


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _from_records(records: list[dict]) -> dict:
    """The dashboard's figures from rollout records (newest first), as the SQL path computes them."""
    minutes: dict[int, list[dict]] = {}
    for r in records:
        minutes.setdefault(int(r["created_at"] // 60) * 60, []).append(r)

    def tests_ms(r: dict) -> float | None:
        return ((r["result"].get("details") or {}).get("timings") or {}).get("tests_ms")

    bins: dict[float, int] = {}
    statuses: dict[str, int] = {}
    for r in records:
        if r["reward"] is not None:
            bins[round(r["reward"], 1)] = bins.get(round(r["reward"], 1), 0) + 1
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    slowest = sorted((r for r in records if tests_ms(r) is not None), key=lambda r: tests_ms(r) or 0.0,
                     reverse=True)[:10]
    failed = [r for r in records if r["status"] != "passed"][:10]
    return {
        "throughput": [{"t": m, "count": len(rs), "tests_ms": _mean([tests_ms(r) for r in rs]),
                        "reward": _mean([r["reward"] for r in rs])} for m, rs in sorted(minutes.items())],
        "reward_histogram": [{"bin": b, "count": n} for b, n in sorted(bins.items())],
        "components": {c: _mean([(r["result"].get("components") or {}).get(c) for r in records]) for c in COMPONENTS},
        "statuses": [{"status": s, "count": n} for s, n in sorted(statuses.items(), key=lambda x: -x[1])],
        "slowest": [{"id": r["id"], "status": r["status"], "reward": r["reward"], "tests_ms": tests_ms(r),
                     "client_id": r["client_id"]} for r in slowest],
        "recent_failures": [{"id": r["id"], "status": r["status"], "message": _reason(r["result"]) or "",
                             "client_id": r["client_id"]} for r in failed],
    }
