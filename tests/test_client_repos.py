"""Client.upload_repo / AsyncClient.upload_repo against the real service: POST /repos with the archive as it is,
the snapshot's id back (the sha256 of the archive), and the service's refusal as the client's HTTPStatusError."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from rewardbox import AsyncClient, Client
from rewardbox.archive import repo_archive
from rewardbox.client import HTTPStatusError

FILES = {"pkg/calc.py": b"def add(a, b):\n    return a + b\n", "tests/test_calc.py": b"from pkg.calc import add\n"}


def test_an_upload_answers_the_archive_s_id_and_a_second_upload_the_same(server):
    archive = repo_archive(FILES)
    with Client(server) as client:
        first, second = client.upload_repo(archive), client.upload_repo(archive)
        session = client.call("POST", "/sessions", (200, 201), json={"repo": {"id": first}})
        out = client.call("POST", f"/sessions/{session['session_id']}/exec", json={"command": "cat pkg/calc.py"})
        client.call("DELETE", f"/sessions/{session['session_id']}", (200, 204))
    assert first == second == hashlib.sha256(archive).hexdigest()
    assert out["stdout"] == FILES["pkg/calc.py"].decode()


def test_the_async_client_uploads_too(server):
    archive = repo_archive({"a.py": b"x = 1\n"}, top="other")

    async def upload() -> str:
        async with AsyncClient(server) as client:
            return await client.upload_repo(archive)

    assert asyncio.run(upload()) == hashlib.sha256(archive).hexdigest()


def test_bytes_that_are_not_an_archive_are_the_client_s_mistake(server):
    with Client(server) as client, pytest.raises(HTTPStatusError) as refused:
        client.upload_repo(b"not a tar.gz")
    assert 400 <= refused.value.status < 500
