"""Service settings: read once from the environment (REWARDBOX_*), passed around as one value."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _env(name: str, default: float) -> float:
    raw = os.environ.get(f"REWARDBOX_{name}")
    return float(raw) if raw not in (None, "") else default


@dataclass(frozen=True)
class Settings:
    max_batch: int = 1024  # items in one /reward/batch
    max_body_bytes: int = 64 << 20  # larger requests get 413
    max_code_bytes: int = 256 << 10  # one program
    max_timeout_s: float = 30.0  # cap on limits.timeout_s (per test case)
    max_memory_mb: int = 4096  # cap on limits.memory_mb
    max_item_s: float = 120.0  # sandbox time of one item's test runs, all its cases together
    max_cases: int = 1024  # test cases in one item
    pool_size: int = 0  # sandboxes; 0 = one per core
    backend: str = "auto"  # docker | bubblewrap | auto
    lint_cache_size: int = 4096
    auth_token: str = ""  # when set, every endpoint requires `Authorization: Bearer <token>`
    db_path: str = ""  # rollout store (SQLite); "" = $REWARDBOX_CACHE/rollouts.sqlite3, "off" = no store
    db_retention: int = 1_000_000  # rollouts kept (oldest dropped first)
    redis_url: str = ""  # distributed mode when set: jobs go through Redis to `rewardbox worker` processes
    redis_prefix: str = "rewardbox"  # key prefix, so that several deployments can share one Redis
    redis_retention: int = 100_000  # rollouts kept in Redis (distributed mode; a few KiB each, in memory)
    max_queued: int = 2048  # work (test cases) accepted and not yet started (all API instances); beyond: 429
    # Default per-request deadline: items not started by then are infra_error. With max_item_s it bounds a request
    # (deadline + item time) below the client's 300 s timeout, so the client hears the answer.
    deadline_s: float = 120.0
    result_cache_size: int = 100_000  # identical items answered from the cache; 0 disables it
    result_cache_ttl_s: float = 3600.0
    worker_concurrency: int = 0  # items a worker scores at once; 0 = 2 per sandbox
    claim_idle_s: float = 30.0  # a job unacknowledged this long (its worker died) goes to another worker
    worker_grace_s: float = 30.0  # SIGTERM: a worker finishes its jobs for this long, then hands the rest back
    header_timeout_s: float = 10.0  # a connection that has not sent a whole request head by then is closed
    body_timeout_s: float = 60.0  # a request body not received whole by then is answered 408 and closed
    infra_retry_s: float = 60.0  # OpenRLHF / SandboxFusion dataset routes score infra errors again this long

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            max_batch=int(_env("MAX_BATCH", cls.max_batch)),
            max_body_bytes=int(_env("MAX_BODY_MB", cls.max_body_bytes / (1 << 20)) * (1 << 20)),
            max_code_bytes=int(_env("MAX_CODE_KB", cls.max_code_bytes / 1024) * 1024),
            max_timeout_s=_env("MAX_TIMEOUT_S", cls.max_timeout_s),
            max_memory_mb=int(_env("MAX_MEMORY_MB", cls.max_memory_mb)),
            max_item_s=_env("MAX_ITEM_S", cls.max_item_s),
            max_cases=int(_env("MAX_CASES", cls.max_cases)),
            pool_size=int(_env("POOL_SIZE", 0)),
            backend=os.environ.get("REWARDBOX_BACKEND", "auto"),
            lint_cache_size=int(_env("LINT_CACHE_SIZE", cls.lint_cache_size)),
            auth_token=os.environ.get("REWARDBOX_TOKEN", ""),
            db_path=os.environ.get("REWARDBOX_DB", ""),
            db_retention=int(_env("DB_RETENTION", cls.db_retention)),
            redis_url=os.environ.get("REDIS_URL", ""),
            redis_prefix=os.environ.get("REWARDBOX_REDIS_PREFIX", cls.redis_prefix),
            redis_retention=int(_env("REDIS_RETENTION", cls.redis_retention)),
            max_queued=int(_env("MAX_QUEUED", cls.max_queued)),
            deadline_s=_env("DEADLINE_S", cls.deadline_s),
            result_cache_size=int(_env("RESULT_CACHE_SIZE", cls.result_cache_size)),
            result_cache_ttl_s=_env("RESULT_CACHE_TTL_S", cls.result_cache_ttl_s),
            worker_concurrency=int(_env("WORKER_CONCURRENCY", 0)),
            claim_idle_s=_env("CLAIM_IDLE_S", cls.claim_idle_s),
            worker_grace_s=_env("WORKER_GRACE_S", cls.worker_grace_s),
            header_timeout_s=_env("HEADER_TIMEOUT_S", cls.header_timeout_s),
            body_timeout_s=_env("BODY_TIMEOUT_S", cls.body_timeout_s),
            infra_retry_s=_env("INFRA_RETRY_S", cls.infra_retry_s),
        )
