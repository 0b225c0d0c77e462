"""HTTP API: a thin skin over an Executor (in-process, or Redis-backed workers when REDIS_URL is set). Routes
translate HTTP to calls on plain objects and back."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import TypeAdapter, ValidationError

from sandboxes import SandboxPool, choose_backend

from . import __version__, dashboard, openrlhf, repos, rollouts, sandbox_fusion
from .auth import BearerAuth
from .body_limit import BodyLimit
from .config import Settings
from .executor import Executor, LocalExecutor, Overloaded, Unavailable
from .metrics import Metrics, RequestCounter
from .models import PROFILES, SUPPORTED_LANGUAGES, BatchRequest, BatchResult, ItemResult, RewardItem
from .reward import DEFAULT_WEIGHTS
from .store import RolloutStore

ITEM = TypeAdapter(RewardItem)
TEST_KINDS = {"python": ["assert", "function", "io", "pytest", "repo"], "javascript": ["function", "io"],
              "typescript": ["function", "io"], "c": ["io"], "cpp": ["io"], "java": ["io"], "go": ["io"],
              "rust": ["io", "rust_test"], "bash": ["io"]}


def create_app(settings: Settings | None = None, pool: SandboxPool | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if settings.redis_url:  # distributed mode: no sandboxes here, workers anywhere
            from .redis_executor import RedisExecutor

            executor: Executor = RedisExecutor(settings, metrics)
            await executor.start()
            app.state.store = executor.store
            app.state.executor = executor
            yield
            await executor.close()
            return
        own = pool is None
        p = pool or SandboxPool(choose_backend(settings.backend), size=settings.pool_size or None)
        if own:
            await p.start()
        app.state.pool = p
        store = None if settings.db_path == "off" else RolloutStore(settings.db_path or None, settings.db_retention)
        app.state.store = store
        app.state.executor = LocalExecutor(p, settings, metrics, store)
        await app.state.executor.start()
        yield
        if own:
            await p.close()
        if store is not None:
            store.close()

    app = FastAPI(title="rewardbox", version=__version__, lifespan=lifespan,
                  description="Sandboxed code-execution rewards for RL training of code models.")
    metrics = Metrics()
    app.state.metrics = metrics
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestCounter, metrics=metrics)
    if settings.auth_token:
        app.add_middleware(BearerAuth, token=settings.auth_token)  # added last: runs first
    app.include_router(sandbox_fusion.router)
    app.include_router(openrlhf.router)
    app.include_router(rollouts.router)
    app.include_router(dashboard.router)
    app.include_router(repos.router)
    app.state.repos = repos.repo_store(settings)
    app.mount("/static", StaticFiles(directory=dashboard.STATIC), name="static")

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        return JSONResponse({"detail": f"overloaded: {exc}"}, status_code=429,
                            headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        return JSONResponse({"detail": f"queue unavailable: {exc}"}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after_s)})

    def check_item(item: RewardItem) -> str | None:
        """Checks that depend on settings; returns a message naming the field at fault."""
        if item.language not in SUPPORTED_LANGUAGES:
            return f"language: {item.language!r} is not supported; supported: {', '.join(SUPPORTED_LANGUAGES)}"
        if item.tests is not None and item.tests.kind not in TEST_KINDS[item.language]:
            return (f"tests.kind: {item.tests.kind!r} is not available for {item.language}; available: "
                    f"{', '.join(TEST_KINDS[item.language])}")
        if len(item.code.encode()) > settings.max_code_bytes:
            return f"code: longer than {settings.max_code_bytes} bytes"
        if item.limits.timeout_s > settings.max_timeout_s:
            return f"limits.timeout_s: at most {settings.max_timeout_s:g}"
        if item.limits.memory_mb > settings.max_memory_mb:
            return f"limits.memory_mb: at most {settings.max_memory_mb}"
        return None

    async def check_repo(item: RewardItem) -> str | None:
        """Repo items: the change's size, and the snapshot stored (an inline archive is stored here)."""
        if item.repo is None:
            return None
        store = app.state.repos
        size = sum(len(t.encode()) for t in [item.patch or "", *(item.files or {}).values(),
                                            *item.tests.test_files.values()])
        if size > store.settings.max_change_bytes:
            return f"patch: the change and test files hold more than {store.settings.max_change_bytes} bytes"
        return await repos.resolve(item, store)

    def invalid(item_id: Any, message: str, profile: Any = None) -> ItemResult:
        return ItemResult(id=item_id if isinstance(item_id, str) else None, rollout_id="", status="invalid_input",
                          reward=None, profile=profile if isinstance(profile, str) else None, message=message)

    @app.post("/reward", response_model=ItemResult, response_model_exclude_none=False)
    async def reward(item: RewardItem, request: Request,
                     deadline_s: float | None = Query(None, gt=0, description="items not started by then: "
                                                      "infra_error")) -> ItemResult:
        problem = check_item(item) or await check_repo(item)
        if problem:
            field = problem.split(":", 1)[0]
            status = 400 if field == "language" else 422
            raise HTTPException(status, detail=[{"loc": ["body", *field.split(".")], "msg": problem,
                                                 "supported": list(SUPPORTED_LANGUAGES)} if status == 400 else
                                                {"loc": ["body", *field.split(".")], "msg": problem}])
        return (await request.app.state.executor.score_many([item], deadline_s))[0]

    @app.post("/reward/batch", response_model=BatchResult)
    async def reward_batch(batch: BatchRequest, request: Request) -> BatchResult:
        if len(batch.items) > settings.max_batch:
            raise HTTPException(422, detail=[{"loc": ["body", "items"],
                                              "msg": f"at most {settings.max_batch} items per batch"}])
        executor: Executor = request.app.state.executor

        def validate(raw: Any) -> ItemResult | RewardItem:
            raw_dict = raw if isinstance(raw, dict) else {}
            try:
                item = ITEM.validate_python(raw)
            except ValidationError as e:
                fields = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
                return invalid(raw_dict.get("id"), fields, raw_dict.get("profile"))
            problem = check_item(item)
            return invalid(item.id, problem, item.profile) if problem else item

        checked = [validate(raw) for raw in batch.items]
        for i, c in enumerate(checked):  # repo items: inline archives stored, stored snapshots checked
            problem = await check_repo(c) if isinstance(c, RewardItem) else None
            if problem:
                checked[i] = invalid(c.id, problem, c.profile)
        items = [c for c in checked if isinstance(c, RewardItem)]
        scored = iter(await executor.score_many(items, batch.deadline_s) if items else [])
        return BatchResult(results=[next(scored) if isinstance(c, RewardItem) else c for c in checked])

    @app.get("/metrics")
    async def prometheus_metrics(request: Request) -> Response:
        executor: Executor = request.app.state.executor
        body = metrics.render(executor.snapshot(), executor.lint_cache_hits(), executor.queued())
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"ok": True}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        snap = request.app.state.executor.snapshot()
        return JSONResponse(snap, status_code=200 if snap["warm"] else 503)

    @app.get("/v1/info")
    async def info(request: Request) -> dict:
        executor: Executor = request.app.state.executor
        snap = executor.snapshot()
        return {
            "name": "rewardbox",
            "version": __version__,
            "languages": list(SUPPORTED_LANGUAGES),
            "test_kinds": TEST_KINDS,
            "profiles": list(PROFILES),
            "default_weights": DEFAULT_WEIGHTS,
            "limits": {"max_batch": settings.max_batch, "max_body_bytes": settings.max_body_bytes,
                       "max_code_bytes": settings.max_code_bytes, "max_timeout_s": settings.max_timeout_s,
                       "max_memory_mb": settings.max_memory_mb, "max_item_s": settings.max_item_s,
                       "max_queued": settings.max_queued, "deadline_s": settings.deadline_s},
            "mode": "distributed" if settings.redis_url else "embedded",
            "sandbox": {"backend": snap["backend"], "image": executor.image_id, "pool_size": snap["size"]},
        }

    return app
