"""Task environments: built once per spec (content-addressed), remembered across restarts, handed to pools as a
`SandboxTarget`.

On disk, under `sandboxes.image.cache_dir()/envs/`:
  <id>.json    the record (spec, state, created, size, error), rewritten at each state change
  <id>.log     the build log
  <id>/        the bubblewrap root filesystem (renamed in only when complete)
  <id>.ready   written last, after the rootfs and the Docker image exist: its presence is what "ready" means
Builds run on a background thread (one at a time: they are heavy), so POST answers at once.

Stale environments (issue 28): the id is the hash of the spec only, but a build is also a function of the base image
it was built FROM (`sandboxes.image.image_tag()`, a hash of the base's build inputs). The record keeps that tag
(`base`); a ready or failed environment whose `base` is not the current tag (records without one: an unknown base) is
`stale`. It is never a target: POST of its spec rebuilds it on the current base, and an item or session naming it
starts that rebuild and is answered as for a building environment. While it rebuilds the previous root filesystem is
kept aside (`.old-<id>`) and removed when the rebuild ends; the Docker tag moves to the new image at its end and the
previous image, untagged, is pruned by label.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from sandboxes import image
from sandboxes.targets import SandboxTarget
from service.environments import build as eb
from service.environments.models import ENVIRONMENT_ID, EnvironmentSpec

State = Literal["building", "ready", "failed"]
LOG_TAIL = 4000


class EnvironmentNotFound(LookupError):
    """No environment with this id was ever posted (answer 404 / 422 naming the field)."""


class EnvironmentNotReady(RuntimeError):
    """The environment is still building or its build failed (answer 409 naming the field)."""

    def __init__(self, env_id: str, state: str, detail: str = "") -> None:
        super().__init__(f"environment {env_id} is {state}" + (f": {detail}" if detail else ""))
        self.env_id, self.state = env_id, state


class EnvironmentsUnavailable(RuntimeError):
    """This process cannot build environments: its cache folder cannot be written (answer 503). An API that runs
    no sandbox as an unprivileged user (docker-compose.yml) still starts and lists; builds need a writable
    REWARDBOX_CACHE."""


class EnvironmentRecord(BaseModel):
    id: str
    state: State
    spec: EnvironmentSpec
    created: float  # unix time of the first POST
    built_s: float | None = None
    size_bytes: int | None = None  # what the environment adds to the base rootfs
    error: str | None = None
    base: str = ""  # base image tag it was built on ("": a record older than this field, an unknown base)
    docker_image: str | None = None
    stale: bool = False  # computed by EnvironmentStore.get, never stored: built on another base than the current


def is_stale(rec: EnvironmentRecord, current_base: str) -> bool:
    """Built (or failed) on another base image than `current_base`: used as is, it would run on the old base.
    A building record is never stale: its build started on the base current then."""
    return rec.state in ("ready", "failed") and rec.base != current_base


class EnvironmentStore:
    """The environments of this host. Thread-safe; one build at a time."""

    def __init__(self, root: Path | None = None, limits: eb.BuildLimits | None = None,
                 with_docker: bool | None = None) -> None:
        self.root = root or image.cache_dir() / "envs"
        self.unwritable: str | None = None  # why builds cannot happen here; reading records still works
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.unwritable = f"the environments folder {self.root} cannot be created: {e}"
        self.limits = limits or eb.BuildLimits()
        self._with_docker = with_docker
        self._lock = threading.Lock()
        self._building: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="env-build")
        # The base this process builds on and hands out, fixed at start like the result cache's key versions
        # (service/cache.py code_versions: its "image" is this tag) and the default pool's image.
        self.base = image.image_tag()
        self._clean_stale()

    # --- paths -------------------------------------------------------------------------------------------
    def _record_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.json"

    def rootfs(self, env_id: str) -> Path:
        return self.root / env_id

    def _ready_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.ready"

    def log_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.log"

    def _old_path(self, env_id: str) -> Path:
        return self.root / f".old-{env_id}"

    def _lock_path(self, env_id: str) -> Path:
        return self.root / f".{env_id}.lock"

    def _locked(self, env_id: str) -> bool:
        """Whether a build of env_id holds its lock (in any process sharing this folder)."""
        try:
            with self._lock_path(env_id).open("a") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False
        except BlockingIOError:
            return True

    def _clean_stale(self) -> None:
        """Work folders of builds killed with their process (no lock held): unmounted, then removed."""
        if self.unwritable:
            return
        for work in self.root.glob(".build-*"):
            if any(self._locked(p.name[1:-5]) for p in self.root.glob(f".{work.name[7:19]}*.lock")):
                continue
            subprocess.run(["umount", str(work / "merged")], capture_output=True, check=False)
            shutil.rmtree(work, ignore_errors=True)
        for old in self.root.glob(".old-*"):  # previous root of a rebuild killed with its process
            if not self._locked(old.name[5:]):
                shutil.rmtree(old, ignore_errors=True)

    # --- records -----------------------------------------------------------------------------------------
    def _write(self, rec: EnvironmentRecord) -> None:
        tmp = self._record_path(rec.id).with_suffix(".json.tmp")
        tmp.write_text(rec.model_dump_json(exclude={"stale"}))
        tmp.replace(self._record_path(rec.id))

    def get(self, env_id: str) -> EnvironmentRecord:
        if not re.fullmatch(ENVIRONMENT_ID, env_id):  # never a path
            raise EnvironmentNotFound(env_id)
        path = self._record_path(env_id)
        if not path.is_file():
            raise EnvironmentNotFound(env_id)
        rec = EnvironmentRecord.model_validate_json(path.read_text())
        if rec.state == "building" and env_id not in self._building and not self._locked(env_id):
            # A build no process runs (its lock is free): the server stopped mid-build. POST the spec to retry.
            rec.state, rec.error = "failed", "build interrupted (server restarted); POST the spec again"
        elif rec.state == "ready" and not self._ready_path(env_id).is_file():
            rec.state = "building" if env_id in self._building else "failed"
            rec.error = None if env_id in self._building else "ready marker missing"
        rec.stale = is_stale(rec, self.base)
        return rec

    def list(self) -> list[EnvironmentRecord]:
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                out.append(self.get(path.stem))
            except (EnvironmentNotFound, ValueError):
                continue
        return sorted(out, key=lambda r: r.created)

    def log_tail(self, env_id: str, chars: int = LOG_TAIL) -> str:
        try:
            return self.log_path(env_id).read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    # --- building ----------------------------------------------------------------------------------------
    def submit(self, spec: EnvironmentSpec) -> EnvironmentRecord:
        """The environment of `spec`: its record if known (ready, building or failed) and not stale, else a build
        started (a stale one is rebuilt on the current base)."""
        env_id = spec.environment_id()
        if self.unwritable:
            raise EnvironmentsUnavailable(f"{self.unwritable}; set REWARDBOX_CACHE to a writable folder")
        with self._lock:
            try:
                rec = self.get(env_id)
                interrupted = rec.error == "build interrupted (server restarted); POST the spec again"
                if not rec.stale and (rec.state != "failed" or not interrupted):
                    return rec
                created = rec.created  # a rebuild keeps the time of the first POST
            except EnvironmentNotFound:
                created = time.time()
            rec = EnvironmentRecord(id=env_id, state="building", spec=spec, created=created, base=self.base)
            self._building.add(env_id)
            self._write(rec)
        self._pool.submit(self._build, rec)
        return rec

    def _build(self, rec: EnvironmentRecord) -> None:
        env_id = rec.id
        t0 = time.monotonic()
        with_docker = eb.docker_ok() if self._with_docker is None else self._with_docker
        rebuild = False
        try:
            with self._lock_path(env_id).open("a") as lock, self.log_path(env_id).open("w") as log:
                fcntl.flock(lock, fcntl.LOCK_EX)  # held until the ready marker is written (see _locked)
                try:
                    self._ready_path(env_id).unlink(missing_ok=True)  # leftovers of an interrupted attempt
                    if image.image_tag() != rec.base:  # the source tree changed under a running server
                        raise eb.BuildFailed(f"the base image is now {image.image_tag()}, not {rec.base} as when "
                                             "this server started: restart it")
                    rebuild = self.rootfs(env_id).is_dir()
                    if rebuild:  # the previous root stays aside until the rebuild ends
                        shutil.rmtree(self._old_path(env_id), ignore_errors=True)
                        self.rootfs(env_id).rename(self._old_path(env_id))
                    rec.size_bytes = eb.build(env_id, rec.spec, self.rootfs(env_id), log, self.limits,
                                              with_docker=with_docker)
                    rec.state, rec.docker_image = "ready", eb.docker_image(env_id) if with_docker else None
                except eb.BuildFailed as e:
                    log.write(f"[env] FAILED: {e}\n")
                    rec.state, rec.error = "failed", str(e)
                except Exception as e:  # noqa: BLE001 - the trusted side broke: still a failed state, logged
                    log.write(f"[env] FAILED (internal): {type(e).__name__}: {e}\n")
                    rec.state, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
                shutil.rmtree(self._old_path(env_id), ignore_errors=True)  # the previous root, gone before "ready"
                rec.built_s = round(time.monotonic() - t0, 2)
                self._write(rec)
                if rec.state == "ready":
                    self._ready_path(env_id).write_text(env_id + "\n")  # last: the environment is usable from now
                elif with_docker and rebuild:  # a failed rebuild leaves no image of a previous build under the tag
                    subprocess.run(["docker", "image", "rm", eb.docker_image(env_id)], capture_output=True,
                                   check=False)
        finally:
            with self._lock:
                self._building.discard(env_id)

    def wait(self, env_id: str, timeout_s: float) -> EnvironmentRecord:
        """The record once it is no longer building (tests and the CLI)."""
        deadline = time.monotonic() + timeout_s
        while True:
            rec = self.get(env_id)
            if rec.state != "building" or time.monotonic() > deadline:
                return rec
            time.sleep(0.5)

    # --- for pools ---------------------------------------------------------------------------------------
    def target(self, env_id: str) -> SandboxTarget:
        """Where a sandbox of this environment starts from. Raises EnvironmentNotFound / EnvironmentNotReady; a stale
        environment is never one: its rebuild starts and the caller is told it is building."""
        rec = self.get(env_id)
        if rec.stale:
            was = f"built on base {rec.base}" if rec.base else "built on an unknown base"
            if self.unwritable:
                raise EnvironmentNotReady(env_id, "stale", f"{was}, not the current {self.base}, and this "
                                          "server cannot rebuild it (its environments folder is not writable)")
            rec = self.submit(rec.spec)
            raise EnvironmentNotReady(env_id, rec.state, f"rebuilding on the current base image {rec.base} ({was}); "
                                      "ask again once GET /environments/{id} says ready")
        if rec.state != "ready":
            raise EnvironmentNotReady(env_id, rec.state, rec.error or "")
        # Always the environment's own image and rootfs (never None, which would mean the default sandbox image).
        return SandboxTarget(key=env_id, docker_image=eb.docker_image(env_id), rootfs=str(self.rootfs(env_id)),
                             wheels=eb.WHEELS_DIR if rec.spec.python else None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def record_json(store: EnvironmentStore, rec: EnvironmentRecord) -> dict[str, object]:
    """The answer of GET /environments/{id}: the record, and the log's tail when the build failed."""
    out: dict[str, object] = json.loads(rec.model_dump_json())
    if rec.state == "failed":
        out["log_tail"] = store.log_tail(rec.id)
    return out
