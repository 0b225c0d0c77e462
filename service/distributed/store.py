"""Rollout store of distributed mode: in Redis, shared by every API instance, written by the worker in the same
atomic step that records a job's result (so a redelivered job is never stored twice), capped by a retention count
(oldest dropped first). It provides the same Store interface as the SQLite RolloutStore (service/rollouts/store.py), so
the routes and the dashboard do not care which one they use.

Calls are synchronous (redis-py's blocking client with short timeouts): the store serves listing, export and
replay, whose callers wait on it anyway."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from typing import Any

import redis

from service.distributed.scripts import ADD_ROLLOUT
from service.rollouts.store import capped, export_pages
from service.rollouts.summary import NO_FILTERS, Filters, Summary, summary_of_records

PAGE = 200
SUMMARY_WINDOW = 5_000  # newest rollouts the dashboard's summary aggregates (in Python here, not in SQL)


def rollout_record(request: dict[str, Any], result: dict[str, Any], image: str, versions: dict[str, str]) -> str:
    """The stored form of one rollout (seq and created_at are added by Redis)."""
    return json.dumps({"id": result["rollout_id"], "client_id": result.get("id"), "status": result["status"],
                       "language": request.get("language"), "profile": result.get("profile"),
                       "reward": result.get("reward"), "request": request, "result": capped(result), "image": image,
                       "versions": versions})


class RedisRolloutStore:
    def __init__(self, url: str, prefix: str, retention: int) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=2)
        self.prefix, self.retention = prefix, retention
        self._add = self.client.register_script(ADD_ROLLOUT)
        self.path = f"{url} ({prefix}:rollouts)"

    def add(self, request: dict[str, Any], result: dict[str, Any], image: str, versions: dict[str, str]) -> None:
        self._add(args=[self.prefix, result["rollout_id"], rollout_record(request, result, image, versions),
                        result["status"], self.retention])

    def _load(self, ids: list[str]) -> list[dict[str, Any]]:
        pipe = self.client.pipeline(transaction=False)
        for rid in ids:
            pipe.hmget(f"{self.prefix}:rollout:{rid}", "record", "seq", "created_at")
        records = []
        for record, seq, created_at in pipe.execute():
            if record is None:  # dropped by retention between the index read and this one
                continue
            records.append({**json.loads(record), "seq": int(seq), "created_at": float(created_at)})
        return records

    def get(self, rollout_id: str) -> dict[str, Any] | None:
        found = self._load([rollout_id])
        return found[0] if found else None

    def list(self, status: str | None = None, failed: bool = False, language: str | None = None,
             since: float | None = None, limit: int = 100, cursor: int | None = None
             ) -> tuple[list[dict[str, Any]], int | None]:
        index = f"{self.prefix}:rollouts" + (f":status:{status}" if status else ":failed" if failed else "")
        top = f"({cursor}" if cursor is not None else "+inf"
        items: list[dict[str, Any]] = []
        while len(items) <= limit:
            page = self.client.zrevrangebyscore(index, top, "-inf", start=0, num=PAGE, withscores=True)
            if not page:
                break
            for record in self._load([rid for rid, _ in page]):
                if since is not None and record["created_at"] < since:  # created_at grows with seq (Redis time)
                    return items[:limit], None
                if (not failed or record["status"] != "passed") and (not language or record["language"] == language):
                    items.append(record)
            top = f"({page[-1][1]:.0f}"
            if len(page) < PAGE:
                break
        if len(items) > limit:
            return items[:limit], items[limit - 1]["seq"]
        return items, None

    def export(self, **filters: Any) -> Iterator[dict[str, Any]]:
        return export_pages(self.list, **filters)

    def recent(self, count: int) -> builtins.list[dict[str, Any]]:  # builtins: `list` is a method here
        """The newest `count` rollouts (the dashboard's window)."""
        ids = self.client.zrevrange(f"{self.prefix}:rollouts", 0, count - 1)
        return [r for i in range(0, len(ids), PAGE) for r in self._load(ids[i:i + PAGE])]

    def summary(self, filters: Filters = NO_FILTERS, window: int = SUMMARY_WINDOW) -> Summary:
        """The dashboard's figures over the newest `window` rollouts that match `filters` (the choices over the
        newest `window`, whatever the filters)."""
        newest = self.recent(window)
        if filters == NO_FILTERS:
            return summary_of_records(newest)
        return summary_of_records(newest, filters, self.matching(filters, window))

    def matching(self, filters: Filters, limit: int) -> builtins.list[dict[str, Any]]:
        """The newest `limit` rollouts that match, newest first: through the index of their status where the
        filters name one, back to `since` at most."""
        index = f"{self.prefix}:rollouts" + (f":status:{filters.status}" if filters.status else
                                             ":failed" if filters.failed else "")
        top = "+inf"  # the indexes are scored by seq; created_at grows with it (Redis's clock)
        out: builtins.list[dict[str, Any]] = []
        while len(out) < limit:
            page = self.client.zrevrangebyscore(index, top, "-inf", start=0, num=PAGE, withscores=True)
            if not page:
                break
            for record in self._load([rid for rid, _ in page]):
                if filters.since is not None and record["created_at"] < filters.since:  # created_at grows with seq
                    return out
                if filters.matches(record):
                    out.append(record)
                    if len(out) == limit:
                        return out
            top = f"({page[-1][1]:.0f}"
            if len(page) < PAGE:
                break
        return out

    def add_run(self, name: str, summary: dict[str, Any]) -> int:
        import time

        run_id = int(self.client.incr(f"{self.prefix}:runs:seq"))
        self.client.lpush(f"{self.prefix}:runs", json.dumps({"id": run_id, "created_at": time.time(), "name": name,
                                                             "summary": summary}))
        self.client.ltrim(f"{self.prefix}:runs", 0, 9999)
        return run_id

    def runs(self, limit: int = 100) -> builtins.list[dict[str, Any]]:
        return [json.loads(r) for r in self.client.lrange(f"{self.prefix}:runs", 0, limit - 1)]

    def close(self) -> None:
        self.client.close()
