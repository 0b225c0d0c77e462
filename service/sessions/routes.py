"""HTTP routes of agent sessions: a thin skin over SessionManager (service/sessions/manager.py).

    POST   /sessions                 {"repo": {"id"} | {"archive_b64"}, "ttl_s", "limits"} -> {"session_id"}
    GET    /sessions                 open sessions with owner, age and size
    POST   /sessions/{id}/exec       {"command", "timeout_s", "stdin"?} -> {exit_code, stdout, stderr, status, ...}
    GET    /sessions/{id}/files?path=P -> {"path", "content"}    PUT {"path", "content"}
    GET    /sessions/{id}/diff       -> {"patch", "not_in_patch"}
    POST   /sessions/{id}/fork       {"n"} -> {"session_ids"}
    POST   /sessions/{id}/reward     {"tests": {kind "repo"}, "profile"?} -> ItemResult
    DELETE /sessions/{id}

The manager is a SessionManager in embedded mode, a RemoteSessions (service/distributed/sessions.py: each session pinned
to one worker, calls routed through Redis) in distributed mode; both have the same surface.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request

from rewardbox.names import unquote, wire
from service.environments.pools import EnvironmentProblem
from service.models import ItemResult
from service.repos.snapshots import check_repo
from service.schema import ERRORS, Message
from service.sessions.manager import SessionGone, SessionManager
from service.sessions.models import CreateSession, ExecRequest, ForkRequest, SessionReward, WriteFile
from service.sessions.workspace import PathError
from service.validation import InvalidRequest, Problem

router = APIRouter(tags=["sessions"])
_ANSWERS: dict[int, dict[str, Any]] = {
    404: {"model": Message, "description": "no session with this id was ever open here (or no such file)"},
    410: {"model": Message, "description": "the session ended: deleted, expired (ttl_s), or its worker died"},
    415: {"model": Message, "description": "the file is not UTF-8 text"},
    501: {"model": Message, "description": "sessions are not served by this process"},
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {**ERRORS(*(c for c in codes if c not in _ANSWERS)), **{c: _ANSWERS[c] for c in codes if c in _ANSWERS}}


SESSION_ERRORS = _errors(404, 410, 422, 501)


def _manager(request: Request) -> SessionManager:
    manager = getattr(request.app.state, "sessions", None)
    if manager is None:
        raise HTTPException(501, detail="agent sessions are not served by this process (no session manager)")
    return manager


def _gone(e: SessionGone) -> HTTPException:
    return HTTPException(e.status, detail=str(e))


def _path_error(e: PathError, field: str = "path") -> HTTPException | InvalidRequest:
    if e.status == 422:
        return InvalidRequest([Problem((field,), str(e), "path")])
    return HTTPException(e.status, detail=str(e))


@router.post("/sessions", status_code=201, responses=_errors(404, 413, 422, 429))
async def create_session(body: CreateSession, request: Request) -> dict[str, Any]:
    manager = _manager(request)

    # check_repo's view of a repo item with no change yet: an inline archive is stored, a named one must be
    item = SimpleNamespace(repo=body.repo, patch="", files=None, tests=SimpleNamespace(test_files={}))
    problem = await check_repo(item, request.app.state.repos)
    if problem is not None:
        raise InvalidRequest([problem])
    try:
        assert body.repo.id is not None  # check_repo stored an inline archive under its id
        session = await manager.create(body.repo.id, body.ttl_s, body.limits, body.environment)
    except PathError as e:
        raise InvalidRequest([Problem(("repo", "id"), str(e), "repo_not_stored")]) from None
    except EnvironmentProblem as e:
        raise InvalidRequest([Problem(e.loc, e.message, "environment")]) from None
    return {"session_id": session.id, "expires_in_s": body.ttl_s, "bytes": session.bytes}


@router.get("/sessions")
async def list_sessions(request: Request) -> dict[str, Any]:
    manager = _manager(request)
    sessions = await manager.list_open()
    return {"sessions": sessions, "open": len(sessions), "bytes": sum(s["bytes"] for s in sessions),
            "max_open": manager.settings.max_open, "max_bytes": manager.settings.max_bytes}


@router.post("/sessions/{sid}/exec", responses=_errors(404, 410, 422, 429, 501))
async def exec_command(sid: str, body: ExecRequest, request: Request) -> dict[str, Any]:
    try:
        return await _manager(request).exec(sid, body.command, body.timeout_s, body.stdin)
    except SessionGone as e:
        raise _gone(e) from None


@router.get("/sessions/{sid}/files", responses=_errors(404, 410, 415, 422))
async def read_file(sid: str, request: Request, path: str = Query(..., min_length=1, max_length=1024)
                    ) -> dict[str, Any]:
    name = unquote(path).decode("utf-8", "surrogateescape")  # a name that is not UTF-8 comes git-quoted
    try:
        node = await _manager(request).read(sid, name)
    except SessionGone as e:
        raise _gone(e) from None
    except PathError as e:
        raise _path_error(e) from None
    try:
        content = node.data.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPException(415, detail=f"path: {path} is not UTF-8 text ({len(node.data)} bytes); read it with a "
                                        "command (e.g. base64) instead") from None
    return {"path": wire(name), "content": content, "executable": node.executable}


@router.put("/sessions/{sid}/files", responses=_errors(404, 410, 413, 422))
async def write_file(sid: str, body: WriteFile, request: Request) -> dict[str, Any]:
    try:
        await _manager(request).write(sid, body.path, body.content)
    except SessionGone as e:
        raise _gone(e) from None
    except PathError as e:
        raise _path_error(e) from None
    return {"path": body.path, "bytes": len(body.content.encode())}


@router.get("/sessions/{sid}/diff", responses=SESSION_ERRORS)
async def diff(sid: str, request: Request) -> dict[str, Any]:
    try:
        patch, skipped = await _manager(request).diff(sid)
    except SessionGone as e:
        raise _gone(e) from None
    return {"patch": patch, "not_in_patch": [wire(p) for p in skipped]}


@router.post("/sessions/{sid}/fork", status_code=201, responses=_errors(404, 410, 422, 429))
async def fork(sid: str, request: Request, body: ForkRequest | None = None) -> dict[str, Any]:
    try:
        children = await _manager(request).fork(sid, (body or ForkRequest()).n)
    except SessionGone as e:
        raise _gone(e) from None
    return {"session_ids": [c.id for c in children]}


@router.post("/sessions/{sid}/reward", response_model=ItemResult, responses=SESSION_ERRORS)
async def reward(sid: str, body: SessionReward, request: Request) -> ItemResult:
    manager = _manager(request)
    try:
        result = await manager.reward(sid, body.tests, body.profile, body.id)
    except SessionGone as e:
        raise _gone(e) from None
    if result.status == "invalid_input":
        raise InvalidRequest([Problem(tuple(e["loc"]), e["msg"], e["type"])
                              for e in result.details.get("invalid", [])] or [Problem(("tests",), result.message)])
    return result


@router.delete("/sessions/{sid}", responses=SESSION_ERRORS)
async def delete(sid: str, request: Request) -> dict[str, Any]:
    try:
        await _manager(request).delete(sid)
    except SessionGone as e:
        raise _gone(e) from None
    return {"session_id": sid, "deleted": True}
