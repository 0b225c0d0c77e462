"""Prometheus metrics (`GET /metrics`): requests, items by status, reward and component distributions, latency per
stage, pool occupancy, lint cache hits, infra errors. One registry per app, so several apps can live in a process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from service.models import COMPONENTS, ItemResult

KNOWN_PATHS = {"/reward", "/reward/batch", "/run_code", "/openrlhf/get_reward", "/healthz", "/readyz", "/v1/info",
               "/metrics", "/rollouts", "/rollouts/export", "/repos"}
REWARD_BUCKETS = (-1.0, -0.6, -0.3, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
UNIT_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("rewardbox_http_requests", "HTTP requests", ["path", "code"], registry=r)
        self.items = Counter("rewardbox_items", "Scored items by status", ["status", "profile"], registry=r)
        self.infra_errors = Counter("rewardbox_infra_errors", "Items failed by a fault of ours", registry=r)
        self.reward = Histogram("rewardbox_reward", "Rewards returned", buckets=REWARD_BUCKETS, registry=r)
        self.component = Histogram("rewardbox_component", "Component scores", ["component"], buckets=UNIT_BUCKETS,
                                   registry=r)
        self.stage = Histogram("rewardbox_stage_seconds", "Time per scoring stage", ["stage"],
                               buckets=SECONDS_BUCKETS, registry=r)
        self.pool = Gauge("rewardbox_pool_sandboxes", "Sandboxes in the pool", ["state"], registry=r)
        self.pool_jobs = Gauge("rewardbox_pool_jobs", "Jobs run by the pool since start", registry=r)
        self.lint_cache_hits = Gauge("rewardbox_lint_cache_hits", "Lint results served from the cache", registry=r)
        self.result_cache = Counter("rewardbox_result_cache", "Items answered from the result cache (hit) or run"
                                    " (miss)", ["outcome"], registry=r)
        self.rejected = Counter("rewardbox_rejected_items", "Items refused by admission control (429) or because"
                                " the queue was unreachable (503)", ["reason"], registry=r)
        self.queued = Gauge("rewardbox_queued_items", "Items accepted and not yet started", registry=r)
        self.env_pool = Gauge("rewardbox_environment_pool_sandboxes", "Sandboxes of each environment's pool (the "
                              "default image's: rewardbox_pool_sandboxes)", ["environment", "state"], registry=r)
        self.env_pool_jobs = Gauge("rewardbox_environment_pool_jobs", "Jobs run by each environment's pool",
                                   ["environment"], registry=r)

    def observe_item(self, result: ItemResult, seconds: float) -> None:
        self.items.labels(result.status, result.profile or "").inc()
        self.stage.labels("item").observe(seconds)
        if result.status == "infra_error":
            self.infra_errors.inc()
        if result.reward is not None:
            self.reward.observe(result.reward)
        for name in COMPONENTS:
            value = result.components.get(name)
            if value is not None:
                self.component.labels(name).observe(value)
        for stage, ms in (result.details.get("timings") or {}).items():
            self.stage.labels(stage.removesuffix("_ms")).observe(ms / 1000.0)

    def render(self, pool_snapshot: dict, lint_hits: int, queued: int = 0,
               environments: dict[str, dict] | None = None) -> bytes:
        self.queued.set(queued)
        self.env_pool.clear()  # a closed environment pool leaves no stale series behind
        self.env_pool_jobs.clear()
        for key, snap in (environments or {}).items():
            for state in ("idle", "busy", "size"):
                self.env_pool.labels(key, state).set(snap[state])
            self.env_pool_jobs.labels(key).set(snap["jobs"])
        for state in ("idle", "busy"):
            self.pool.labels(state).set(pool_snapshot[state])
        self.pool.labels("size").set(pool_snapshot["size"])
        self.pool_jobs.set(pool_snapshot["jobs"])
        self.lint_cache_hits.set(lint_hits)
        return generate_latest(self.registry)


class RequestCounter:
    """ASGI middleware: count requests by path and status code."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(path, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)
