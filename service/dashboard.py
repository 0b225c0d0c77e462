"""GET /dashboard (a page) and GET /dashboard/data (what it draws), from the rollout store's summary (Store in
service/rollouts/store.py: the SQLite or the Redis store, alike here). The page only draws: every figure (percentiles,
pass rates, groups) is computed by the store over the rollouts the filters select.

    GET /dashboard/data?language=&profile=&status=&failed=&kind=&since=&until=

`since` and `until` take epoch seconds or ISO 8601, as GET /rollouts does; `failed=true` is every status but passed.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from service.rollouts.routes import parse_time
from service.rollouts.store import Store
from service.rollouts.summary import Filters
from service.schema import ERRORS

router = APIRouter()
STATIC = Path(__file__).parent / "static"


@router.get("/dashboard", response_class=HTMLResponse)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((STATIC / "dashboard.html").read_text())


@router.get("/dashboard/data", responses=ERRORS(404, 422))
async def dashboard_data(request: Request, language: str | None = None, profile: str | None = None,
                         status: str | None = None, failed: bool = False, kind: str | None = None,
                         since: str | None = None, until: str | None = None) -> dict:
    store: Store | None = request.app.state.store
    if store is None:
        raise HTTPException(404, detail="the rollout store is disabled (REWARDBOX_DB=off)")
    filters = Filters(language=language or None, profile=profile or None, status=status or None, failed=failed,
                      kind=kind or None, since=parse_time(since, "since"), until=parse_time(until, "until"))
    return {**store.summary(filters).to_dict(), "runs": store.runs(20), "pool": request.app.state.executor.snapshot()}
