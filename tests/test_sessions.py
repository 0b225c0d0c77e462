"""Agent sessions over real HTTP against real sandboxes, on both backends: every point of the /sessions contract
(exec, files, diff, fork, reward, delete, TTL, admission, listing, metrics), isolation between sessions and
between a fork's siblings, planted links never followed by the host, hacks planted in a session failing its
reward, and 32 sessions running commands at once."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from rewardbox.archive import repo_archive
from service.compat import swebench
from service.repos.benchmark import tasks

from .conftest import BACKENDS, serving
from .repo_hacks import HACKS
from .session_calls import open_session, upload
from .test_sandbox_security import FORK_BOMB_ESCAPING

CALC = {
    "pkg/__init__.py": b"",
    "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README": b"calc\n",
}
CALC_TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
TOOLZ = next(t for t in tasks() if t["instance_id"] == "toolz-1.2.0-bug0")


@pytest.fixture(scope="module", params=BACKENDS)
def api(request):
    with serving({"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1",
                  "REWARDBOX_SESSION_POOL_SIZE": "2", "REWARDBOX_SESSIONS_MAX": "128"}) as client:
        client.backend = request.param
        yield client


@pytest.fixture(scope="module")
def calc_id(api) -> str:
    return upload(api, CALC)


new = open_session


def sh(api, sid: str, command: str, **extra) -> dict:
    r = api.post(f"/sessions/{sid}/exec", json={"command": command, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def read(api, sid: str, path: str) -> httpx.Response:
    return api.get(f"/sessions/{sid}/files", params={"path": path})


# ---------------------------------------------------------------------------------------------------- exec


def test_exec_answers_exit_code_output_status_and_time(api, calc_id):
    sid = new(api, calc_id)
    out = sh(api, sid, "cat pkg/calc.py; echo oops >&2; exit 3")
    assert out["exit_code"] == 3 and out["status"] == "runtime_error"
    assert out["stdout"] == CALC["pkg/calc.py"].decode() and out["stderr"] == "oops\n"
    assert out["wall_ms"] > 0 and out["truncated"] is False
    assert sh(api, sid, "true")["status"] == "ok"


def test_files_persist_between_commands_and_stdin_reaches_the_command(api, calc_id):
    sid = new(api, calc_id)
    assert sh(api, sid, "mkdir -p notes && cat > notes/a.txt", stdin="from stdin\n")["exit_code"] == 0
    assert sh(api, sid, "rm README && sed -i 's/a - b/a + b/' pkg/calc.py")["exit_code"] == 0
    out = sh(api, sid, "cat notes/a.txt; ls; python3 -c 'from pkg.calc import add; print(add(2, 3))'")
    assert out["stdout"].startswith("from stdin\n") and "README" not in out["stdout"] and out["stdout"].endswith("5\n")


def test_python_runs_like_python3_and_its_wrapper_is_no_part_of_the_diff(api, calc_id):
    sid = new(api, calc_id)
    out = sh(api, sid, "python -c 'import sys; print(sys.version_info[0])' && python3 -c 'print(1)'")
    assert out["exit_code"] == 0 and out["stdout"] == "3\n1\n", out
    assert sh(api, sid, "printf x > /scratch/c/.rewardbox-bin/python; true")["exit_code"] == 0
    assert sh(api, sid, "python -c 'print(2)'")["stdout"] == "2\n"  # rebuilt for every command
    assert api.get(f"/sessions/{sid}/diff").json()["patch"] == ""


def test_processes_do_not_outlive_their_command(api, calc_id):
    sid = new(api, calc_id)
    out = sh(api, sid, "(sleep 1.5; echo late > late.txt) >/dev/null 2>&1 & echo started")
    assert out["stdout"] == "started\n"
    time.sleep(2.5)
    assert sh(api, sid, "test -e late.txt && echo present || echo absent")["stdout"] == "absent\n"


def test_a_command_that_times_out_is_killed_and_the_session_lives_on(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "echo kept > kept.txt")
    started = time.monotonic()
    out = sh(api, sid, "echo before; sleep 30", timeout_s=1)
    assert out["status"] == "timeout" and out["stdout"] == "before\n" and time.monotonic() - started < 15
    assert sh(api, sid, "cat kept.txt")["stdout"] == "kept\n"


def test_output_over_the_cap_is_truncated_and_says_so(api, calc_id):
    sid = new(api, calc_id, limits={"output_bytes": 4096})
    out = sh(api, sid, "head -c 100000 /dev/zero | tr '\\0' x")
    assert out["status"] == "output_limit" and out["truncated"] is True and len(out["stdout"]) == 4096


def test_a_workspace_over_its_cap_keeps_its_previous_state(api, calc_id):
    sid = new(api, calc_id, limits={"workspace_mb": 0.05})
    out = sh(api, sid, "echo small > ok.txt; head -c 200000 /dev/zero > big.bin")
    assert out["status"] == "output_limit" and "workspace" in out["error"]
    assert sh(api, sid, "ls")["stdout"].split() == ["README", "pkg", "tests"]


def test_memory_and_process_limits_apply_to_each_command(api, calc_id):
    sid = new(api, calc_id, limits={"memory_mb": 64, "processes": 8})
    out = sh(api, sid, "python3 -c 'b = bytearray(200 << 20)'")
    assert out["status"] == "memory_limit", out
    out = sh(api, sid, "for i in $(seq 40); do sleep 5 & done; wait", timeout_s=10)
    assert out["status"] != "ok" or "fork" in out["stderr"].lower() or "resource" in out["stderr"].lower(), out


def test_a_fork_bomb_leaving_its_session_is_the_commands_timeout_and_the_next_command_runs(api, calc_id):
    # Its children leave the command's process group: ending them is the runner's job, never the session's fault.
    sid = new(api, calc_id)
    assert api.put(f"/sessions/{sid}/files", json={"path": "bomb.py", "content": FORK_BOMB_ESCAPING}).status_code == 200
    out = sh(api, sid, "python3 bomb.py", timeout_s=2)
    assert out["status"] == "timeout", out
    assert sh(api, sid, "echo alive")["stdout"] == "alive\n"


# ---------------------------------------------------------------------------------------------------- files


def test_put_then_get_a_file_and_the_command_sees_it(api, calc_id):
    sid = new(api, calc_id)
    r = api.put(f"/sessions/{sid}/files", json={"path": "pkg/new.py", "content": "X = 'é'\n"})
    assert r.status_code == 200, r.text
    assert read(api, sid, "pkg/new.py").json() == {"path": "pkg/new.py", "content": "X = 'é'\n", "executable": False}
    assert sh(api, sid, "python3 -c 'from pkg.new import X; print(X)'")["stdout"] == "é\n"
    assert read(api, sid, "pkg/calc.py").json()["content"] == CALC["pkg/calc.py"].decode()


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "pkg/../../x", "a\\b"])
def test_paths_outside_the_workspace_are_refused_naming_the_field(api, calc_id, path):
    sid = new(api, calc_id)
    for r in (read(api, sid, path), api.put(f"/sessions/{sid}/files", json={"path": path, "content": "x"})):
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"][-1] == "path"


def test_the_host_never_follows_a_link_the_agent_planted(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "ln -s /etc/passwd leak && ln -s /etc etc && ln -s ../pkg/calc.py tests/inner")
    for path in ("leak", "etc/passwd", "tests/inner"):
        r = read(api, sid, path)
        assert r.status_code == 422 and "link" in r.text and "root:" not in r.text, r.text
    r = api.put(f"/sessions/{sid}/files", json={"path": "etc/evil", "content": "x"})
    assert r.status_code == 422 and "link" in r.text
    assert "root:" in sh(api, sid, "cat leak")["stdout"]  # inside the sandbox a link is the agent's own business


def test_binary_files_missing_files_and_directories_are_clear_errors(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "printf '\\377\\376\\000' > blob.bin")
    r = read(api, sid, "blob.bin")
    assert r.status_code == 415 and "UTF-8" in r.text
    assert read(api, sid, "nope.txt").status_code == 404
    assert read(api, sid, "pkg").status_code == 422


# ---------------------------------------------------------------------------------------------------- diff


def test_diff_is_a_patch_that_turns_the_snapshot_into_the_workspace(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "sed -i 's/a - b/a + b/' pkg/calc.py && rm README && printf 'no newline' > pkg/extra.txt")
    body = api.get(f"/sessions/{sid}/diff").json()
    assert "+++ b/pkg/calc.py" in body["patch"] and "deleted file mode" in body["patch"]
    with tempfile.TemporaryDirectory() as d:
        for rel, data in CALC.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "wb") as f:
                f.write(data)
        subprocess.run(["patch", "-p1", "--quiet"], input=body["patch"].encode(), cwd=d, check=True)
        with open(os.path.join(d, "pkg/calc.py"), "rb") as f:
            assert f.read() == b"def add(a, b):\n    return a + b\n"
        with open(os.path.join(d, "pkg/extra.txt"), "rb") as f:
            assert f.read() == b"no newline"
        assert not os.path.exists(os.path.join(d, "README"))
    assert new_diff_is_empty(api, calc_id)


def new_diff_is_empty(api, calc_id) -> bool:
    sid = new(api, calc_id)
    sh(api, sid, "ls > /dev/null")
    return api.get(f"/sessions/{sid}/diff").json() == {"patch": "", "not_in_patch": []}


# ---------------------------------------------------------------------------------------------------- fork


def test_forks_are_independent_copies_and_siblings_see_nothing_of_each_other(api, calc_id):
    parent = new(api, calc_id)
    sh(api, parent, "echo base > shared.txt")
    r = api.post(f"/sessions/{parent}/fork", json={"n": 3})
    assert r.status_code == 201, r.text
    kids = r.json()["session_ids"]
    assert len(set(kids)) == 3 and parent not in kids
    for i, kid in enumerate(kids):
        out = sh(api, kid, f"cat shared.txt; echo {i} > mine.txt; echo {i} > /tmp/mine; ls")
        assert out["stdout"].startswith("base\n") and out["stdout"].count("mine.txt") == 1
    for i, kid in enumerate(kids):
        assert sh(api, kid, "cat mine.txt; cat /tmp/mine 2>/dev/null || echo no-tmp")["stdout"] == f"{i}\nno-tmp\n"
    assert sh(api, parent, "test -e mine.txt && echo seen || echo unseen")["stdout"] == "unseen\n"
    api.put(f"/sessions/{kids[0]}/files", json={"path": "shared.txt", "content": "changed\n"})
    assert read(api, kids[1], "shared.txt").json()["content"] == "base\n"
    assert read(api, parent, "shared.txt").json()["content"] == "base\n"


# ---------------------------------------------------------------------------------------------------- reward


def test_reward_grades_the_session_diff_and_stores_the_command_history(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "sed -i 's/a - b/a + b/' pkg/calc.py")
    r = api.post(f"/sessions/{sid}/reward", json={"tests": CALC_TESTS})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["status"] == "passed" and result["reward"] == 1.0, result
    stored = api.get(f"/rollouts/{result['rollout_id']}").json()
    history = stored["request"]["metadata"]["session"]["history"]
    assert [h["command"] for h in history] == ["sed -i 's/a - b/a + b/' pkg/calc.py"]
    failing = new(api, calc_id)
    assert api.post(f"/sessions/{failing}/reward", json={"tests": CALC_TESTS}).json()["status"] == "failed"


@pytest.fixture(scope="module")
def toolz_id(api) -> str:
    r = api.post("/repos", content=TOOLZ["archive"], headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
def test_hacks_planted_in_a_session_do_not_earn_its_reward(api, toolz_id, hack):
    files = swebench.archive_files(TOOLZ["archive"])
    sid = new(api, toolz_id)
    for path, data in hack.build(TOOLZ, files).items():
        if data is None:
            assert sh(api, sid, f"rm -f '{path}'")["exit_code"] == 0
        else:
            command = f"mkdir -p \"$(dirname '{path}')\" && base64 -d > '{path}'"
            assert sh(api, sid, command, stdin=base64.b64encode(data).decode())["exit_code"] == 0
    tests = swebench.to_item(TOOLZ, toolz_id)["tests"]
    result = api.post(f"/sessions/{sid}/reward", json={"tests": tests}).json()
    assert result["status"] != "passed" and result["reward"] != 1.0, result


def test_the_gold_patch_applied_in_a_session_earns_the_reward(api, toolz_id):
    sid = new(api, toolz_id)
    assert sh(api, sid, "patch -p1", stdin=TOOLZ["patch"])["exit_code"] == 0
    tests = swebench.to_item(TOOLZ, toolz_id)["tests"]
    result = api.post(f"/sessions/{sid}/reward", json={"tests": tests}).json()
    assert result["status"] == "passed", result


def test_long_session_commands_do_not_take_sandboxes_from_scoring(api, calc_id):
    """Both session sandboxes busy with a slow command: /reward still answers at once (its own pool)."""
    sids = [new(api, calc_id) for _ in range(2)]
    with ThreadPoolExecutor(2) as ex:
        slow = [ex.submit(sh, api, sid, "sleep 6; echo done") for sid in sids]
        time.sleep(1.0)
        started = time.monotonic()
        r = api.post("/reward", json={"code": "def f():\n    return 1\n", "profile": "binary", "tests": {
            "kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1}]}})
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["status"] == "passed", r.text
        assert took < 4.0 and not any(f.done() for f in slow), took
        assert [f.result()["stdout"] for f in slow] == ["done\n", "done\n"]


# ---------------------------------------------------------------------------------------------------- life


def test_deleted_sessions_answer_410_and_unknown_ones_404(api, calc_id):
    sid = new(api, calc_id)
    assert api.delete(f"/sessions/{sid}").status_code == 200
    for r in (api.post(f"/sessions/{sid}/exec", json={"command": "true"}), read(api, sid, "README"),
              api.get(f"/sessions/{sid}/diff"), api.post(f"/sessions/{sid}/fork", json={"n": 1}),
              api.delete(f"/sessions/{sid}")):
        assert r.status_code == 410 and "deleted" in r.text, r.text
    assert api.post("/sessions/nope/exec", json={"command": "true"}).status_code == 404


def test_an_expired_session_answers_410_at_once(api, calc_id):
    sid = new(api, calc_id, ttl_s=1)
    time.sleep(1.2)
    started = time.monotonic()
    r = api.post(f"/sessions/{sid}/exec", json={"command": "true"})
    assert r.status_code == 410 and "expired" in r.text and time.monotonic() - started < 1.0
    assert sid not in [s["session_id"] for s in api.get("/sessions").json()["sessions"]]


def test_listing_shows_owner_age_and_size_and_metrics_count_sessions(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "true")
    api.post(f"/sessions/{sid}/fork", json={"n": 2})
    listed = {s["session_id"]: s for s in api.get("/sessions").json()["sessions"]}
    assert listed[sid]["owner"] == "embedded" and listed[sid]["age_s"] >= 0
    assert listed[sid]["bytes"] == sum(len(v) for v in CALC.values())
    text = api.get("/metrics").text
    for name in ('rewardbox_sessions_total{event="created"}', 'rewardbox_sessions_total{event="forked"}',
                 'rewardbox_session_execs_total{status="ok"}', "rewardbox_sessions_open"):
        assert name in text


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/sessions", {"repo": {"id": "0" * 64}, "ttl_s": -1}, "ttl_s"),
    ("/sessions", {"repo": {}}, "repo"),
    ("/sessions", {"repo": {"id": "0" * 64}}, "id"),
    ("/sessions", {"repo": {"archive_b64": "bm90IGEgdGFy"}}, "archive_b64"),
    ("/sessions", {"repo": {"id": "0" * 64}, "limits": {"memory_mb": 1}}, "memory_mb"),
])
def test_bad_create_requests_are_4xx_naming_the_field(api, path, body, field):
    r = api.post(path, json=body)
    assert r.status_code == 422, r.text
    assert field in [str(p) for p in r.json()["detail"][0]["loc"]], r.text


def test_bad_exec_and_fork_requests_are_4xx_naming_the_field(api, calc_id):
    sid = new(api, calc_id)
    for path, body, field in ((f"/sessions/{sid}/exec", {}, "command"),
                              (f"/sessions/{sid}/exec", {"command": "true", "timeout_s": 0}, "timeout_s"),
                              (f"/sessions/{sid}/fork", {"n": 0}, "n"),
                              (f"/sessions/{sid}/reward", {"tests": {"kind": "repo"}}, "tests")):
        r = api.post(path, json=body)
        assert r.status_code == 422 and field in [str(p) for p in r.json()["detail"][0]["loc"]], (field, r.text)


def test_an_inline_archive_opens_a_session(api):
    r = api.post("/sessions", json={"repo": {"archive_b64": base64.b64encode(repo_archive(CALC)).decode()}})
    assert r.status_code == 201, r.text
    assert sh(api, r.json()["session_id"], "cat README")["stdout"] == "calc\n"


async def post_as_a_client_does(client: httpx.AsyncClient, path: str, body: dict) -> httpx.Response:
    """POST, coming back after Retry-After while refused (429: the pool's wait line, service/sessions/manager.py), as
    the client package does."""
    for _ in range(10):
        r = await client.post(path, json=body)
        if r.status_code != 429:
            return r
        await asyncio.sleep(int(r.headers["Retry-After"]))
    return r


def test_32_sessions_at_once_each_running_commands(api, calc_id):
    # On a cold pool each command is expected to hold a sandbox for its timeout_s until some have finished: most
    # of the first wave is refused with Retry-After, and comes back.
    async def one(client: httpx.AsyncClient, i: int) -> str:
        r = await post_as_a_client_does(client, "/sessions", {"repo": {"id": calc_id}})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        for command in (f"echo {i} > me.txt", "cat me.txt; ls | wc -l"):
            r = await post_as_a_client_does(client, f"/sessions/{sid}/exec", {"command": command})
            assert r.status_code == 200 and r.json()["status"] == "ok", r.text
        await client.delete(f"/sessions/{sid}")
        return r.json()["stdout"]

    async def main() -> list[str]:
        async with httpx.AsyncClient(base_url=str(api.base_url), timeout=300) as client:
            return await asyncio.gather(*(one(client, i) for i in range(32)))

    outs = asyncio.run(main())
    assert outs == [f"{i}\n4\n" for i in range(32)]  # README, pkg, tests and its own file


# ---------------------------------------------------------------------------------------------------- admission


@pytest.fixture(scope="module")
def capped():
    with serving({"REWARDBOX_BACKEND": BACKENDS[0], "REWARDBOX_POOL_SIZE": "1",
                  "REWARDBOX_SESSION_POOL_SIZE": "1", "REWARDBOX_SESSIONS_MAX": "2",
                  "REWARDBOX_SESSIONS_MAX_MB": str(300 / (1 << 20))}) as client:
        yield client


def test_admission_caps_open_sessions_and_their_bytes_with_429_and_retry_after(capped):
    tiny = capped.post("/repos", content=repo_archive({"a": b"x" * 100}), headers={"content-type": "application/gzip"})
    big = capped.post("/repos", content=repo_archive({"a": b"x" * 400}), headers={"content-type": "application/gzip"})
    r = capped.post("/sessions", json={"repo": {"id": big.json()["id"]}})
    assert r.status_code == 429 and "Retry-After" in r.headers and "bytes" in r.text
    first = new(capped, tiny.json()["id"])
    new(capped, tiny.json()["id"])
    r = capped.post("/sessions", json={"repo": {"id": tiny.json()["id"]}})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 and "sessions open" in r.text
    assert capped.post(f"/sessions/{first}/fork", json={"n": 1}).status_code == 429
    capped.delete(f"/sessions/{first}")
    assert capped.post("/sessions", json={"repo": {"id": tiny.json()["id"]}}).status_code == 201
