"""Rollout store (embedded mode): every scored item with its request, result, sandbox image and versions, in a
SQLite file (WAL; survives restarts). Newest first, cursor pagination by insertion sequence, capped fields,
retention by count. A scored (not cached) verdict also keeps its result-cache key, so that after a crash a client
that posts its batch again gets what was already scored from here instead of running it twice.

Store is what the routes (service/rollouts/routes.py) and the dashboard (service/dashboard.py) ask of a rollout store;
RolloutStore here and the Redis store of distributed mode (service/distributed/store.py) both provide it."""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from service.cache import EncodedTests, encode_tests
from service.models import COMPONENTS
from service.rollouts.summary import (
    FAILURES,
    NO_FILTERS,
    PERCENTILES,
    POINTS,
    SLOWEST,
    Bucket,
    Choices,
    FailedRollout,
    Filters,
    Group,
    Latency,
    Point,
    RewardBin,
    SlowRollout,
    StatusCount,
    Summary,
    bucket_for,
    reason,
    span_of,
    test_kind,
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

    def summary(self, filters: Filters = NO_FILTERS) -> Summary:
        """The dashboard's figures over the store's newest rollouts that match `filters`
        (service/rollouts/summary.py)."""
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


# A rollout's test kind: its column, or (rows written before the column) its request's. COALESCE stops at the
# first value that is not NULL, so the request's JSON is read only for those rows.
KIND = "COALESCE(test_kind, json_extract(request, '$.tests.kind'))"


def _summary_where(f: Filters) -> tuple[str, list[Any]]:
    """The WHERE clause of Filters.matches."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("language", f.language), ("profile", f.profile), ("status", f.status),
                          (KIND, f.kind)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if f.failed:
        clauses.append("status != 'passed'")
    if f.since is not None:
        clauses.append("created_at >= ?")
        args.append(f.since)
    if f.until is not None:
        clauses.append("created_at < ?")
        args.append(f.until)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _percentiles(values: str) -> str:
    """A query of (t, n, p50, p90, p99) per t over `values`, a query of (t, ms) rows: nearest rank
    (service/rollouts/summary.py), the least ms whose rank r among the n of its t has r * 100 >= p * n."""
    picks = ", ".join(f"MIN(CASE WHEN r * 100 >= {p} * n THEN ms END)" for p in PERCENTILES)
    return (f"SELECT t, MAX(n), {picks} FROM (SELECT t, ms, ROW_NUMBER() OVER (PARTITION BY t ORDER BY ms) AS r,"
            f" COUNT(*) OVER (PARTITION BY t) AS n FROM ({values}) WHERE ms IS NOT NULL) GROUP BY t ORDER BY t")


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
        if "test_kind" not in columns:  # the dashboard's groups and filter; NULL in rows written before it: KIND
            self.db.execute("ALTER TABLE rollouts ADD COLUMN test_kind TEXT")
            # rows whose tests went to the blobs table: KIND's fallback cannot reach them, so fill them in once
            self.db.execute("UPDATE rollouts SET test_kind = (SELECT json_extract(data, '$.kind') FROM blobs"
                            " WHERE sha256 = tests_blob) WHERE tests_blob IS NOT NULL")
        self.db.execute("CREATE INDEX IF NOT EXISTS rollouts_cache_key ON rollouts (cache_key) WHERE cache_key IS "
                        "NOT NULL")
        self._writes = 0
        self._columns = [d[0] for d in self.db.execute("SELECT * FROM rollouts LIMIT 0").description]

    def add(self, request: dict[str, Any], result: dict[str, Any], image: str, versions: dict[str, str],
            cache_key: str | None = None, tests: EncodedTests | None = None) -> None:
        """cache_key: set for a verdict that may answer an identical item later (see cached()). tests: the
        request's tests encoded already (the executor's, from keying it); encoded here otherwise."""
        blob = None
        kind = test_kind(request)  # before the tests leave the request for the blobs table
        if request.get("tests") is not None:
            tests = tests or encode_tests(request["tests"])
            blob = tests.sha256
            if self.db.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (blob,)).fetchone() is None:
                self.db.execute("INSERT OR IGNORE INTO blobs (sha256, data) VALUES (?, ?)", (blob, tests.json))
            request = {k: v for k, v in request.items() if k != "tests"}
        self.db.execute(
            "INSERT OR REPLACE INTO rollouts (id, client_id, created_at, status, language, profile, reward, request,"
            " result, image, versions, cache_key, tests_blob, test_kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?)",
            (result["rollout_id"], result.get("id"), time.time(), result["status"], request.get("language"),
             result.get("profile"), result.get("reward"), json.dumps(request), json.dumps(capped(result)), image,
             json.dumps(versions), cache_key, blob, kind),
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
        record.pop("test_kind", None)
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

    def summary(self, filters: Filters = NO_FILTERS, window: int = SUMMARY_WINDOW) -> Summary:
        """The dashboard's figures over the newest `window` rollouts that match `filters`, in SQL
        (summary_of_records says the same in Python). The rollouts shown are copied once, with the fields the
        figures use taken out of their JSON, into a temporary table that every figure then reads."""
        db = self.db
        where, args = _summary_where(filters)
        components = ", ".join(f"json_extract(result, '$.components.{c}') AS c_{c}" for c in COMPONENTS)
        db.execute("DROP TABLE IF EXISTS temp.shown")
        db.execute(f"CREATE TEMP TABLE shown AS SELECT seq, id, client_id, created_at, status, language, profile,"
                   f" reward, json_extract(result, '$.details.timings.tests_ms') AS ms, {KIND} AS kind, {components}"
                   f" FROM rollouts{where} ORDER BY seq DESC LIMIT {int(window)}", args)
        try:
            return self._summary_of_shown(filters, window)
        finally:
            db.execute("DROP TABLE IF EXISTS temp.shown")

    def _summary_of_shown(self, filters: Filters, window: int) -> Summary:
        db = self.db

        def rows(query: str) -> list[tuple]:
            return db.execute(query).fetchall()

        count, passed, reward, first, last = rows(
            "SELECT COUNT(*), COALESCE(SUM(status = 'passed'), 0), AVG(reward), MIN(created_at), MAX(created_at)"
            " FROM shown")[0]
        b = bucket_for(span_of(filters, first, last))
        bucket = f"CAST(created_at / {b} AS INTEGER) * {b}"
        per_bucket = rows(f"SELECT {bucket} AS t, COUNT(*), SUM(status = 'passed'), AVG(reward) FROM shown"
                          f" GROUP BY t ORDER BY t")
        latency_by_bucket = {t: Latency(*rest)
                             for t, *rest in rows(_percentiles(f"SELECT {bucket} AS t, ms FROM shown"))}
        overall = rows(_percentiles("SELECT 0 AS t, ms FROM shown"))

        def groups(key: str) -> list[Group]:
            return [Group(k, n, passed, passed / n, reward) for k, n, passed, reward in rows(
                f"SELECT {key} AS k, COUNT(*) AS n, SUM(status = 'passed'), AVG(reward) FROM shown"
                f" GROUP BY k ORDER BY n DESC, k")]

        rewards = rows("SELECT ROUND(reward, 1) AS bin, COUNT(*) FROM shown WHERE reward IS NOT NULL GROUP BY bin"
                       " ORDER BY bin")
        means = rows(f"SELECT {', '.join(f'AVG(c_{c})' for c in COMPONENTS)} FROM shown")[0]
        statuses = rows("SELECT status, COUNT(*) AS n FROM shown GROUP BY status ORDER BY n DESC, status")
        slowest = rows(f"SELECT id, status, reward, ms, client_id FROM shown WHERE ms IS NOT NULL"
                       f" ORDER BY ms DESC, seq DESC LIMIT {SLOWEST}")
        failed = rows(f"SELECT s.id, s.status, r.result, s.client_id FROM shown s JOIN rollouts r ON r.seq = s.seq"
                      f" WHERE s.status != 'passed' ORDER BY s.seq DESC LIMIT {FAILURES}")
        points = rows(f"SELECT id, created_at, status, ms, reward FROM shown ORDER BY seq DESC LIMIT {POINTS}")
        # The choices: what the newest rollouts hold, whatever the filters (read again only when they select).
        everything = "shown" if filters == NO_FILTERS else (
            f"(SELECT language, profile, status, {KIND} AS kind FROM rollouts ORDER BY seq DESC LIMIT {int(window)})")

        def present(key: str) -> list[str]:
            return [k for (k,) in rows(f"SELECT DISTINCT {key} AS k FROM {everything} WHERE k IS NOT NULL ORDER BY k")]

        return Summary(
            count=count,
            passed=passed,
            reward=reward,
            bucket_s=b,
            throughput=[Bucket(t, n, passed, reward, latency_by_bucket.get(t, Latency(0, None, None, None)))
                        for t, n, passed, reward in per_bucket],
            latency=Latency(*overall[0][1:]) if overall else Latency(0, None, None, None),
            by_language=groups("language"),
            by_profile=groups("profile"),
            by_kind=groups("kind"),
            reward_histogram=[RewardBin(*row) for row in rewards],
            components=dict(zip(COMPONENTS, means, strict=True)),
            statuses=[StatusCount(*row) for row in statuses],
            slowest=[SlowRollout(*row) for row in slowest],
            recent_failures=[FailedRollout(i, st, reason(json.loads(result)) or "", c) for i, st, result, c in failed],
            points=[Point(*row) for row in points],
            choices=Choices(present("language"), present("profile"), present("status"), present("kind")),
        )

    def close(self) -> None:
        self.db.close()
