"""Items and sessions in an environment other than the default image: what `environment` resolves to, and one
warm pool per target in use, started on first use and kept within a count and memory budget (least recently used
out first; REWARDBOX_ENV_POOLS_MAX, REWARDBOX_ENV_POOLS_MEMORY_MB).

Resolution (`Resolver`): `{"image"}` is a user's own image on the Docker host (checked to exist; a foreign target:
the runner brings its own interpreter); `{"id"}` goes through a lookup callable, an environment store's
`target(env_id)` (service/environments/store.py), which raises for an unknown or unbuilt environment. Every failure is
the request's (`EnvironmentProblem`, a 4xx naming the field), never a 5xx.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sandboxes import SandboxPool, SandboxSpec, choose_backend
from sandboxes.backends import UnsupportedTarget
from sandboxes.targets import DEFAULT_TARGET, SandboxTarget
from service.environments.models import EnvironmentRef
from service.environments.store import EnvironmentNotFound, EnvironmentNotReady

Lookup = Callable[[str], SandboxTarget]
DEFAULT_PYTHON = "/usr/bin/python3"
IMAGE_CHECK_TTL_S = 30.0  # an image found stays found this long (no engine call per item)


class EnvironmentProblem(ValueError):
    """The environment as sent cannot be used: `loc` names the field (a 4xx)."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


def docker_image_exists(ref: str) -> bool:
    import docker
    from docker.errors import ImageNotFound

    client = docker.from_env(timeout=10)
    try:
        client.images.get(ref)
        return True
    except ImageNotFound:
        return False
    finally:
        client.close()


class Resolver:
    """EnvironmentRef -> SandboxTarget. lookup: the environment store's `target` (None: ids are refused)."""

    def __init__(self, backend: str, lookup: Lookup | None = None,
                 image_exists: Callable[[str], bool] = docker_image_exists) -> None:
        self.backend, self.lookup, self.image_exists = backend, lookup, image_exists
        self._seen: dict[str, float] = {}

    def resolve(self, ref: EnvironmentRef | None) -> SandboxTarget:
        if ref is None:
            return DEFAULT_TARGET
        if ref.id is not None:
            if self.lookup is None:
                raise EnvironmentProblem(("environment", "id"), "this server has no environment store: name an "
                                         "image (environment.image) or leave environment out")
            try:
                return self.lookup(ref.id)
            except (EnvironmentNotFound, EnvironmentNotReady) as e:  # the request's: any other error is ours
                raise EnvironmentProblem(("environment", "id"), str(e) or type(e).__name__) from None
        assert ref.image is not None  # EnvironmentRef: exactly one of id and image
        if self.backend in ("bubblewrap", "bwrap"):
            raise EnvironmentProblem(("environment", "image"), "a user's own image runs on the Docker backend only "
                                     "(this server runs bubblewrap)")
        now = time.monotonic()
        if now - self._seen.get(ref.image, -IMAGE_CHECK_TTL_S) >= IMAGE_CHECK_TTL_S:
            try:
                found = self.image_exists(ref.image)
            except Exception as e:  # noqa: BLE001 - the engine itself failed: not the request's fault
                raise RuntimeError(f"docker engine: {e}") from e
            if not found:
                raise EnvironmentProblem(("environment", "image"), f"image {ref.image!r} is not on the Docker host "
                                         "(rewardbox never pulls: `docker pull` or `docker load` it first)")
            self._seen[ref.image] = now
        return SandboxTarget(key=f"image:{ref.image}", docker_image=ref.image, foreign=True,
                             python=ref.python or DEFAULT_PYTHON, repo_path=ref.repo_path)


_lookup: Lookup | None = None  # the environment store's `target`, set once by the app (set_lookup)
_resolvers: dict[str, Resolver] = {}


def set_lookup(lookup: Lookup | None) -> None:
    """Wire `{"id"}` environments to a store (service/environments/store.py: `EnvironmentStore.target`)."""
    global _lookup
    _lookup = lookup
    for r in _resolvers.values():
        r.lookup = lookup


def resolver(backend: str) -> Resolver:
    """This process's resolver for a backend setting (auto: docker when an engine answers)."""
    if backend == "auto":
        if "auto" not in _resolvers:  # decided once per process, as choose_backend("auto") decides the pool's
            from sandboxes.backends import docker_available

            _resolvers["auto"] = resolver("docker" if docker_available() else "bubblewrap")
        return _resolvers["auto"]
    if backend not in _resolvers:
        _resolvers[backend] = Resolver(backend, _lookup)
    return _resolvers[backend]


T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    target: SandboxTarget
    pool: SandboxPool
    user: T | None  # what is built on the pool (a Scorer, ...): set once the pool has started
    memory_mb: int
    in_use: int = 0
    last_used: float = field(default_factory=time.monotonic)
    ready: asyncio.Future[None] | None = None  # done when the pool has started (or failed to)


class EnvironmentPools(Generic[T]):
    """One pool per target other than the default, started on first use. At most `max_pools` of them, together at
    most `memory_mb` of sandbox memory (size x the sandbox's memory limit); to make room the least recently used
    idle pool is closed. A target that cannot fit even alone, or while every pool is busy, waits for one to go idle.
    wrap(pool, target) builds what callers use on a pool (e.g. a Scorer)."""

    def __init__(self, backend: str, wrap: Callable[[SandboxPool, SandboxTarget], T], *, size: int = 1,
                 max_pools: int = 4, memory_mb: int = 8192, spec: SandboxSpec | None = None,
                 max_jobs: int | None = None, close_user: Callable[[T], Awaitable[None]] | None = None) -> None:
        self.backend, self.wrap, self.size = backend, wrap, size
        self.max_pools, self.memory_mb = max_pools, memory_mb
        self.spec = spec or SandboxSpec()
        self.max_jobs = max_jobs
        self.close_user = close_user
        self._pools: OrderedDict[str, _Entry[T]] = OrderedDict()
        self._lock = asyncio.Lock()
        self._freed = asyncio.Condition()
        self.evicted = 0
        self.started = 0

    def pool_memory_mb(self) -> int:
        return self.size * self.spec.memory_mb

    def _used_mb(self) -> int:
        return sum(e.memory_mb for e in self._pools.values())

    def _make(self, target: SandboxTarget) -> SandboxPool:
        try:
            backend = choose_backend(self.backend, target=target)
        except UnsupportedTarget as e:
            raise EnvironmentProblem(("environment", "image"), str(e)) from None
        kwargs: dict[str, Any] = {"size": self.size, "spec": self.spec}
        if self.max_jobs is not None:
            kwargs["max_jobs"] = self.max_jobs
        return SandboxPool(backend, **kwargs)

    @asynccontextmanager
    async def use(self, target: SandboxTarget) -> AsyncIterator[T]:
        """The target's pool user, its pool started (first use) and held against eviction while in use."""
        entry = await self._acquire(target)
        try:
            assert entry.user is not None  # _acquire returns started entries only
            yield entry.user
        finally:
            entry.in_use -= 1
            entry.last_used = time.monotonic()
            async with self._freed:
                self._freed.notify_all()

    async def _acquire(self, target: SandboxTarget) -> _Entry[T]:
        need = self.pool_memory_mb()
        if need > self.memory_mb:
            raise EnvironmentProblem(("environment",), f"one pool of this environment needs {need} MB of sandbox "
                                     f"memory; the server allows {self.memory_mb} (REWARDBOX_ENV_POOLS_MEMORY_MB)")
        while True:
            closing: list[_Entry[T]] = []
            mine = False
            async with self._lock:  # bookkeeping only: pools start and close outside it
                entry = self._pools.get(target.key)
                if entry is not None:
                    entry.in_use += 1
                    self._pools.move_to_end(target.key)
                else:
                    victims = self._victims(need)
                    if victims is not None:
                        closing = [self._pools.pop(key) for key in victims]
                        self.evicted += len(closing)
                        entry = _Entry(target, self._make(target), None, need, in_use=1,
                                       ready=asyncio.get_running_loop().create_future())
                        self._pools[target.key] = entry
                        mine = True
            if mine:
                assert entry is not None
                for old in closing:  # before the new pool starts: the sandboxes stay within the budget
                    await self._close(old)
                return await self._start(entry)
            if entry is not None:
                return await self._ready(entry)
            async with self._freed:  # every pool busy: wait until one is released (a missed notice: re-check)
                try:
                    await asyncio.wait_for(self._freed.wait(), 0.5)
                except TimeoutError:
                    pass

    async def _start(self, entry: _Entry[T]) -> _Entry[T]:
        """Start a new entry's pool; callers of the same target meanwhile wait in _ready."""
        assert entry.ready is not None
        try:
            await entry.pool.start()
            entry.user = self.wrap(entry.pool, entry.target)
            self.started += 1
            entry.ready.set_result(None)
            return entry
        except BaseException as e:
            self._pools.pop(entry.target.key, None)
            entry.ready.set_exception(e if isinstance(e, Exception) else RuntimeError("pool start cancelled"))
            entry.ready.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            await entry.pool.close()
            raise

    async def _ready(self, entry: _Entry[T]) -> _Entry[T]:
        """An entry another caller is starting: wait for it (its failure is ours too)."""
        if entry.ready is not None and not entry.ready.done():
            try:
                await asyncio.shield(entry.ready)
            except BaseException:
                entry.in_use -= 1
                raise
        elif entry.ready is not None and entry.ready.exception() is not None:
            entry.in_use -= 1
            raise entry.ready.exception()  # type: ignore[misc]
        return entry

    def _victims(self, need: int) -> list[str] | None:
        """Idle pools to close, least recently used first, so that one more fits; None when it cannot fit now."""
        count, used, out = len(self._pools), self._used_mb(), []
        for key, entry in sorted(self._pools.items(), key=lambda kv: kv[1].last_used):
            if count < self.max_pools and used + need <= self.memory_mb:
                break
            if entry.in_use == 0:
                out.append(key)
                count, used = count - 1, used - entry.memory_mb
        return out if count < self.max_pools and used + need <= self.memory_mb else None

    async def _close(self, entry: _Entry[T]) -> None:
        if self.close_user is not None and entry.user is not None:
            await self.close_user(entry.user)
        await entry.pool.close()

    async def close(self) -> None:
        async with self._lock:
            while self._pools:
                await self._close(self._pools.popitem()[1])

    def keys(self) -> list[str]:
        """Targets with a pool now, least recently used first."""
        return list(self._pools)

    def snapshot(self) -> dict[str, dict]:
        """Per environment key: its pool's snapshot, plus whether it is in use now."""
        return {key: {**e.pool.snapshot(), "in_use": e.in_use, "memory_mb": e.memory_mb}
                for key, e in self._pools.items()}

    def totals(self) -> dict[str, int]:
        return {"pools": len(self._pools), "memory_mb": self._used_mb(), "max_pools": self.max_pools,
                "max_memory_mb": self.memory_mb, "started": self.started, "evicted": self.evicted}
