"""The error answers, documented once for OpenAPI: every route lists the ones it gives (`responses=ERRORS(...)`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description='where the mistake is, e.g. ["body", "items", 3, "limits", "timeout_s"]')
    msg: str
    type: str = Field(description="machine-readable kind, pydantic's where it applies (e.g. finite_number, "
                      "less_than_equal, extra_forbidden, string_unicode, too_deep, unsupported_language, path)")
    supported: list[str] | None = Field(None, description="400 only: the languages this service runs")


class InvalidBody(BaseModel):
    detail: list[ErrorDetail]


class Message(BaseModel):
    detail: str


_RETRY = {"Retry-After": {"description": "seconds to wait before asking again", "schema": {"type": "integer"}}}
_ANSWERS: dict[int, dict[str, Any]] = {
    400: {"model": InvalidBody, "description": "unsupported language (`supported` lists the others)"},
    404: {"model": Message, "description": "no such rollout, or the rollout store is disabled (REWARDBOX_DB=off)"},
    408: {"model": Message, "description": "the request body did not arrive within REWARDBOX_BODY_TIMEOUT_S"},
    409: {"model": Message, "description": "the stored request no longer validates"},
    413: {"model": Message, "description": "the body exceeds REWARDBOX_MAX_BODY_MB"},
    422: {"model": InvalidBody, "description": "a client mistake; `loc` names the field"},
    429: {"model": Message, "description": "overloaded: the request's work does not fit the queue bound, or the "
          "wait it would face for a sandbox exceeds REWARDBOX_MAX_WAIT_S; nothing was accepted", "headers": _RETRY},
    503: {"model": Message, "description": "the queue (Redis) is unreachable, or a fault of ours (OpenRLHF route); "
          "nothing was accepted", "headers": _RETRY},
    504: {"model": Message, "description": "/run_code: overloaded or not started within the deadline (the status "
          "SandboxFusion clients retry); nothing ran", "headers": _RETRY},
}


def ERRORS(*codes: int) -> dict[int | str, dict[str, Any]]:  # noqa: N802 - reads as a constant table
    return {code: _ANSWERS[code] for code in codes}


def retry_after(exc: Exception) -> dict[str, str]:
    return {"Retry-After": str(max(1, int(getattr(exc, "retry_after_s", 1))))}
