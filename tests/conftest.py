"""Shared fixtures: real sandbox pools on both backends (Docker engine and bubblewrap), started once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import pytest_asyncio

from sandboxes import SandboxPool, choose_backend

BACKENDS = [b for b in os.environ.get("REWARDBOX_TEST_BACKENDS", "docker,bubblewrap").split(",") if b]


@pytest_asyncio.fixture(scope="session", params=BACKENDS)
async def pool(request: pytest.FixtureRequest):
    """A warm pool of 2 sandboxes; tests run against each backend in turn. A missing backend fails, never skips."""
    p = SandboxPool(choose_backend(request.param), size=2, acquire_timeout_s=120)
    await p.start()
    yield p
    await p.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(extra_env: dict[str, str]):
    """`rewardbox serve` in a subprocess on loopback; returns (process, base URL) once /healthz answers and the
    pool is warm."""
    import subprocess
    import sys
    import time

    import httpx

    port = _free_port()
    import tempfile

    db = os.path.join(tempfile.mkdtemp(prefix="rewardbox-test-"), "rollouts.sqlite3")
    env = {**os.environ, "REWARDBOX_POOL_SIZE": "2", "REWARDBOX_MAX_BODY_MB": "4", "REWARDBOX_MAX_BATCH": "300",
           "REWARDBOX_DB": db, **extra_env}
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {extra_env['REWARDBOX_TOKEN']}"} if "REWARDBOX_TOKEN" in extra_env else {}
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/readyz", timeout=2, headers=headers).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("rewardbox serve did not become ready")
        time.sleep(0.2)


def stop_server(proc) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def serving(extra_env: dict[str, str]) -> Iterator[httpx.Client]:
    """start_server(extra_env) and a client on its base URL (300 s timeout); the server is stopped after."""
    proc, url = start_server(extra_env)
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            yield client
    finally:
        stop_server(proc)


@pytest.fixture(scope="session")
def server():
    """The real service (`rewardbox serve`) in a subprocess, on loopback; yields its base URL."""
    proc, url = start_server({})
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="session")
def api(server):
    import httpx

    with httpx.Client(base_url=server, timeout=300) as client:
        yield client


@pytest.fixture(scope="session")
def humaneval() -> list[dict]:
    from service.benchmark import humaneval_problems

    return list(humaneval_problems().values())
