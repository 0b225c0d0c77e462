"""The session adapters over the real service (HTTP only): the client's RepoEnv and tool schema, the TRL
environment_factory class (probed the way GRPOTrainer probes it), the verl BaseTool."""

from __future__ import annotations

import asyncio
import inspect
import json
from types import SimpleNamespace

import httpx
import pytest

from rewardbox import Client, HTTPStatusError
from rewardbox.archive import repo_archive
from rewardbox.sessions import TOOLS, RepoEnv, Session

CALC = {"pkg/__init__.py": b"", "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
FIX = "sed -i 's/a - b/a + b/' pkg/calc.py"


@pytest.fixture(scope="module")
def client(server):
    with Client(server) as c:
        yield c


@pytest.fixture(scope="module")
def calc_id(server) -> str:
    r = httpx.post(f"{server}/repos", content=repo_archive(CALC), headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def test_the_tool_schema_names_bash_read_file_write_file_and_submit():
    assert [t["function"]["name"] for t in TOOLS] == ["bash", "read_file", "write_file", "submit"]
    for tool in TOOLS:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


def test_repo_env_runs_an_episode_and_submit_grades_it(client, calc_id):
    env = RepoEnv(calc_id, TESTS, client=client, task="make add add")
    assert env.reset().startswith("make add add")
    obs, reward, done, _ = env.step(FIX)
    assert obs.startswith("exit code: 0 (ok)") and reward == 0.0 and not done
    obs, _, _, _ = env.step({"tool": "read_file", "arguments": {"path": "pkg/calc.py"}})
    assert "a + b" in obs
    obs, _, _, _ = env.step({"tool": "read_file", "arguments": {"path": "../etc/passwd"}})
    assert obs.startswith("error:") and "path" in obs
    env.step({"tool": "write_file", "arguments": {"path": "NOTES", "content": "done\n"}})
    obs, reward, done, info = env.step({"tool": "submit", "arguments": {}})
    assert done and reward == 1.0 and info["result"]["status"] == "passed", info
    session = env.session
    env.close()
    with pytest.raises(HTTPStatusError) as gone:
        session.exec("true")
    assert gone.value.status == 410


def test_repo_env_resets_by_forking_a_warm_base_session(client, calc_id):
    base = Session.create(client, calc_id)
    base.exec("echo warm > state.txt")
    env = RepoEnv(calc_id, TESTS, client=client, base=base)
    for _ in range(2):  # each reset is a fresh fork: what the previous episode did is gone, the base's state is not
        env.reset()
        obs, _, _, _ = env.step("cat state.txt; test -e extra && echo seen || echo unseen; touch extra")
        assert "warm\nunseen\n" in obs
    assert env.reward() == 0.0
    env.close()
    base.close()


def test_trl_environment_is_probed_like_grpo_trainer_and_owns_the_reward(server, calc_id):
    from transformers.utils import get_json_schema

    from rewardbox.adapters.trl_env import session_environment

    factory = session_environment(url=server, fork=True)
    env = factory()
    members = dict(inspect.getmembers(type(env), predicate=inspect.isfunction))
    tools = sorted(n for n in members if not n.startswith("_") and n not in ("reset", "get_reward"))
    assert "reset" in members and "get_reward" in members and tools == ["bash", "read_file", "write_file"]
    for name in tools:  # TRL turns each tool into a JSON schema from its signature and docstring
        assert get_json_schema(getattr(env, name))["function"]["name"] == name
    assert env.reset(repo_id=calc_id, tests=json.dumps(TESTS), task="fix add") == "fix add\n"
    assert "exit code: 0" in env.bash(FIX)
    assert env.read_file("nope.py").startswith("error:")
    assert env.get_reward() == 1.0
    other = factory()
    other.reset(repo_id=calc_id, tests=TESTS)  # a fork of the same base: the first rollout's fix is not in it
    assert "a - b" in other.read_file("pkg/calc.py")
    assert other.get_reward() == 0.0
    (base,) = factory.bases.sessions.values()
    factory.close()  # the factory's warm bases are closed with it
    with pytest.raises(HTTPStatusError) as gone:
        base.exec("true")
    assert gone.value.status == 410


def test_trl_environments_of_another_url_share_no_base_and_an_outage_is_none(server, calc_id):
    """A factory pointing elsewhere never reuses another's warm base: there it cannot open a session, the episode
    goes on (the policy is told) and the reward is None, which TRL masks; never a 0."""
    from rewardbox.adapters.trl_env import session_environment

    live = session_environment(url=server)
    live().reset(repo_id=calc_id, tests=TESTS)
    elsewhere = session_environment(url=_dead_url())
    elsewhere.client.retries = 0
    env = elsewhere()
    env.reset(repo_id=calc_id, tests=TESTS)
    assert elsewhere.bases.sessions == {} and len(live.bases.sessions) == 1
    with pytest.raises(Exception, match="no session"):  # TRL shows the policy {"error": ...}
        env.bash(FIX)
    assert env.get_reward() is None
    live.close()


def test_trl_environment_reopens_a_warm_base_that_expired(server, calc_id):
    from rewardbox.adapters.trl_env import session_environment

    factory = session_environment(url=server)
    env = factory()
    env.reset(repo_id=calc_id, tests=TESTS)
    (base,) = factory.bases.sessions.values()
    base.close()  # as its TTL would
    env.reset(repo_id=calc_id, tests=TESTS)
    assert "exit code: 0" in env.bash(FIX) and env.get_reward() == 1.0
    assert list(factory.bases.sessions.values()) != [base]
    factory.close()


def _dead_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_verl_tool_shares_one_session_per_trajectory_and_submit_is_the_reward(server, calc_id):
    pytest.importorskip("verl")
    from rewardbox.adapters.verl_tool import RewardboxSessionTool

    tools = {a: RewardboxSessionTool({"url": server, "action": a}, None) for a in ("bash", "read_file", "submit")}
    assert tools["bash"].get_openai_tool_schema().function.name == "bash"
    # the task rides in one tool's entry only; verl passes each tool its own entry, agent_data carries them all
    row = {"submit": {"create_kwargs": {"repo_id": calc_id, "tests": json.dumps(TESTS)}}}
    trajectories = {t: SimpleNamespace(extra_fields={}, tools_kwargs=row) for t in ("traj-1", "traj-2")}

    async def call(action: str, params: dict, trajectory: str):
        tool = tools[action]
        instance_id, _ = await tool.create(create_kwargs=row.get(action, {}).get("create_kwargs", {}))
        try:
            return await tool.execute(instance_id, params, agent_data=trajectories[trajectory])
        finally:
            await tool.release(instance_id)

    async def run():
        await asyncio.gather(call("bash", {"command": FIX}, "traj-1"), call("bash", {"command": "true"}, "traj-1"))
        read, _, _ = await call("read_file", {"path": "pkg/calc.py"}, "traj-1")
        other, _, _ = await call("read_file", {"path": "pkg/calc.py"}, "traj-2")
        # one turn: submit, then a command: in that order, the command told the episode is over
        (_, reward, metrics), (after, _, _) = await asyncio.gather(call("submit", {}, "traj-1"),
                                                                     call("bash", {"command": "true"}, "traj-1"))
        _, reward2, _ = await call("submit", {}, "traj-2")
        return read.text, other.text, reward, metrics, after.text, reward2

    fixed, untouched, reward, metrics, after, reward2 = asyncio.run(run())
    assert "a + b" in fixed and "a - b" in untouched  # parallel calls of one turn: one session, in order
    assert reward == 1.0 and metrics == {"reward": 1.0, "status": "passed"} and reward2 == 0.0
    assert after.startswith("the episode was submitted")
    state = trajectories["traj-1"].extra_fields["rewardbox"]
    assert state["grade"] == {"reward": 1.0, "status": "passed"} and state["closed"]
    with pytest.raises(HTTPStatusError) as gone:
        Session(Client(server), state["session_id"]).exec("true")
    assert gone.value.status == 410
