"""The internal protocols as typed values: sandbox jobs per op, the runner's reply keys on both sides, the Redis
envelope, the Lua scripts' replies, and the dashboard's summary from both rollout stores. Pure and fast; the Redis
parts run against a real redis-server of their own (skipped where none is installed)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from sandboxes import CasesJob, Job, JudgeJob, Limits, LintJob, MeasureJob, RepoJob, Result, RunJob, SessionJob, Status
from sandboxes.types import DECODED, JOB_TYPES, NOT_DECODED, REPLY_KEYS, job_from_dict
from service.distributed.envelope import MalformedEnvelope, RunEnvelope, ScoreEnvelope, envelope_from_json
from service.distributed.scripts import (
    ENQUEUE,
    RECORD,
    Admitted,
    Attached,
    Cached,
    Finished,
    Queued,
    Recorded,
    Refused,
    decode_enqueue,
    decode_record,
)
from service.distributed.store import RedisRolloutStore
from service.rollouts.store import RolloutStore
from service.rollouts.summary import FailedRollout, Filters, RewardBin, SlowRollout, StatusCount, summary_of_records

from .distributed import RedisServer, new_prefix
from .summaries import rounded

PROTOCOL = Path(__file__).resolve().parent.parent / "sandboxes" / "inside" / "protocol.py"
LIMITS = Limits(wall_s=2, total_s=5, cpu_s=2, memory_mb=128)
WIRE_LIMITS = dataclasses.asdict(LIMITS)


def in_sandbox_protocol():
    """sandboxes/inside/protocol.py (the runner's reply record) as the sandbox loads it (stdlib only)."""
    spec = importlib.util.spec_from_file_location("rewardbox_inside_protocol", PROTOCOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------------------- jobs

EVERY_OP = [
    (RunJob(program={"code": "print(1)"}, stdin="in", files={"a.txt": "x"}, fetch_files=["b"], env={"K": "v"},
            limits=LIMITS, account=True),
     {"program": {"code": "print(1)"}, "stdin": "in", "files": {"a.txt": "x"}, "fetch_files": ["b"], "env": {"K": "v"},
      "account": True}),
    (RunJob(program={"argv": ["/bin/true"]}, limits=LIMITS), {"program": {"argv": ["/bin/true"]}}),
    (CasesJob(program={"code": "print(1)"}, stdins=["a", ""], env={"K": "v"}, limits=LIMITS, account=True),
     {"program": {"code": "print(1)"}, "stdins": ["a", ""], "env": {"K": "v"}, "account": True}),
    (JudgeJob(candidate={"code": "def f(): pass", "module": "solution"}, judge={"kind": "function"}, limits=LIMITS),
     {"candidate": {"code": "def f(): pass", "module": "solution"}, "judge": {"kind": "function"}}),
    (LintJob(code="x = 1\n", language="typescript", roots=["f"], limits=LIMITS),
     {"code": "x = 1\n", "language": "typescript", "roots": ["f"]}),
    (MeasureJob(measure={"programs": {}, "points": [], "rounds": 3}, limits=LIMITS),
     {"programs": {}, "points": [], "rounds": 3}),
    (RepoJob(repo={"repo": {"id": "r1"}, "patch": "", "tests": ["t"]}, limits=LIMITS),
     {"repo": {"id": "r1"}, "patch": "", "tests": ["t"]}),
    (SessionJob(session={"repo": {"id": "r1"}, "command": "ls"}, limits=LIMITS),
     {"repo": {"id": "r1"}, "command": "ls"}),
]


@pytest.mark.parametrize(("job", "body"), EVERY_OP, ids=lambda x: x.op if isinstance(x, Job) else "")
def test_each_op_sends_the_runner_exactly_its_own_fields(job: Job, body: dict) -> None:
    assert job.to_wire() == {"op": job.op, "job": {"limits": WIRE_LIMITS, **body}}
    assert json.loads(json.dumps(job.to_wire())) == job.to_wire()


@pytest.mark.parametrize("job", [job for job, _ in EVERY_OP], ids=lambda j: j.op)
def test_a_job_comes_back_from_its_queue_form_as_the_same_typed_job(job: Job) -> None:
    again = job_from_dict(json.loads(json.dumps(job.to_dict())))
    assert again == job and type(again) is type(job)


def test_every_op_of_the_runner_has_one_job_class() -> None:
    assert sorted(JOB_TYPES) == ["cases", "judge", "lint", "measure", "repo", "run", "session"]


def test_a_job_cannot_carry_another_ops_fields() -> None:
    with pytest.raises(TypeError):
        LintJob(code="x", stdin="for a run")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        JudgeJob(candidate={}, judge={}, program={"code": "x"})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Job("lint", program={"code": "x"}, stdin="for a run")
    with pytest.raises(TypeError):
        Job("judge", candidate={}, judge={}, program={"code": "x"})
    with pytest.raises(TypeError):
        Job("measure", measure={}, repo={})


def test_the_compatibility_call_builds_the_typed_job_of_its_op() -> None:
    assert Job("run", program={"code": "x"}, stdin="s", limits=LIMITS) == RunJob(program={"code": "x"}, stdin="s",
                                                                               limits=LIMITS)
    assert Job("lint", program={"code": "x", "roots": []}) == LintJob(code="x", roots=[])
    assert Job("judge", candidate={"code": "c"}, judge={"k": 1}, account=True) == JudgeJob(
        candidate={"code": "c"}, judge={"k": 1}, account=True)
    assert Job("measure", measure={"m": 1}) == MeasureJob(measure={"m": 1})
    assert Job("repo", repo={"r": 1}) == RepoJob(repo={"r": 1})
    assert Job("session", repo={"s": 1}) == SessionJob(session={"s": 1})
    assert isinstance(Job("run", program={}), Job)
    with pytest.raises(ValueError, match="unknown op"):
        Job("dance")


def test_one_process_jobs_wait_for_wall_s_and_whole_jobs_for_total_s() -> None:
    limits = Limits(wall_s=3, total_s=40)
    assert RunJob(program={}, limits=limits).deadline_s() == LintJob(code="", limits=limits).deadline_s() == 13
    for job in (JudgeJob(candidate={}, judge={}, limits=limits), MeasureJob(measure={}, limits=limits),
                RepoJob(repo={}, limits=limits), SessionJob(session={}, limits=limits)):
        assert job.deadline_s() == 50, job.op


def test_a_changed_job_keeps_its_type() -> None:
    job = dataclasses.replace(RunJob(program={"code": "x"}), limits=LIMITS, files={"f": "y"})
    assert isinstance(job, RunJob) and job.to_wire()["job"]["files"] == {"f": "y"}


# ------------------------------------------------------------------------------------------------------ reply


def test_the_runner_and_the_host_list_the_same_reply_keys() -> None:
    assert in_sandbox_protocol().REPLY_KEYS == REPLY_KEYS
    assert not set(DECODED) & set(NOT_DECODED)


def test_every_result_field_but_the_sandbox_is_decoded_from_the_reply() -> None:
    assert set(DECODED) == {f.name for f in dataclasses.fields(Result)} - {"sandbox_id"}


class Reading(dict):
    """A reply that records which keys its reader asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)


def test_from_wire_reads_exactly_the_decoded_keys() -> None:
    raw = Reading(in_sandbox_protocol().reply("ok", stdout="hi\n", trace="tb", timings={"x": 1.0}))
    Result.from_wire(raw)
    assert raw.asked == set(DECODED)


def test_a_reply_built_by_the_runner_decodes_to_its_result() -> None:
    reply = in_sandbox_protocol().reply(
        "timeout", exit_code=None, signal=9, wall_ms=12.5, cpu_ms=3, peak_memory_kb=2048, stdout="o", stderr="e",
        stdout_truncated=True, stderr_truncated=False, error="why", events=[{"event": "load"}],
        runs=[{"program": "p"}], spec_error="bad", files={"f": "eA=="},
        usage={"cpu_ms": 1, "peak_memory_kb": 2, "complete": True}, trace="tb", timings={}, files_kb=4, processes=[])
    result = Result.from_wire(json.loads(json.dumps(reply)))
    assert result == Result(status=Status.TIMEOUT, signal=9, wall_ms=12.5, cpu_ms=3.0, peak_memory_kb=2048,
                            stdout="o", stderr="e", stdout_truncated=True, error="why", events=[{"event": "load"}],
                            runs=[{"program": "p"}], spec_error="bad", files={"f": "eA=="},
                            usage={"cpu_ms": 1.0, "peak_memory_kb": 2, "complete": True})


def test_the_runner_refuses_to_send_a_key_the_host_does_not_know() -> None:
    with pytest.raises(ValueError, match="undocumented reply keys"):
        in_sandbox_protocol().reply("ok", verdict="passed")


def test_an_unknown_or_missing_status_is_a_sandbox_error() -> None:
    assert Result.from_wire({"status": "great"}).status == Status.SANDBOX_ERROR
    assert Result.from_wire({}).status == Status.SANDBOX_ERROR
    assert Result.from_wire(Result.infra("down").to_dict()) == Result.infra("down")


# --------------------------------------------------------------------------------------------------- envelope

ITEM = {"id": "c1", "code": "def f(): pass", "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": ""}] * 3}}


def test_envelopes_come_back_from_their_json_as_they_went() -> None:
    score = ScoreEnvelope(item=ITEM, deadline=100.5, enqueued=90.0, request="req")
    run = RunEnvelope(job=RunJob(program={"code": "print(1)"}, fetch_files=["x"], limits=LIMITS), deadline=1.0,
                      enqueued=0.5, request="req2")
    assert envelope_from_json(score.to_json()) == score and envelope_from_json(run.to_json()) == run
    assert json.loads(score.to_json())["kind"] == "score" and json.loads(run.to_json())["kind"] == "run"
    assert (score.work, run.work) == (3, 1)  # admission weighs an item by its test cases, a raw job as one


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"kind": "score"}', '{"kind": "dance", "deadline": 1, "enqueued": 0}',
    '{"kind": "score", "item": "x", "deadline": 1, "enqueued": 0}',
    '{"kind": "run", "job": {"op": "dance"}, "deadline": 1, "enqueued": 0}',
    '{"kind": "run", "job": {"op": "lint", "stdin": "x", "limits": {}}, "deadline": 1, "enqueued": 0}',
])
def test_an_envelope_this_version_cannot_run_is_malformed(text: str) -> None:
    with pytest.raises(MalformedEnvelope):
        envelope_from_json(text)


# ------------------------------------------------------------------------------------------------ Lua replies


def test_the_enqueue_reply_decodes_into_one_placement_per_item() -> None:
    out = ["ok", 7, "epoch1", "hit", '{"reward": 1}', "done", 'j2\n{"reward": 0}', "attach", "j3", "queued",
           "j4\n1-0"]
    assert decode_enqueue(out) == Admitted(7, "epoch1", [Cached({"reward": 1}), Finished("j2", {"reward": 0}),
                                                         Attached("j3"), Queued("j4", "1-0")])
    assert decode_enqueue(["overloaded", 12]) == Refused(12)
    with pytest.raises(ValueError):
        decode_enqueue(["ok", 0, "", "teleported", "x"])


def test_the_record_reply_decodes_to_what_happened() -> None:
    assert [decode_record(x) for x in (1, 0, -1)] == [Recorded.RECORDED, Recorded.DUPLICATE, Recorded.TAKEN]


@pytest.fixture(scope="module")
def redis_server():
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def test_the_real_scripts_replies_decode_as_documented(redis_server) -> None:
    r = redis_server.client()
    enqueue, record = r.register_script(ENQUEUE), r.register_script(RECORD)
    p = new_prefix()
    stream = f"{p}:jobs"
    r.xgroup_create(stream, "workers", id="0", mkstream=True)

    def admit(*jobs: tuple[str, str]) -> Admitted | Refused:
        args = [p, stream, 100, f"{p}:reply:test", 60, "1"]
        for job_id, key in jobs:
            args += [job_id, key, "{}", 1]
        return decode_enqueue(enqueue(args=args))

    first = admit(("j1", "k1"), ("j2", "k1"))  # the second is identical to the first: it attaches
    assert isinstance(first, Admitted) and first.queued == 0
    assert isinstance(first.placements[0], Queued) and first.placements[0].job_id == "j1"
    assert first.placements[1] == Attached("j1")

    def rec(job_id: str) -> Recorded:
        return decode_record(record(args=[p, stream, "", job_id, '{"reward": 1}', "", "passed", 10, "k1", "1", 60,
                                          10, 60, 60, "0"]))

    assert rec("j1") is Recorded.RECORDED and rec("j1") is Recorded.DUPLICATE
    again = admit(("j5", "k1"))  # now cached
    assert isinstance(again, Admitted) and again.placements == [Cached({"reward": 1})]
    r.close()


# ---------------------------------------------------------------------------------------------- store summary


def rollouts() -> list[tuple[dict, dict]]:
    """(request, result) pairs, oldest first: three passed, two failed, one infra_error; distinct test times."""
    made = []
    for i, (status, reward, ms) in enumerate([("passed", 1.0, 30.0), ("failed", 0.2, 50.0), ("passed", 1.0, 10.0),
                                              ("infra_error", None, None), ("failed", 0.4, 20.0),
                                              ("passed", 0.9, 40.0)]):
        result = {"rollout_id": f"r{i}", "id": f"c{i}", "status": status, "reward": reward, "profile": "binary",
                  "components": {"pass_rate": reward, "quality": 0.5} if reward is not None else {},
                  "details": {"timings": {"tests_ms": ms}} if ms is not None else {},
                  "message": "no sandbox" if status == "infra_error" else "",
                  "tests": [{"name": "t1", "passed": status == "passed", "message": "expected 2"}]}
        made.append(({"language": "python", "code": f"x = {i}"}, result))
    return made


def expected_summary_but_throughput() -> dict:
    return {
        "reward_histogram": [RewardBin(0.2, 1), RewardBin(0.4, 1), RewardBin(0.9, 1), RewardBin(1.0, 2)],
        "components": {"executability": None, "pass_rate": pytest.approx(0.7), "quality": 0.5, "efficiency": None},
        "statuses": [StatusCount("passed", 3), StatusCount("failed", 2), StatusCount("infra_error", 1)],
        "slowest": [SlowRollout("r1", "failed", 0.2, 50.0, "c1"), SlowRollout("r5", "passed", 0.9, 40.0, "c5"),
                    SlowRollout("r0", "passed", 1.0, 30.0, "c0"), SlowRollout("r4", "failed", 0.4, 20.0, "c4"),
                    SlowRollout("r2", "passed", 1.0, 10.0, "c2")],
        "recent_failures": [FailedRollout("r4", "failed", "t1: expected 2", "c4"),
                            FailedRollout("r3", "infra_error", "no sandbox", "c3"),
                            FailedRollout("r1", "failed", "t1: expected 2", "c1")],
    }


def check(summary) -> None:
    got = dataclasses.asdict(summary)
    assert sum(m["count"] for m in got["throughput"]) == 6
    assert {k: got[k] for k in expected_summary_but_throughput()} == {
        k: [dataclasses.asdict(x) for x in v] if isinstance(v, list) else v
        for k, v in expected_summary_but_throughput().items()}


def test_the_sqlite_stores_summary_counts_its_rollouts(tmp_path) -> None:
    store = RolloutStore(tmp_path / "rollouts.sqlite3")
    for request, result in rollouts():
        store.add(request, result, "img", {"runner": "1"})
    summary = store.summary()
    check(summary)
    # The Python path (the Redis store's) says what the SQL says, throughput included.
    assert rounded(summary_of_records(store.list(limit=100)[0])) == rounded(summary)
    assert sorted(store.summary(window=2).statuses, key=str) == [StatusCount("failed", 1), StatusCount("passed", 1)]
    store.close()


def test_the_redis_stores_summary_is_the_sqlite_stores(redis_server, tmp_path) -> None:
    sqlite = RolloutStore(tmp_path / "rollouts.sqlite3")
    redis_store = RedisRolloutStore(redis_server.url, new_prefix(), retention=100)
    for request, result in rollouts():
        sqlite.add(request, result, "img", {"runner": "1"})
        redis_store.add(request, result, "img", {"runner": "1"})
    check(redis_store.summary())
    # Everything but the times, which each store reads from its own clock (Redis's TIME, SQLite's time.time()).
    ours, theirs = rounded(redis_store.summary()), rounded(sqlite.summary())
    for summary in (ours, theirs):
        summary.pop("throughput")
        summary["points"] = [{**p, "t": None} for p in summary["points"]]
    assert ours == theirs
    redis_store.close()
    sqlite.close()


@pytest.mark.parametrize("filters", [Filters(language="rust"), Filters(status="failed"), Filters(failed=True),
                                     Filters(profile="seed", kind="io"), Filters(language="none of ours")])
def test_the_redis_stores_filtered_summary_is_the_sqlite_stores(redis_server, tmp_path, filters) -> None:
    from .test_dashboard_units import made

    sqlite = RolloutStore(tmp_path / "rollouts.sqlite3")
    redis_store = RedisRolloutStore(redis_server.url, new_prefix(), retention=1000)
    for i in range(48):
        sqlite.add(*made(i), "img", {"runner": "1"})
        redis_store.add(*made(i), "img", {"runner": "1"})
    ours, theirs = rounded(redis_store.summary(filters)), rounded(sqlite.summary(filters))
    for summary in (ours, theirs):  # times: each store's own clock
        del summary["throughput"], summary["bucket_s"]
        summary["points"] = [{**p, "t": None} for p in summary["points"]]
    assert ours == theirs and ours["count"] == sum(map(filters.matches, [
        {**r, "created_at": 0.0} for r in sqlite.list(limit=100)[0]]))
    redis_store.close()
    sqlite.close()
