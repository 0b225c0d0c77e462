"""Header bombs over real HTTP: POST /repos with each flavour of tar header bomb answers 413 naming the header,
and the API process's peak memory (VmHWM of the real `rewardbox serve` process) grows by about the uploads'
size, not by what the headers declare. (The archive is read in the API process, whatever the sandbox backend.)"""

from __future__ import annotations

import httpx
import pytest

from .conftest import start_server, stop_server
from .test_archive_bombs_units import BOMBS, _bomb, _many_small_headers, _pax_record, _sparse

GZIP = {"content-type": "application/gzip"}


@pytest.fixture(scope="module")
def served():
    proc, url = start_server({"REWARDBOX_POOL_SIZE": "1", "REWARDBOX_SESSION_POOL_SIZE": "1"})
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            yield proc, client
    finally:
        stop_server(proc)


def peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_every_header_bomb_is_a_413_naming_it_and_costs_about_its_upload(served):
    proc, client = served
    client.get("/healthz")
    before = peak_kib(proc.pid)
    uploads = [(name, upload, named) for name, (upload, named) in sorted(BOMBS.items())]
    uploads += [("many small headers", _many_small_headers(), "pax global header"),
                ("sparse map", _sparse(), "GNU sparse header")]
    for name, upload, named in uploads:
        r = client.post("/repos", content=upload, headers=GZIP)
        assert r.status_code == 413, (name, r.status_code, r.text)
        assert named in r.text, (name, r.text)
    grown = peak_kib(proc.pid) - before
    total = sum(len(u) for _, u, _ in uploads) >> 10
    assert grown < 16 << 10, f"peak grew by {grown} KiB for {total} KiB of uploads declaring 256 MiB headers"


def test_a_header_declared_past_a_gigabyte_is_refused_before_it_is_read(served):
    proc, client = served
    before = peak_kib(proc.pid)
    r = client.post("/repos", content=_bomb(b"x", _pax_record("path", 1 << 30)), headers=GZIP)
    assert r.status_code == 413 and "pax extended header" in r.text, r.text
    assert peak_kib(proc.pid) - before < 16 << 10
