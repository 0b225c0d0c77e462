"""Request shapes of agent sessions (`/sessions`, service/sessions/manager.py). Every field is checked here, so a
mistake is answered 422 naming it (service/validation.py's shape)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.environments.models import EnvironmentRef
from service.repos.models import RepoRef, RepoTests

MAX_COMMAND_BYTES = 64 << 10
MAX_STDIN_BYTES = 1 << 20
MAX_FILE_BYTES = 8 << 20


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionLimits(Strict):
    """Per command (as for any job) and per session (what its workspace may hold)."""

    memory_mb: int = Field(1024, ge=32, le=4096, strict=True, description="address space of each process")
    output_bytes: int = Field(1 << 20, ge=1024, le=16 << 20, strict=True, description="cap on stdout and stderr")
    processes: int = Field(64, ge=4, le=512, strict=True, description="processes and threads of a command")
    workspace_mb: float = Field(64.0, gt=0, le=512, description="bytes the workspace may hold (files and links)")
    inodes: int = Field(10000, ge=16, le=100000, strict=True, description="files, directories and links")


class CreateSession(Strict):
    repo: RepoRef
    environment: EnvironmentRef | None = Field(None, description="where the session runs: an environment (`id`) or "
                                               "a Docker image on the host (`image`); default: rewardbox's image")
    ttl_s: float = Field(600.0, gt=0, le=86400, description="the session ends this long after its creation")
    limits: SessionLimits = Field(default_factory=SessionLimits)


class ExecRequest(Strict):
    command: str = Field(..., min_length=1, max_length=MAX_COMMAND_BYTES, description="a shell line (/bin/sh -c)")
    timeout_s: float = Field(30.0, gt=0, le=600, description="wall clock of the command; then it is killed")
    stdin: str | None = Field(None, max_length=MAX_STDIN_BYTES)


class WriteFile(Strict):
    path: str = Field(..., min_length=1, max_length=1024)
    content: str = Field(..., max_length=MAX_FILE_BYTES, description="UTF-8 text")


class ForkRequest(Strict):
    n: int = Field(1, ge=1, le=64, strict=True)


class SessionReward(Strict):
    tests: RepoTests
    profile: Literal["seed", "gated", "binary", "pass_rate", "coderl"] = "binary"
    id: str | None = Field(None, max_length=256, description="client rollout id, echoed")
