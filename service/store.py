"""Rollout store (embedded mode): every scored item with its request, result, sandbox image and versions, in a
SQLite file (WAL; survives restarts). Newest first, cursor pagination by insertion sequence, capped fields,
retention by count. A scored (not cached) verdict also keeps its result-cache key, so that after a crash a client
that posts its batch again gets what was already scored from here instead of running it twice.

Store is what the routes (service/rollouts.py) and the dashboard (service/dashboard.py) ask of a rollout store;
RolloutStore here and the Redis store of distributed mode (service/redis_store.py) both provide it."""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from .cache import EncodedTests, encode_tests
from .models import COMPONENTS
from .rollout_summary import (
    FAILURES,
    SLOWEST,
    FailedRollout,
    Minute,
    RewardBin,
    SlowRollout,
    StatusCount,
    Summary,
    reason,
)

FIELD_CAP = 64 << 10  # per string of a stored result (the request is kept whole: replay needs it exactly)
SCHEMA = """
CREATE TABLE IF NOT EXISTS rollouts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    client_id TEXT,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    language TEXT,
    profile TEXT,
    reward REAL,
    request TEXT NOT NULL,
    result TEXT NOT NULL,
    image TEXT,
    versions TEXT
);
CREATE INDEX IF NOT EXISTS rollouts_status ON rollouts (status, seq);
CREATE INDEX IF NOT EXISTS rollouts_created ON rollouts (created_at);
-- rollouts_cache_key is created after the migration below (stores written before it lack the column)
-- an item's tests, kept once however many rollouts share them (the samples of one problem; io cases are MBs);
-- a rollout with tests_blob set has its request stored without "tests" and gets them back from here when read
CREATE TABLE IF NOT EXISTS blobs (
    sha256 TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    name TEXT NOT NULL,
    summary TEXT NOT NULL
);
"""


SUMMARY_WINDOW = 20_000  # newest rollouts the dashboard's summary aggregates


class Store(Protocol):
    """A rollout store as the routes and the dashboard use it."""

    path: Any  # where it keeps its rollouts, for messages

    def get(self, rollout_id: str) -> dict[str, Any] | None: ...

    def list(self, status: str | None = None, failed: bool = False, language: str | None = None,
             since: float | None = None, limit: int = 100, cursor: int | None = None
             ) -> tuple[list[dict[str, Any]], int | None]:
        """Newest first; the cursor of the next page, or None on the last."""
        ...

    def export(self, **filters: Any) -> Iterator[dict[str, Any]]: ...

    def add_run(self, name: str, summary: dict[str, Any]) -> int: ...

    def runs(self, limit: int = 100) -> builtins.list[dict[str, Any]]: ...

    def summary(self) -> Summary:
        """The dashboard's figures over the store's newest rollouts (service/rollout_summary.py)."""
        ...

    def close(self) -> None: ...


def capped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > FIELD_CAP:
        return value[:FIELD_CAP] + "\n[truncated by the rollout store]"
    if isinstance(value, dict):
        return {k: capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [capped(v) for v in value]
    return value


def export_pages(list_page: Callable[..., tuple[list[dict[str, Any]], Any]], **filters: Any
                 ) -> Iterator[dict[str, Any]]:
    """Every rollout a store's `list` matches, newest first, one page at a time (what export streams)."""
    cursor = None
    while True:
        items, cursor = list_page(limit=500, cursor=cursor, **filters)
        yield from items
        if cursor is None:
            return


class RolloutStore:
    def __init__(self, path: str | Path, retention: int = 1_000_000) -> None:
        """path: the SQLite file (a service's is Settings.db_file)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.retention = retention
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(rollouts)")}
        if "cache_key" not in columns:
            self.db.execute("ALTER TABLE rollouts ADD COLUMN cache_key TEXT")
        if "tests_blob" not in columns:
            self.db.execute("ALTER TABLE rollouts ADD COLUMN tests_blob TEXT")
        self.db.execute("CREATE INDEX IF NOT EXISTS rollouts_cache_key ON rollouts (cache_key) WHERE cache_key IS "
                        "NOT NULL")
        self._writes = 0
        self._columns = [d[0] for d in self.db.execute("SELECT * FROM rollouts LIMIT 0").description]

    def add(self, request: dict[str, Any], result: dict[str, Any], image: str, versions: dict[str, str],
            cache_key: str | None = None, tests: EncodedTests | None = None) -> None:
        """cache_key: set for a verdict that may answer an identical item later (see cached()). tests: the
        request's tests encoded already (the executor's, from keying it); encoded here otherwise."""
        blob = None
        if request.get("tests") is not None:
            tests = tests or encode_tests(request["tests"])
            blob = tests.sha256
            if self.db.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (blob,)).fetchone() is None:
                self.db.execute("INSERT OR IGNORE INTO blobs (sha256, data) VALUES (?, ?)", (blob, tests.json))
            request = {k: v for k, v in request.items() if k != "tests"}
        self.db.execute(
            "INSERT OR REPLACE INTO rollouts (id, client_id, created_at, status, language, profile, reward, request,"
            " result, image, versions, cache_key, tests_blob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (result["rollout_id"], result.get("id"), time.time(), result["status"], request.get("language"),
             result.get("profile"), result.get("reward"), json.dumps(request), json.dumps(capped(result)), image,
             json.dumps(versions), cache_key, blob),
        )
        self._writes += 1
        if self._writes % 1000 == 0 or self.retention < 1000:
            self.db.execute("DELETE FROM rollouts WHERE seq <= (SELECT MAX(seq) FROM rollouts) - ?", (self.retention,))
            self.db.execute("DELETE FROM blobs WHERE sha256 NOT IN (SELECT tests_blob FROM rollouts WHERE tests_blob"
                            " IS NOT NULL)")

    def cached(self, keys: list[str], max_age_s: float) -> dict[str, dict[str, Any]]:
        """The newest stored verdict per cache key, no older than max_age_s (the result cache's TTL). Results are
        stored whole up to FIELD_CAP per string; one that was capped is not reused (it would not be the same)."""
        found: dict[str, dict[str, Any]] = {}
        since = time.time() - max_age_s
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = self.db.execute(
                f"SELECT cache_key, result FROM rollouts WHERE cache_key IN ({','.join('?' * len(chunk))})"
                " AND created_at >= ? ORDER BY seq", (*chunk, since)).fetchall()
            for key, result in rows:
                if "[truncated by the rollout store]" not in result:
                    found[key] = json.loads(result)
        return found

    def get(self, rollout_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM rollouts WHERE id = ?", (rollout_id,)).fetchone()
        return self._row(row) if row else None

    def _where(self, status: str | None, failed: bool, language: str | None, since: float | None,
               cursor: int | None) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if status:
            clauses.append("status = ?")
            args.append(status)
        if failed:
            clauses.append("status != 'passed'")
        if language:
            clauses.append("language = ?")
            args.append(language)
        if since is not None:
            clauses.append("created_at >= ?")
            args.append(since)
        if cursor is not None:
            clauses.append("seq < ?")
            args.append(cursor)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def list(self, status: str | None = None, failed: bool = False, language: str | None = None,
             since: float | None = None, limit: int = 100, cursor: int | None = None
             ) -> tuple[list[dict[str, Any]], int | None]:
        where, args = self._where(status, failed, language, since, cursor)
        query = f"SELECT * FROM rollouts{where} ORDER BY seq DESC LIMIT ?"
        rows = self.db.execute(query, (*args, limit + 1)).fetchall()
        items = [self._row(r) for r in rows[:limit]]
        next_cursor = items[-1]["seq"] if len(rows) > limit else None
        return items, next_cursor

    def export(self, **filters: Any) -> Iterator[dict[str, Any]]:
        return export_pages(self.list, **filters)

    def _row(self, row: tuple) -> dict[str, Any]:
        record = dict(zip(self._columns, row, strict=True))
        record.pop("cache_key", None)
        blob = record.pop("tests_blob", None)
        for key in ("request", "result", "versions"):
            record[key] = json.loads(record[key]) if record[key] else None
        if blob is not None and record["request"] is not None:
            row = self.db.execute("SELECT data FROM blobs WHERE sha256 = ?", (blob,)).fetchone()
            record["request"]["tests"] = json.loads(row[0]) if row else None
        return record

    def add_run(self, name: str, summary: dict[str, Any]) -> int:
        """A benchmark run (`rewardbox bench`), kept so that runs can be compared side by side."""
        cur = self.db.execute("INSERT INTO runs (created_at, name, summary) VALUES (?, ?, ?)",
                              (time.time(), name, json.dumps(summary)))
        return int(cur.lastrowid or 0)  # set by every INSERT

    def runs(self, limit: int = 100) -> builtins.list[dict[str, Any]]:  # builtins: `list` is a method here
        rows = self.db.execute("SELECT seq, created_at, name, summary FROM runs ORDER BY seq DESC LIMIT ?", (limit,))
        return [{"id": seq, "created_at": at, "name": name, "summary": json.loads(summary)}
                for seq, at, name, summary in rows.fetchall()]

    def summary(self, window: int = SUMMARY_WINDOW) -> Summary:
        """The dashboard's figures over the newest `window` rollouts, in SQL (summary_of_records says the same in
        Python)."""
        db = self.db
        recent = f"(SELECT * FROM rollouts ORDER BY seq DESC LIMIT {int(window)})"
        per_minute = db.execute(
            f"SELECT CAST(created_at / 60 AS INTEGER) * 60 AS minute, COUNT(*),"
            f" AVG(json_extract(result, '$.details.timings.tests_ms')), AVG(reward)"
            f" FROM {recent} GROUP BY minute ORDER BY minute").fetchall()
        rewards = db.execute(
            f"SELECT ROUND(reward, 1) AS bin, COUNT(*) FROM {recent} WHERE reward IS NOT NULL GROUP BY bin ORDER BY bin"
        ).fetchall()
        components = {c: db.execute(f"SELECT AVG(json_extract(result, '$.components.{c}')) FROM {recent}"
                                    ).fetchone()[0] for c in COMPONENTS}
        statuses = db.execute(f"SELECT status, COUNT(*) FROM {recent} GROUP BY status ORDER BY COUNT(*) DESC"
                              ).fetchall()
        slowest = db.execute(
            f"SELECT id, status, reward, json_extract(result, '$.details.timings.tests_ms') AS ms, client_id"
            f" FROM {recent} WHERE ms IS NOT NULL ORDER BY ms DESC LIMIT {SLOWEST}").fetchall()
        failed = db.execute(f"SELECT id, status, result, client_id FROM {recent} WHERE status != 'passed'"
                            f" ORDER BY seq DESC LIMIT {FAILURES}").fetchall()
        return Summary(
            throughput=[Minute(*row) for row in per_minute],
            reward_histogram=[RewardBin(*row) for row in rewards],
            components=components,
            statuses=[StatusCount(*row) for row in statuses],
            slowest=[SlowRollout(*row) for row in slowest],
            recent_failures=[FailedRollout(i, st, reason(json.loads(result)) or "", c) for i, st, result, c in failed],
        )

    def close(self) -> None:
        self.db.close()
