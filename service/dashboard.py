"""GET /dashboard (a page) and GET /dashboard/data (what it draws), from the rollout store's summary (Store in
service/store.py: the SQLite or the Redis store, alike here)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from .store import Store

router = APIRouter()
STATIC = Path(__file__).parent / "static"


@router.get("/dashboard", response_class=HTMLResponse)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((STATIC / "dashboard.html").read_text())


@router.get("/dashboard/data")
async def dashboard_data(request: Request) -> dict:
    store: Store | None = request.app.state.store
    if store is None:
        raise HTTPException(404, detail="the rollout store is disabled (REWARDBOX_DB=off)")
    return {**store.summary().to_dict(), "runs": store.runs(20), "pool": request.app.state.executor.snapshot()}
