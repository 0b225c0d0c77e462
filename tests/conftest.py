"""Shared fixtures: real sandbox pools on both backends (Docker engine and bubblewrap), started once per session."""

from __future__ import annotations

import os

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
