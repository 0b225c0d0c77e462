"""Distributed mode's Redis layout and the Lua scripts that change it atomically.

Keys (P = REWARDBOX_REDIS_PREFIX, default "rewardbox"):
  P:jobs                 stream of jobs (fields: job, data); consumer group "workers"
  P:result:<job>         the job's result, written once (SET NX): the idempotence of "exactly one result per job"
  P:waiters:<job>        reply lists to notify when the job's result is recorded
  P:reply:<api>          one list per API process: "<job>\\n<result json>" entries, read by BLPOP
  P:inflight:<key>       job now scoring this cache key (identical items attach to it instead of running twice)
  P:cache:<key>          cached result; P:cache:index orders keys by age for the size bound
  P:rollout:<id>         hash {record, seq, created_at}; P:rollouts, P:rollouts:failed, P:rollouts:status:<s>
                         are sorted sets of ids by seq (newest last); P:rollouts:seq the counter
  P:runs, P:runs:seq     benchmark runs
  P:workers              hash consumer -> heartbeat (pool snapshot, image, versions, time)
  P:undelivered          hash job -> work (test cases) of jobs no worker has taken yet; P:queued_work their sum,
                         the figure admission compares with the bound. A job leaves it when a worker takes it
                         (TAKE), when its result is recorded, or when it is withdrawn; it returns when handed back
  P:epoch                random value set once: a new one means Redis lost its data (restart without AOF)
Keys are not hash-tagged: one Redis (or a primary with replicas), not Redis Cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

GROUP = "workers"

# Store one rollout and trim to the retention cap. Expects locals: P, rid, record, status, retention.
_ADD_ROLLOUT = """
local function add_rollout(P, rid, record, status, retention)
  local seq = redis.call('INCR', P .. ':rollouts:seq')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
  redis.call('HSET', P .. ':rollout:' .. rid, 'record', record, 'seq', seq, 'created_at', string.format('%.6f', now),
             'status_index', status)
  redis.call('ZADD', P .. ':rollouts', seq, rid)
  redis.call('ZADD', P .. ':rollouts:status:' .. status, seq, rid)
  if status ~= 'passed' then redis.call('ZADD', P .. ':rollouts:failed', seq, rid) end
  local excess = redis.call('ZCARD', P .. ':rollouts') - retention
  if excess > 0 then
    local old = redis.call('ZRANGE', P .. ':rollouts', 0, excess - 1)
    for _, o in ipairs(old) do
      local st = redis.call('HGET', P .. ':rollout:' .. o, 'status_index')
      redis.call('DEL', P .. ':rollout:' .. o)
      redis.call('ZREM', P .. ':rollouts:failed', o)
      if st then redis.call('ZREM', P .. ':rollouts:status:' .. st, o) end
    end
    redis.call('ZREMRANGEBYRANK', P .. ':rollouts', 0, excess - 1)
  end
  return seq
end
"""

ADD_ROLLOUT = _ADD_ROLLOUT + """
return add_rollout(ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]))
"""

# A job taken off the queue (by a worker, by recording its result, by withdrawing it): its work no longer counts.
_TAKE = """
local function take(P, job)
  local w = redis.call('HGET', P .. ':undelivered', job)
  if w then
    redis.call('HDEL', P .. ':undelivered', job)
    if redis.call('DECRBY', P .. ':queued_work', w) < 0 then redis.call('SET', P .. ':queued_work', 0) end
  end
end
"""

# Workers call it for the entries they read or claimed. ARGV: P, then job ids.
TAKE = _TAKE + """
for i = 2, #ARGV do take(ARGV[1], ARGV[i]) end
return 1
"""

# Admit a request's items, all or none, by their work (test cases). ARGV: P, stream, max_queued, reply key,
# inflight ttl, use_cache, then (job, cache key or '', data, work) per item. Returns {'overloaded', queued} or
# {'ok', queued, epoch, kind1, value1, ...} with kind 'hit' (value: cached result), 'done' (value:
# '<job>\n<result>'), 'attach' (value: job) or 'queued' (value: '<job>\n<stream entry id>'); queued is the work
# waiting before this request.
ENQUEUE = """
local P, stream, maxq, reply, ttl, use_cache = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local n = (#ARGV - 6) / 4
local plan, seen, new = {}, {}, 0
for i = 0, n - 1 do
  local job, ck = ARGV[7 + 4 * i], ARGV[8 + 4 * i]
  if use_cache == '1' and ck ~= '' then
    local cached = redis.call('GET', P .. ':cache:' .. ck)
    if cached then plan[i] = {'hit', cached}
    elseif seen[ck] then plan[i] = {'attach', seen[ck]}
    else
      local running = redis.call('GET', P .. ':inflight:' .. ck)
      if running then plan[i] = {'attach', running} end
    end
  end
  if not plan[i] then
    plan[i] = {'new'}
    new = new + tonumber(ARGV[10 + 4 * i])
    if ck ~= '' then seen[ck] = job end
  end
end
local queued = tonumber(redis.call('GET', P .. ':queued_work') or '0')
if new > 0 and queued + new > maxq then return {'overloaded', queued} end
local out = {'ok', queued, redis.call('GET', P .. ':epoch') or ''}
for i = 0, n - 1 do
  local job, ck, data, work = ARGV[7 + 4 * i], ARGV[8 + 4 * i], ARGV[9 + 4 * i], ARGV[10 + 4 * i]
  local p = plan[i]
  if p[1] == 'hit' then
    table.insert(out, 'hit'); table.insert(out, p[2])
  elseif p[1] == 'attach' then
    local r = redis.call('GET', P .. ':result:' .. p[2])
    if r then
      table.insert(out, 'done'); table.insert(out, p[2] .. '\\n' .. r)
    else
      redis.call('SADD', P .. ':waiters:' .. p[2], reply)
      table.insert(out, 'attach'); table.insert(out, p[2])
    end
  else
    local eid = redis.call('XADD', stream, '*', 'job', job, 'data', data, 'work', work)
    redis.call('HSET', P .. ':undelivered', job, work)
    redis.call('INCRBY', P .. ':queued_work', work)
    redis.call('SADD', P .. ':waiters:' .. job, reply)
    redis.call('EXPIRE', P .. ':waiters:' .. job, ttl)
    if use_cache == '1' and ck ~= '' then redis.call('SET', P .. ':inflight:' .. ck, job, 'EX', ttl) end
    table.insert(out, 'queued'); table.insert(out, job .. '\\n' .. eid)
  end
end
return out
"""

# Record a job's result exactly once, with its rollout and cache entry, notify its waiters, ack and delete the
# stream entry; all or nothing. ARGV: P, stream, entry id ('' if unknown), job, result, rollout record ('' = no
# store), status, retention, cache key ('' = none), cacheable '1'/'0', cache ttl, cache size, result ttl, reply
# ttl, only_if_undelivered '1'/'0'. Returns 1 (recorded), 0 (already recorded: a duplicate delivery) or -1
# (only_if_undelivered and a worker has the job).
RECORD = _ADD_ROLLOUT + _TAKE + """
local P, stream, entry, job, result, record, status = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local retention, ck, cacheable = tonumber(ARGV[8]), ARGV[9], ARGV[10]
local cache_ttl, cache_size, result_ttl, reply_ttl = ARGV[11], tonumber(ARGV[12]), ARGV[13], ARGV[14]
if ARGV[15] == '1' then
  local ok, p = pcall(redis.call, 'XPENDING', stream, '""" + GROUP + """', entry, entry, 1)
  if ok and #p > 0 then return -1 end
  if redis.call('XDEL', stream, entry) == 0 and redis.call('EXISTS', P .. ':result:' .. job) == 1 then return 0 end
end
take(P, job)
local recorded = 0
if redis.call('SET', P .. ':result:' .. job, result, 'NX', 'EX', result_ttl) then
  recorded = 1
  if record ~= '' then add_rollout(P, job, record, status, retention) end
  if ck ~= '' then
    if cacheable == '1' and cache_size > 0 then
      local t = redis.call('TIME')
      redis.call('SET', P .. ':cache:' .. ck, result, 'EX', cache_ttl)
      redis.call('ZADD', P .. ':cache:index', tonumber(t[1]) + tonumber(t[2]) / 1e6, ck)
      local excess = redis.call('ZCARD', P .. ':cache:index') - cache_size
      if excess > 0 then
        for _, old in ipairs(redis.call('ZRANGE', P .. ':cache:index', 0, excess - 1)) do
          redis.call('DEL', P .. ':cache:' .. old)
        end
        redis.call('ZREMRANGEBYRANK', P .. ':cache:index', 0, excess - 1)
      end
    end
    if redis.call('GET', P .. ':inflight:' .. ck) == job then redis.call('DEL', P .. ':inflight:' .. ck) end
  end
  for _, reply in ipairs(redis.call('SMEMBERS', P .. ':waiters:' .. job)) do
    redis.call('RPUSH', reply, job .. '\\n' .. result)
    redis.call('EXPIRE', reply, reply_ttl)
  end
  redis.call('DEL', P .. ':waiters:' .. job)
end
if entry ~= '' then
  pcall(redis.call, 'XACK', stream, '""" + GROUP + """', entry)
  redis.call('XDEL', stream, entry)
end
return recorded
"""

# A stopping worker hands a job back: the same job (same id, so still recorded once) goes to the end of the
# stream for another worker, counted as queued work again, and this delivery is acked. ARGV: P, stream, entry,
# job, data, work.
HAND_BACK = _TAKE + """
local P, stream, entry, job, data, work = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
pcall(redis.call, 'XACK', stream, '""" + GROUP + """', entry)
redis.call('XDEL', stream, entry)
if redis.call('EXISTS', P .. ':result:' .. job) == 1 then return 0 end
take(P, job)
redis.call('XADD', stream, '*', 'job', job, 'data', data, 'work', work)
redis.call('HSET', P .. ':undelivered', job, work)
redis.call('INCRBY', P .. ':queued_work', work)
return 1
"""


# ------------------------------------------------------------------------------------- the scripts' replies, typed


@dataclass(frozen=True)
class Cached:
    """ENQUEUE 'hit': the item's cached result."""

    result: dict[str, Any]


@dataclass(frozen=True)
class Finished:
    """ENQUEUE 'done': an identical item's job, already recorded."""

    job_id: str
    result: dict[str, Any]


@dataclass(frozen=True)
class Attached:
    """ENQUEUE 'attach': an identical item's job is running; its result will be sent to us too."""

    job_id: str


@dataclass(frozen=True)
class Queued:
    """ENQUEUE 'queued': our own job, added to the stream as `entry`."""

    job_id: str
    entry: str


Placement = Cached | Finished | Attached | Queued


@dataclass(frozen=True)
class Admitted:
    """ENQUEUE took the request: `queued` test cases were waiting before it, in Redis epoch `epoch`; one
    placement per item, in order."""

    queued: int
    epoch: str
    placements: list[Placement]


@dataclass(frozen=True)
class Refused:
    """ENQUEUE refused the request: `queued` test cases are waiting and it would exceed the bound."""

    queued: int


def decode_enqueue(out: list[Any]) -> Admitted | Refused:
    """ENQUEUE's reply: {'overloaded', queued} or {'ok', queued, epoch, kind1, value1, ...}."""
    if out[0] == "overloaded":
        return Refused(int(out[1]))
    placements: list[Placement] = []
    for kind, value in zip(out[3::2], out[4::2], strict=True):
        if kind == "hit":
            placements.append(Cached(json.loads(value)))
        elif kind == "done":
            job_id, _, result = value.partition("\n")
            placements.append(Finished(job_id, json.loads(result)))
        elif kind == "attach":
            placements.append(Attached(value))
        elif kind == "queued":
            job_id, _, entry = value.partition("\n")
            placements.append(Queued(job_id, entry))
        else:
            raise ValueError(f"ENQUEUE placed an item as {kind!r}")
    return Admitted(int(out[1]), out[2], placements)


class Recorded(IntEnum):
    """RECORD's reply."""

    RECORDED = 1  # this result is the job's one result
    DUPLICATE = 0  # the job already had its result (a duplicate delivery): nothing changed
    TAKEN = -1  # only_if_undelivered, and a worker has the job: nothing changed


def decode_record(out: Any) -> Recorded:
    return Recorded(int(out))
