"""HTTP API: a thin skin over an Executor (in-process, or Redis-backed workers when REWARDBOX_REDIS_URL is set). Routes
translate HTTP to calls on plain objects and back."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST

from sandboxes import SandboxPool
from sandboxes.image import use_cache_dir
from service import __version__, dashboard
from service.auth import BearerAuth
from service.body_limit import BodyLimit
from service.compat import openrlhf, sandbox_fusion, sandbox_fusion_datasets
from service.config import Settings, sandbox_pool
from service.distributed.sessions import RemoteSessions
from service.environments.build import BuildLimits
from service.environments.pools import set_lookup
from service.environments.routes import install as install_environments
from service.environments.store import EnvironmentStore
from service.errors import NotStarted, Overloaded, Unavailable
from service.executor import Executor, LocalExecutor
from service.json_body import JSONRoute
from service.metrics import Metrics, RequestCounter
from service.models import (
    MAX_DEADLINE_S,
    PROFILES,
    SUPPORTED_LANGUAGES,
    BatchRequest,
    BatchResult,
    ItemResult,
    RewardItem,
)
from service.repos import snapshots as repos
from service.reward import DEFAULT_WEIGHTS
from service.rollouts import routes as rollouts
from service.rollouts.store import RolloutStore
from service.schema import ERRORS, retry_after
from service.sessions.manager import SessionManager
from service.sessions.routes import router as session_router
from service.validation import TEST_KINDS, InvalidRequest, Problem, request_errors

THREAD_AT = 64  # results: larger answers are serialised in a thread (the event loop keeps serving meanwhile)


def create_app(settings: Settings | None = None, *, executor: Executor | None = None,
               pool: SandboxPool | None = None, session_pool: SandboxPool | None = None) -> FastAPI:
    """The API over `executor` when one is given (its owner starts and closes it; the app then runs no sandbox
    and has no agent sessions: what tests of the HTTP shape want), else over the one `settings` call for: Redis
    workers (redis_url) or a local pool (`pool`, else one of its own)."""
    settings = settings or Settings.from_env()
    use_cache_dir(settings.cache_dir)  # datasets and bubblewrap root filesystems of this process

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if executor is not None:
            app.state.executor, app.state.store = executor, executor.store
            yield
            return
        if settings.redis_url:  # distributed mode: no sandboxes here, workers anywhere
            from service.distributed.executor import RedisExecutor

            remote = RedisExecutor(settings, metrics)
            await remote.start()
            app.state.store = remote.store
            app.state.executor = remote
            app.state.sessions = RemoteSessions(remote.queue.redis, remote.queue.prefix, remote.score_many,
                                                metrics.registry, settings.sessions)
            yield
            await app.state.sessions.close()  # its reader of answers, before the connection goes
            await remote.close()
            return
        own = pool is None
        p = pool or sandbox_pool(settings)
        if own:
            await p.start()
        app.state.pool = p
        store = None if settings.db_file is None else RolloutStore(settings.db_file, settings.db_retention)
        app.state.store = store
        app.state.executor = LocalExecutor(p, settings, metrics, store)
        await app.state.executor.start()
        app.state.sessions = await SessionManager.embedded(p.backend, app.state.repos, app.state.executor.score_many,
                                                           metrics.registry, settings.sessions, session_pool)
        yield
        await app.state.sessions.close()
        if own:
            await p.close()
        if store is not None:
            store.close()

    app = FastAPI(title="rewardbox", version=__version__, lifespan=lifespan,
                  description="Sandboxed code-execution rewards for RL training of code models. Every client "
                  "mistake is answered 4xx with `detail: [{loc, msg, type}]` naming the field; 429, 503 and 504 "
                  "come with `Retry-After`.")
    app.router.route_class = JSONRoute  # the app's own routes read JSON bodies with pydantic's parser (~5x json)
    metrics = Metrics()
    app.state.metrics = metrics
    app.state.settings = settings
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    app.add_middleware(RequestCounter, metrics=metrics)
    if settings.token:
        app.add_middleware(BearerAuth, token=settings.token)  # added last: runs first
    app.state.repos = repos.repo_store(settings)
    environments = EnvironmentStore(limits=BuildLimits(settings.env_build_timeout_s, settings.env_build_memory_mb))
    install_environments(app, environments)
    set_lookup(environments.target)  # items' and sessions' `environment.id` resolve through this store

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        return JSONResponse({"detail": f"overloaded: {exc}"}, status_code=429, headers=retry_after(exc))

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        return JSONResponse({"detail": f"queue unavailable: {exc}"}, status_code=503, headers=retry_after(exc))

    @app.exception_handler(NotStarted)
    async def not_started(request: Request, exc: NotStarted) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=504, headers=retry_after(exc))

    @app.exception_handler(InvalidRequest)
    async def invalid_request(request: Request, exc: InvalidRequest) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        """pydantic's errors with loc, msg and type, never the input (NaN, bytes, megabytes). An unsupported
        language is 400 with the supported list."""
        detail = request_errors(exc.errors())
        if any(d["type"] == "unsupported_language" for d in detail):
            return JSONResponse({"detail": [{**d, "supported": list(SUPPORTED_LANGUAGES)}
                                            if d["type"] == "unsupported_language" else d for d in detail]}, 400)
        return JSONResponse({"detail": detail}, status_code=422)

    @app.post("/reward", response_model=ItemResult, response_model_exclude_none=False,
              responses=ERRORS(400, 413, 422, 429, 503))
    async def reward(item: RewardItem, request: Request,
                     deadline_s: float | None = Query(None, gt=0, le=MAX_DEADLINE_S, description="items not "
                                                      "started by then: infra_error")) -> ItemResult:
        result = (await request.app.state.executor.score_many([item], deadline_s))[0]
        if result.status == "invalid_input":  # a lone item: its mistake is the request's
            raise InvalidRequest([Problem(tuple(e["loc"]), e["msg"], e["type"])
                                  for e in result.details.get("invalid", [])]
                                 or [Problem((), result.message)])
        return result

    @app.post("/reward/batch", response_model=BatchResult, responses=ERRORS(413, 422, 429, 503))
    async def reward_batch(batch: BatchRequest, request: Request) -> Any:
        if len(batch.items) > settings.max_batch:
            raise InvalidRequest([Problem(("items",), f"at most {settings.max_batch} items per batch",
                                          "too_long")])
        executor: Executor = request.app.state.executor
        results = await executor.score_many(with_defaults(batch), batch.deadline_s)

        def body() -> bytes:
            try:
                return BatchResult(results=results).model_dump_json().encode()
            except ValueError:  # one result that cannot serialise must not take the others with it
                return b'{"results":[' + b",".join(_item_json(r) for r in results) + b"]}"

        content = await asyncio.to_thread(body) if len(results) >= THREAD_AT else body()
        return Response(content, media_type="application/json")

    @app.get("/metrics")
    async def prometheus_metrics(request: Request) -> Response:
        executor: Executor = request.app.state.executor
        body = metrics.render(executor.snapshot(), executor.lint_cache_hits(), executor.queued(),
                              _environments(executor))
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"ok": True}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        snap = request.app.state.executor.snapshot()
        # Environments' pools start on first use: their state is shown, the default pool alone decides readiness.
        sessions = getattr(getattr(request.app.state, "sessions", None), "environments", None)
        body = {**snap, "environments": _environments(request.app.state.executor),
                "session_environments": sessions.snapshot() if sessions is not None else {}}
        return JSONResponse(body, status_code=200 if snap["warm"] else 503)

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
                       "max_cases": settings.max_cases, "max_queued": settings.max_queued,
                       "deadline_s": settings.deadline_s},
            "mode": "distributed" if settings.redis_url else "embedded",
            "sandbox": {"backend": snap["backend"], "image": executor.image_id, "pool_size": snap["size"]},
        }

    # The routers after the app's own routes: routes are tried in order, and /reward, tried first, no longer waits
    # for the dozen before it (~50 us a request). No two share a path.
    app.include_router(sandbox_fusion.router)
    app.include_router(sandbox_fusion_datasets.router)
    app.include_router(openrlhf.router)
    app.include_router(rollouts.router)
    app.include_router(dashboard.router)
    app.include_router(repos.router)
    app.include_router(session_router)
    app.mount("/static", StaticFiles(directory=dashboard.STATIC), name="static")
    return app


def with_defaults(batch: BatchRequest) -> list[Any]:
    """The batch's items, each an object taking the batch's defaults for the fields it does not set (one shared
    value per field: the tests of a group are then encoded and hashed once). A default that is not an item field,
    or an id, is refused with the field named; an item that is not an object stays as sent (invalid alone)."""
    if not batch.defaults:
        return batch.items
    fields = set(RewardItem.model_fields) - {"id"}
    wrong = [key for key in batch.defaults if key not in fields]
    if wrong:
        raise InvalidRequest([Problem(("defaults", key), "not a field an item takes from the batch's defaults"
                                      + (" (an id is each item's own)" if key == "id" else ""), "extra_forbidden")
                              for key in wrong])
    return [{**batch.defaults, **item} if isinstance(item, dict) else item for item in batch.items]


def _item_json(result: ItemResult) -> bytes:
    """One batch result; if it cannot be serialised it becomes an infra_error saying why (a fault of ours: every
    string of a result is made UTF-8 text by ItemResult itself)."""
    try:
        return result.model_dump_json().encode()
    except ValueError as e:
        return ItemResult(id=result.id, rollout_id=result.rollout_id, status="infra_error", reward=None,
                          profile=result.profile, message=f"the result could not be serialised: {e}"[:500]
                          ).model_dump_json().encode()


def _environments(executor: object) -> dict:
    """Per environment other than the default image: its pool's snapshot (embedded mode; a distributed API has
    no pools of its own)."""
    envs = getattr(executor, "environments", None)
    return envs() if callable(envs) else {}
