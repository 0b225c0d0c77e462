"""HTTP routes of task environments: POST /environments (build, answered at once), GET /environments[/{id}]."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from service.environments.models import EnvironmentSpec
from service.environments.store import (
    EnvironmentNotFound,
    EnvironmentNotReady,
    EnvironmentStore,
    EnvironmentsUnavailable,
    record_json,
)

router = APIRouter(tags=["environments"])


def _store(request: Request) -> EnvironmentStore:
    store: EnvironmentStore = request.app.state.environments
    return store


@router.post("/environments", status_code=202,
             responses={200: {"description": "already built or failed (the same spec is built once per base image)"},
                        202: {"description": "build started"}, 422: {"description": "a field of the spec"}})
async def post_environment(spec: EnvironmentSpec, request: Request) -> JSONResponse:
    """Build the environment of `spec` (content-addressed: its id is the sha256 of the canonical spec); one built
    on another base image than the current one (`stale`) is rebuilt."""
    rec = _store(request).submit(spec)
    return JSONResponse({"id": rec.id, "state": rec.state}, status_code=202 if rec.state == "building" else 200)


@router.get("/environments")
async def list_environments(request: Request) -> dict[str, object]:
    store = _store(request)
    return {"environments": [{"id": r.id, "state": r.state, "created": r.created, "size_bytes": r.size_bytes,
                              "base": r.base, "stale": r.stale} for r in store.list()]}


@router.get("/environments/{env_id}", responses={404: {"description": "no such environment"}})
async def get_environment(env_id: str, request: Request) -> dict[str, object]:
    store = _store(request)
    return record_json(store, store.get(env_id))


def install(app: FastAPI, store: EnvironmentStore) -> None:
    """Routes, the store (app.state.environments) and the answers for unknown / unusable environments."""
    app.state.environments = store
    app.include_router(router)

    @app.exception_handler(EnvironmentNotFound)
    async def not_found(request: Request, exc: EnvironmentNotFound) -> JSONResponse:
        return JSONResponse({"detail": f"environment {str(exc.args[0])[:64]!r} not found: POST /environments "
                             "first"}, status_code=404)

    @app.exception_handler(EnvironmentsUnavailable)
    async def unavailable(request: Request, exc: EnvironmentsUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)[:2000]}, status_code=503)

    @app.exception_handler(EnvironmentNotReady)
    async def not_ready(request: Request, exc: EnvironmentNotReady) -> JSONResponse:
        return JSONResponse({"detail": str(exc)[:2000], "state": exc.state}, status_code=409)
