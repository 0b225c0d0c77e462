"""The calls session tests make over and over against a real server (an httpx.Client on its base URL)."""

from __future__ import annotations

import httpx

from rewardbox.archive import repo_archive


def upload(api: httpx.Client, files: dict[str, bytes]) -> str:
    """POST /repos with an archive of files: the snapshot's id."""
    r = api.post("/repos", content=repo_archive(files), headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def open_session(api: httpx.Client, repo_id: str, **extra: object) -> str:
    """POST /sessions on a stored snapshot: the session's id."""
    r = api.post("/sessions", json={"repo": {"id": repo_id}, **extra})
    assert r.status_code == 201, r.text
    return r.json()["session_id"]
