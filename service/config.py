"""Service settings: one table, read once from the environment and passed down as one value.

Every field is the variable REWARDBOX_<FIELD NAME> (case-insensitive); README.md "Configuration" lists them all
(tests/test_config_units.py keeps the two in step). Sizes are in the unit their name ends with (`_mb`, `_kb`);
the byte counts the code uses are properties. The few names from before this table that did not follow it still
work (validation aliases): REDIS_URL. A value that does not parse stops the service at start-up with the variable
named (`Settings.from_env`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from graders.efficiency_measure import DEFAULT_ROUNDS
from sandboxes import SandboxPool, choose_backend
from sandboxes.image import DEFAULT_CACHE
from sandboxes.pool import MAX_JOBS
from service.repos.archive import ArchiveLimits

PREFIX = "REWARDBOX_"
MB, KB = 1 << 20, 1 << 10


@dataclass(frozen=True)
class SessionSettings:
    """What the session manager needs (service/sessions/manager.py); `Settings.sessions` in a service."""

    max_open: int = 64
    max_bytes: int = 4096 << 20
    pool_size: int = 2
    sandbox_max_jobs: int = MAX_JOBS
    env_pools_max: int = 4  # sessions' pools of environments other than the default (service/environment_pools)
    env_pools_memory_mb: int = 8192
    max_wait_s: float = 30.0  # a command expected to wait longer for a sandbox is refused (service/sessions/manager.py)
    git: bool = True  # the workspace is a git repository at the snapshot (sandboxes/inside/session_git.py)


@dataclass(frozen=True)
class RepoSettings:
    """What the repository store needs (service/repos/snapshots.py); `Settings.repos` in a service."""

    limits: ArchiveLimits = ArchiveLimits()
    store_bytes: int = 512 << 20
    max_change_bytes: int = 4 << 20


class ConfigError(ValueError):
    """A REWARDBOX_* variable that does not parse: its name and why, one line each."""


class Settings(BaseSettings):
    # Limits on one request
    max_batch: int = Field(1024, gt=0, description="items in one /reward/batch")
    max_body_mb: float = Field(64, gt=0, description="larger request bodies are answered 413")
    max_code_kb: float = Field(256, gt=0, description="one program's source")
    max_timeout_s: float = Field(30.0, gt=0, description="cap on limits.timeout_s (per test case)")
    max_memory_mb: int = Field(4096, gt=0, description="cap on limits.memory_mb")
    max_item_s: float = Field(120.0, gt=0, description="sandbox time of one item's test runs, all its cases "
                              "together")
    max_cases: int = Field(1024, gt=0, description="test cases in one item")
    # With max_item_s it bounds a request (deadline + item time) below the client's 300 s timeout.
    deadline_s: float = Field(120.0, gt=0, description="default per-request deadline: items not started by then "
                              "are infra_error")
    max_queued: int = Field(2048, gt=0, description="test cases accepted and not yet started (all API "
                            "instances); beyond: 429")
    max_wait_s: float = Field(30.0, gt=0, description="a request expected to wait longer for a sandbox (the work "
                              "queued ahead, by its expected sandbox time) is refused at once: 429 (504 on "
                              "/run_code, which gets twice this to start) with Retry-After")
    header_timeout_s: float = Field(10.0, gt=0, description="a connection without a whole request head by then "
                                    "is closed")
    body_timeout_s: float = Field(60.0, gt=0, description="a request body not received whole by then: 408")
    infra_retry_s: float = Field(60.0, ge=0, description="OpenRLHF / SandboxFusion dataset routes score infra "
                                 "errors again this long")
    token: str = Field("", description="when set, every endpoint requires `Authorization: Bearer <token>` (the "
                       "client reads the same variable)")

    # Sandboxes
    backend: Literal["auto", "docker", "bubblewrap", "bwrap"] = Field(
        "auto", description="docker, bubblewrap, or auto (docker when an engine answers, else bubblewrap)")
    pool_size: int = Field(0, ge=0, description="warm sandboxes; 0 = one per core")
    sandbox_max_jobs: int = Field(MAX_JOBS, gt=0, description="jobs a sandbox runs before it is replaced")
    image: str = Field("", description="Docker image of the sandboxes; empty = `rewardbox-sandbox:TAG`, TAG "
                       "from sandboxes/image")
    cache: str = Field("", description="cache folder (bubblewrap root filesystems, rollout store, datasets); "
                       "empty = `~/.cache/rewardbox`")
    lint_cache_size: int = Field(4096, ge=0, description="lint results kept, by content hash")
    efficiency_rounds: int = Field(DEFAULT_ROUNDS, gt=0, description="rounds the efficiency grader always runs")
    env_build_timeout_s: float = Field(900.0, gt=0, description="time limit of one environment build "
                                       "(POST /environments)")
    env_build_memory_mb: int = Field(4096, gt=0, description="address-space limit of each environment build step")
    env_pools_max: int = Field(4, gt=0, description="warm pools of environments other than the default image "
                               "(items' and sessions' `environment`), least recently used closed first")
    env_pools_memory_mb: int = Field(8192, gt=0, description="sandbox memory of all environment pools together "
                                     "(pool size x 1536 MB each)")
    env_pool_size: int = Field(1, gt=0, description="sandboxes of each environment's pool (started on first use)")

    # Results and the rollout store
    result_cache_size: int = Field(100_000, ge=0, description="identical items answered from the cache; "
                                   "0 disables it")
    result_cache_ttl_s: float = Field(3600.0, ge=0, description="how long a cached result is answered")
    db: str = Field("", description="rollout store (SQLite file); empty = `rollouts.sqlite3` in the cache "
                    "folder, `off` = no store")
    db_retention: int = Field(1_000_000, gt=0, description="rollouts kept in SQLite (oldest dropped first)")

    # Distributed mode
    redis_url: str = Field("", validation_alias=AliasChoices(f"{PREFIX}REDIS_URL", "REDIS_URL"),
                           description="distributed mode when set: jobs go through Redis to `rewardbox worker` "
                           "processes (also read as REDIS_URL)")
    redis_prefix: str = Field("rewardbox", description="Redis key prefix: several deployments can share one Redis")
    redis_retention: int = Field(100_000, gt=0, description="rollouts kept in Redis (a few KiB each, in memory)")
    worker_concurrency: int = Field(0, ge=0, description="items a worker scores at once; 0 = 2 per sandbox")
    claim_idle_s: float = Field(30.0, gt=0, description="a job unacknowledged this long (its worker died) goes "
                                "to another worker")
    worker_grace_s: float = Field(30.0, ge=0, description="on SIGTERM a worker finishes its jobs this long, then "
                                  "hands the rest back")

    # Agent sessions
    sessions_max: int = Field(SessionSettings.max_open, gt=0, description="open sessions")
    sessions_max_mb: float = Field(SessionSettings.max_bytes / MB, gt=0, description="workspace bytes of all "
                                   "sessions together")
    session_pool_size: int = Field(SessionSettings.pool_size, gt=0, description="sandboxes of the session pool "
                                   "(started with the first session)")
    session_git: bool = Field(SessionSettings.git, description="a session's workspace is a git "
                              "repository at its snapshot (docs/sessions-tools.md)")

    # Repositories
    repo_max_archive_mb: float = Field(ArchiveLimits.archive_bytes / MB, gt=0, description="an uploaded .tar.gz")
    repo_max_unpacked_mb: float = Field(ArchiveLimits.unpacked_bytes / MB, gt=0,
                                        description="all file contents of a repository")
    repo_max_files: int = Field(ArchiveLimits.files, gt=0, description="files, directories and links")
    repo_max_depth: int = Field(ArchiveLimits.depth, gt=0, description="path components")
    repo_store_mb: float = Field(RepoSettings.store_bytes / MB, gt=0, description="normalized archives kept, "
                                 "least recently used out first")
    repo_max_change_kb: float = Field(RepoSettings.max_change_bytes / KB, gt=0, description="a repo item's change")

    # env_ignore_empty: an empty variable means the default, as before this table.
    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, frozen=True, populate_by_name=True,
                                      extra="forbid")

    @classmethod
    def from_env(cls) -> Settings:
        """The environment's settings; ConfigError naming every variable that does not parse."""
        try:
            return cls()
        except ValidationError as e:
            raise ConfigError("\n".join(f"{variable(str(err['loc'][0]))}={err['input']!r}: {err['msg']}"
                                        for err in e.errors())) from None

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * MB)

    @property
    def max_code_bytes(self) -> int:
        return int(self.max_code_kb * KB)

    @property
    def cache_dir(self) -> Path | None:
        return Path(self.cache) if self.cache else None

    @property
    def db_file(self) -> Path | None:
        """The rollout store's SQLite file; None when the store is off."""
        if self.db == "off":
            return None
        return Path(self.db) if self.db else (self.cache_dir or DEFAULT_CACHE) / "rollouts.sqlite3"

    @property
    def sessions(self) -> SessionSettings:
        return SessionSettings(max_open=self.sessions_max, max_bytes=int(self.sessions_max_mb * MB),
                               pool_size=self.session_pool_size, sandbox_max_jobs=self.sandbox_max_jobs,
                               env_pools_max=self.env_pools_max, env_pools_memory_mb=self.env_pools_memory_mb,
                               max_wait_s=self.max_wait_s, git=self.session_git)

    @property
    def repos(self) -> RepoSettings:
        limits = ArchiveLimits(archive_bytes=int(self.repo_max_archive_mb * MB),
                               unpacked_bytes=int(self.repo_max_unpacked_mb * MB),
                               files=self.repo_max_files, depth=self.repo_max_depth)
        return RepoSettings(limits, store_bytes=int(self.repo_store_mb * MB),
                            max_change_bytes=int(self.repo_max_change_kb * KB))


def variable(field: str) -> str:
    """The environment variable of a field (or of the alias an error names)."""
    name = field.upper()
    return name if name.startswith(PREFIX) else PREFIX + name


def sandbox_pool(settings: Settings, size: int | None = None) -> SandboxPool:
    """The warm pool a service scores on (embedded API, worker, `replay --local`), as its settings say (size:
    instead of REWARDBOX_POOL_SIZE); not started."""
    backend = choose_backend(settings.backend, image=settings.image or None)
    return SandboxPool(backend, size=size or settings.pool_size or None, max_jobs=settings.sandbox_max_jobs)


def env_table() -> str:
    """The README's table of every variable (name, default, meaning): `python -m service.config` prints it."""

    def shown(value: object) -> str:
        if value == "":
            return "(empty)"
        return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"

    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    rows += [f"| `{variable(name)}` | {shown(field.default)} | {field.description} |"
             for name, field in Settings.model_fields.items()]
    return "\n".join(rows)


if __name__ == "__main__":
    print(env_table())
