"""Repository snapshots: `POST /repos`, `GET /repos/{id}`, the store behind them, and repo items' references.

A snapshot is stored content-addressed (id = sha256 of the uploaded .tar.gz) in its normalized form
(service/repos/archive.py), under a byte budget with least-recently-used eviction: in this process's memory in
embedded mode, in Redis in distributed mode (shared by every API process and worker; each worker keeps a local
LRU of what it fetched, safe because content-addressed entries never change). Sandboxes keep their own copy in
memory (sandboxes/inside/repo_workspace.py), so a snapshot crosses to a sandbox once, not once per item.

Settings: RepoSettings, from the service's Settings (REWARDBOX_REPO_STORE_MB, the budget;
REWARDBOX_REPO_MAX_ARCHIVE_MB, _MAX_UNPACKED_MB, _MAX_FILES, _MAX_DEPTH; REWARDBOX_REPO_MAX_CHANGE_KB: patch, files
and test files of one item together; service/config.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import json
import re
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from service.config import RepoSettings, Settings
from service.repos.archive import BadArchive, Normalized, normalize
from service.validation import Problem

REPO_ID = re.compile(r"^[0-9a-f]{64}$")
GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/x-tar+gzip", "application/x-gtar",
              "application/octet-stream")


@dataclass(frozen=True)
class RepoInfo:
    id: str
    archive_bytes: int
    unpacked_bytes: int
    files: int
    stored_bytes: int
    stripped: str | None

    @classmethod
    def of(cls, n: Normalized) -> RepoInfo:
        return cls(n.id, n.archive_bytes, n.unpacked_bytes, n.files, len(n.data), n.stripped)


class RepoStore(Protocol):
    settings: RepoSettings

    async def put(self, n: Normalized) -> bool: ...  # True when it was not stored yet

    async def info(self, repo_id: str) -> RepoInfo | None: ...

    async def data(self, repo_id: str) -> bytes | None: ...  # the normalized archive, what sandboxes load


class _Lru:
    """Bytes by key, least recently used out first beyond a byte budget."""

    def __init__(self, budget: int) -> None:
        self.budget, self.used = budget, 0
        self.items: OrderedDict[str, tuple[bytes, Any]] = OrderedDict()

    def get(self, key: str) -> tuple[bytes, Any] | None:
        entry = self.items.get(key)
        if entry is not None:
            self.items.move_to_end(key)
        return entry

    def put(self, key: str, data: bytes, meta: Any = None) -> None:
        if key in self.items or len(data) > self.budget:
            return
        self.items[key] = (data, meta)
        self.used += len(data)
        while self.used > self.budget:
            _, (old, _) = self.items.popitem(last=False)
            self.used -= len(old)


class MemoryRepoStore:
    """Embedded mode: this process's memory."""

    def __init__(self, settings: RepoSettings) -> None:
        self.settings = settings
        self._lru = _Lru(settings.store_bytes)

    async def put(self, n: Normalized) -> bool:
        if self._lru.get(n.id) is not None:
            return False
        self._lru.put(n.id, n.data, RepoInfo.of(n))
        return True

    async def info(self, repo_id: str) -> RepoInfo | None:
        entry = self._lru.get(repo_id)
        return entry[1] if entry else None

    async def data(self, repo_id: str) -> bytes | None:
        entry = self._lru.get(repo_id)
        return entry[0] if entry else None


# Stores a snapshot and evicts the least recently used ones beyond the budget, atomically. KEYS: none (the keys are
# derived from the prefix, like the other scripts: one Redis, not Redis Cluster).
PUT_SCRIPT = """
local prefix, id, data, info, now, budget = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local lru, total = prefix .. ':repos', prefix .. ':repos-bytes'
if redis.call('EXISTS', prefix .. ':repo:' .. id) == 1 then
  redis.call('ZADD', lru, now, id)
  return 0
end
redis.call('SET', prefix .. ':repo:' .. id, data)
redis.call('SET', prefix .. ':repo-info:' .. id, info)
redis.call('ZADD', lru, now, id)
local used = redis.call('INCRBY', total, string.len(data))
while used > budget do
  local oldest = redis.call('ZRANGE', lru, 0, 0)[1]
  if not oldest or oldest == id then break end
  local size = redis.call('STRLEN', prefix .. ':repo:' .. oldest)
  redis.call('DEL', prefix .. ':repo:' .. oldest, prefix .. ':repo-info:' .. oldest)
  redis.call('ZREM', lru, oldest)
  used = redis.call('DECRBY', total, size)
end
return 1
"""


class RedisRepoStore:
    """Distributed mode: snapshots in Redis, shared by every API process and worker, within store_bytes."""

    def __init__(self, url: str, prefix: str, settings: RepoSettings) -> None:
        import redis.asyncio as aioredis

        self.settings, self.prefix = settings, prefix
        self.redis = aioredis.Redis.from_url(url, decode_responses=False, socket_timeout=30,
                                             socket_connect_timeout=2)
        self._put = self.redis.register_script(PUT_SCRIPT)
        self._local = _Lru(min(settings.store_bytes, 256 << 20))  # what this process fetched

    async def put(self, n: Normalized) -> bool:
        info = json.dumps(asdict(RepoInfo.of(n)))
        created = await self._put(args=[self.prefix, n.id, n.data, info, time.time(), self.settings.store_bytes])
        return bool(int(created))

    async def info(self, repo_id: str) -> RepoInfo | None:
        raw = await self.redis.get(f"{self.prefix}:repo-info:{repo_id}")
        return RepoInfo(**json.loads(raw)) if raw else None

    async def data(self, repo_id: str) -> bytes | None:
        local = self._local.get(repo_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(f"{self.prefix}:repos", {repo_id: time.time()}, xx=True)  # in use: last out
        if local is None:
            pipe.get(f"{self.prefix}:repo:{repo_id}")
        replies = await pipe.execute()
        if local is not None:
            return local[0]
        if replies[1] is None:
            return None
        self._local.put(repo_id, replies[1])
        return replies[1]


@functools.cache
def repo_store(settings: Settings) -> RepoStore:
    """The one store of this process for these settings (the routes and the scorer share it)."""
    if settings.redis_url:
        return RedisRepoStore(settings.redis_url, settings.redis_prefix, settings.repos)
    return MemoryRepoStore(settings.repos)


async def store_archive(store: RepoStore, archive: bytes) -> tuple[RepoInfo, bool]:
    """Check, normalize and store one archive (BadArchive when it is refused: then nothing is kept)."""
    normalized = await asyncio.to_thread(normalize, archive, store.settings.limits)
    if len(normalized.data) > store.settings.store_bytes:
        raise BadArchive(f"archive: {len(normalized.data)} bytes normalized, more than the store's budget", 413)
    created = await store.put(normalized)
    return RepoInfo.of(normalized), created


def not_stored_msg(repo_id: str) -> str:
    return (f"repository {repo_id} is not stored (never uploaded, or evicted to keep the store within its budget): "
            "upload it again with POST /repos")


async def check_repo(item: Any, store: RepoStore) -> Problem | None:
    """For a repo item: the change's size, then its snapshot: an inline archive is stored (the item then names it
    by id), a named one must be stored. Returns what is wrong, naming the field, or None."""
    size = sum(len(t.encode()) for t in [item.patch or "", *(item.files or {}).values(),
                                        *item.tests.test_files.values()])
    if size > store.settings.max_change_bytes:
        return Problem(("patch",), f"the change and test files hold more than {store.settings.max_change_bytes} "
                       "bytes", "too_long")
    repo = item.repo
    if repo.archive_b64 is not None:
        try:
            archive = base64.b64decode(repo.archive_b64, validate=True)
        except (binascii.Error, ValueError):
            return Problem(("repo", "archive_b64"), "not valid base64", "base64")
        repo_id = hashlib.sha256(archive).hexdigest()
        if await store.info(repo_id) is None:  # the items of a GRPO group carry the same archive: check it once
            try:
                await store_archive(store, archive)
            except BadArchive as e:
                return Problem(("repo", "archive_b64"), str(e), "bad_archive")
        repo.id, repo.archive_b64 = repo_id, None
        return None
    if await store.info(repo.id) is None:
        return Problem(("repo", "id"), not_stored_msg(repo.id), "repo_not_stored")
    return None


router = APIRouter(tags=["repos"])


@router.post("/repos", status_code=201)
async def upload_repo(request: Request) -> JSONResponse:
    """Store a repository snapshot (`Content-Type: application/gzip`, a .tar.gz). 201 when new, 200 when it was
    stored already; the id is the sha256 of the archive."""
    kind = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if kind not in GZIP_TYPES:
        raise HTTPException(415, detail=f"content-type: send the .tar.gz as application/gzip, not {kind or 'none'}")
    store: RepoStore = request.app.state.repos
    try:
        info, created = await store_archive(store, await request.body())
    except BadArchive as e:
        raise HTTPException(e.status, detail=str(e)) from None
    return JSONResponse({**asdict(info), "exists": True, "created": created}, status_code=201 if created else 200)


@router.get("/repos/{repo_id}")
async def get_repo(repo_id: str, request: Request) -> JSONResponse:
    """Whether a snapshot is stored, and its sizes."""
    if not REPO_ID.match(repo_id):
        raise HTTPException(422, detail="repo id: 64 lowercase hex digits (the sha256 of the archive)")
    info = await request.app.state.repos.info(repo_id)
    if info is None:
        return JSONResponse({"id": repo_id, "exists": False, "detail": "repo.id: " + not_stored_msg(repo_id)},
                            status_code=404)
    return JSONResponse({**asdict(info), "exists": True})
