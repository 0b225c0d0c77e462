"""The real trainer frameworks' own code against the real service: TRL's GRPOTrainer on a tiny local model, verl's
reward loop (RewardLoopWorker and RewardLoopManager's batch assembly, Ray bypassed), OpenRLHF's remote-RM client
(SingleTurnAgentExecutor) and the SandboxFusion SDK. Installed by the `frameworks` extra (make venv); the suite
fails without them under `make test` (REWARDBOX_NEED_FRAMEWORKS=1) and skips elsewhere."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import os
import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from rewardbox import Client
from trainer.tasks import FUNCTIONS, INPUTS, named_function_tasks

from .conftest import start_server, stop_server

ADD_ASSERTS = {"assert_case": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}
GOOD = "Sure:\n```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return 2 * b\n```"
NO_FENCE = "def add(a, b):\n    return a + b\n"
VERL_KEYS = {"score", "acc", "status", "executability", "pass_rate", "quality", "efficiency"}


def need(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if os.environ.get("REWARDBOX_NEED_FRAMEWORKS") == "1":
            pytest.fail(f"{module} is not installed (REWARDBOX_NEED_FRAMEWORKS=1; {e}): `make venv` installs the "
                        "frameworks extra")
        pytest.skip(f"{module} is not installed (the frameworks extra; {e})")


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """The tiny byte-level Llama after a short warm start on the weak demonstrator: it writes one of the task
    family's expressions most of the time, right for some tasks and wrong for others."""
    need("trl")
    from trainer.sft import sft
    from trainer.tasks import demonstrations
    from trainer.tiny import byte_tokenizer, tiny_llama

    tokenizer = byte_tokenizer()
    model = tiny_llama(tokenizer, seed=0)
    sft(model, tokenizer, demonstrations(1000, seed=0), steps=100, batch_size=8)
    return model, tokenizer


def deserved_binary(prompt: str, completion: str) -> float | None:
    """What a completion of the task family deserves under `binary`, worked out here from the task table (our own
    constants): 1 if it returns an expression of the table that agrees with the task's on every input. None when
    the completion is not exactly one of the table's expressions (not judged here)."""
    expression = completion.strip()
    if completion != f" {expression}\n" or expression not in FUNCTIONS.values():
        return None
    name = prompt.split("# ")[1].split("\n")[0]
    want = [eval(FUNCTIONS[name], {}, {"x": x}) for x in INPUTS]  # our own constants
    got = [eval(expression, {}, {"x": x}) for x in INPUTS]
    return 1.0 if got == want else 0.0


# -- TRL


def test_trl_grpo_trainer_trains_on_rewardbox_rewards_and_survives_an_outage(server, tiny_policy, tmp_path):
    need("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rewardbox.adapters.trl import reward_functions

    model, tokenizer = tiny_policy
    tasks = named_function_tasks()
    dataset = Dataset.from_list([{"prompt": t.prompt, "tests": json.dumps(t.tests)} for t in tasks])
    (live,) = reward_functions(Client(server), profile="binary")
    (gone,) = reward_functions(Client(dead_url(), retries=0), profile="binary", retry_budget_s=0.2)
    seen: list[tuple[str, str, float | None]] = []
    calls = []

    def rewardbox_reward(prompts, completions, **kwargs):
        calls.append(len(prompts))
        rewards = (live if len(calls) <= 3 else gone)(prompts, completions, **kwargs)  # the service dies at step 4
        seen.extend(zip(prompts, completions, rewards, strict=True))
        return rewards

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=16, num_generations=4,
                      max_completion_length=12, learning_rate=1e-4, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", seed=0, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[rewardbox_reward], args=args,
                          train_dataset=dataset)
    trainer.train()

    scored, outage = seen[:48], seen[48:]
    judged = [(r, deserved_binary(p, c)) for p, c, r in scored if deserved_binary(p, c) is not None]
    assert len(judged) >= 16, scored  # the continuation (prompt + completion) was what ran
    assert [r for r, _ in judged] == [d for _, d in judged]
    assert {d for _, d in judged} == {0.0, 1.0}
    assert all(r is None for _, _, r in outage) and len(outage) == 16  # masked by TRL, never a zero
    steps = [h for h in trainer.state.log_history if "rewardbox/infra_errors" in h]
    assert [h["rewardbox/infra_errors"] for h in steps] == [0.0, 0.0, 0.0, 16.0]
    assert all(h["rewardbox/executability"] >= 0 for h in steps[:3])


def test_trl_reads_arrow_merged_test_structs(server):
    """Dicts of different kinds in one column: Arrow merges them into one struct and fills missing keys with null."""
    need("datasets")
    from datasets import Dataset

    from rewardbox.adapters.trl import reward_functions

    rows = [{"prompt": "def f(x):\n    # double\n    return", "tests": named_function_tasks()[0].tests},
            {"prompt": "Write add.", "tests": {"kind": "assert", "test_code": "assert add(1, 2) == 3\n"}}]
    dataset = Dataset.from_list(rows)
    column = dataset["tests"]
    assert column[1]["cases"] is None and column[0]["test_code"] is None  # what TRL hands over
    (reward,) = reward_functions(Client(server), profile="binary")
    assert reward(prompts=dataset["prompt"], completions=[" x * 2\n", GOOD], tests=column) == [1.0, 1.0]


# -- verl


def _verl_config(tmp_path, **reward_kwargs):
    need("verl")
    import verl
    from omegaconf import OmegaConf

    from trainer.tiny import byte_tokenizer

    tokenizer_dir = tmp_path / "tokenizer"
    byte_tokenizer().save_pretrained(tokenizer_dir)
    config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
    adapter = os.path.join(os.path.dirname(__file__), "..", "trainer", "adapters", "verl.py")
    # what a user writes on the command line: reward.custom_reward_function.path=... +...reward_kwargs.url=...
    OmegaConf.update(config, "actor_rollout_ref.model.path", str(tokenizer_dir))
    OmegaConf.update(config, "reward.custom_reward_function.path", os.path.abspath(adapter))
    OmegaConf.update(config, "reward.custom_reward_function.name", reward_kwargs.pop("name", "compute_score_async"))
    OmegaConf.update(config, "reward.reward_manager.name", reward_kwargs.pop("manager", "naive"))
    OmegaConf.update(config, "reward.custom_reward_function.reward_kwargs", reward_kwargs, force_add=True)
    return config


def _verl_batch(tokenizer, responses: list[str], ground_truths: list):
    from tensordict import TensorDict
    from verl import DataProto

    prompt = tokenizer("Write add(a, b).", add_special_tokens=False)["input_ids"]
    encoded = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
    width = max(map(len, encoded))
    rows = [e + [tokenizer.pad_token_id] * (width - len(e)) for e in encoded]
    mask = [[1] * len(prompt) + [1] * len(e) + [0] * (width - len(e)) for e in encoded]
    n = len(responses)
    batch = TensorDict({"prompts": torch.tensor([prompt] * n), "responses": torch.tensor(rows),
                        "input_ids": torch.tensor([prompt + r for r in rows]), "attention_mask": torch.tensor(mask)},
                       batch_size=n)
    import numpy as np

    non_tensor = {"data_source": np.array(["mbpp"] * n, dtype=object),
                  "reward_model": np.array([{"ground_truth": g} for g in ground_truths], dtype=object),
                  "extra_info": np.array([{} for _ in range(n)], dtype=object)}
    return DataProto(batch=batch, non_tensor_batch=non_tensor), [len(e) for e in encoded]


def _run_verl_reward_loop(config, responses, ground_truths):
    """verl's RewardLoopWorker scores the batch and RewardLoopManager.compute_rm_score assembles it, on a thread of
    its own with its own event loop, as in a Ray actor; ray.get is the only piece replaced (no cluster)."""
    import ray
    from verl.experimental.reward_loop import reward_loop
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    def run():
        asyncio.set_event_loop(asyncio.new_event_loop())
        worker = reward_loop.RewardLoopWorker(config)
        data, lengths = _verl_batch(worker.input_tokenizer, responses, ground_truths)

        class InlineHandle:  # what ray.remote(RewardLoopWorker) would be, without the actor
            class compute_score_batch:  # noqa: N801 - mirrors the actor method
                @staticmethod
                def remote(chunk):
                    return worker.loop.run_until_complete(worker.compute_score_batch(chunk))

        manager = reward_loop.RewardLoopManager.__new__(reward_loop.RewardLoopManager)
        manager.config, manager.reward_model_manager = config, None
        manager.reward_manager_cls = resolve_reward_manager_cls(config)
        manager.reward_loop_workers = [InlineHandle]
        original, ray.get = ray.get, lambda refs: refs
        try:
            return manager.compute_rm_score(data), lengths
        finally:
            ray.get = original

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


@pytest.mark.parametrize("name, manager", [("compute_score_async", "naive"), ("compute_score", "dapo")])
def test_verl_reward_loop_assembles_rewardbox_scores_in_either_order(server, tmp_path, name, manager):
    config = _verl_config(tmp_path, url=server, profile="pass_rate", name=name, manager=manager)
    gt = json.dumps(ADD_ASSERTS)
    for responses, want in (([GOOD, HALF, NO_FENCE], [1.0, 0.5, 0.0]), ([NO_FENCE, HALF, GOOD], [0.0, 0.5, 1.0])):
        out, lengths = _run_verl_reward_loop(config, responses, [gt] * 3)
        scores = out.batch["rm_scores"]
        assert [scores[i, n - 1].item() for i, n in enumerate(lengths)] == want
        assert scores.sum().item() == sum(want)
        assert set(out.meta_info["reward_extra_keys"]) == VERL_KEYS
        assert list(out.non_tensor_batch["status"]) == [
            {1.0: "passed", 0.5: "failed", 0.0: "no_code"}[w] for w in want]
        assert list(out.non_tensor_batch["acc"]) == [1.0 if w == 1.0 else 0.0 for w in want]


def test_verl_reward_loop_stops_with_a_clear_error_on_an_outage_never_none(tmp_path):
    config = _verl_config(tmp_path, url=dead_url(), retry_budget_s=0.5)
    with pytest.raises(Exception, match="could not score a sample for 0.5 s") as raised:
        _run_verl_reward_loop(config, [GOOD], [json.dumps(ADD_ASSERTS)])
    assert type(raised.value).__name__ == "RewardboxUnavailable"
    config = _verl_config(tmp_path, url=dead_url(), retry_budget_s=0.2, on_infra_error="fallback",
                          fallback_score=-0.5)
    out, lengths = _run_verl_reward_loop(config, [GOOD, NO_FENCE], [json.dumps(ADD_ASSERTS)] * 2)
    assert out.batch["rm_scores"][0, lengths[0] - 1].item() == -0.5
    assert list(out.non_tensor_batch["status"]) == ["infra_error", "no_code"]


# -- verl multi-turn agent loop over sessions

AGENT_CHAT_TEMPLATE = (  # a hermes-style template for the tiny model (verl's "hermes" tool-call format)
    "{%- if tools %}<|system|>tools:{% for t in tools %}{{ t | tojson }}{% endfor %}\n{% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}<|assistant|>{{ m.content }}"
    "{%- for tc in m.tool_calls or [] %}<tool_call>{{ {'name': tc.function.name, 'arguments': tc.function.arguments}"
    " | tojson }}</tool_call>{% endfor %}<|endoftext|>\n"
    "{%- elif m.role == 'tool' %}<|tool|>{{ m.content }}\n"
    "{%- else %}<|{{ m.role }}|>{{ m.content }}\n{% endif %}{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}")
SESSION_TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
SESSION_CALC = {"pkg/__init__.py": b"", "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
                "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


FIX_CALL = _call("bash", command="sed -i 's/a - b/a + b/' pkg/calc.py")
SCRIPTS = {  # prompt marker -> the policy's turns
    "SUBMITS-FIX": [FIX_CALL, _call("submit"), "done"],
    "FIXES-NO-SUBMIT": [FIX_CALL, "done"],
    "SUBMITS-UNCHANGED": [_call("read_file", path="pkg/calc.py"), _call("submit"), "done"],
    "CALLS-NO-TOOL": ["I give up"],
}


class ScriptedLLMServer:
    """verl's LLM server (vLLM or SGLang behind LLMServerClient.generate), a boundary we do not own: each turn of a
    trajectory is the next line of the script its prompt names, as token ids of the tiny model's tokenizer."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.turns = tokenizer, {}

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        script = next(v for k, v in SCRIPTS.items() if k in self.tokenizer.decode(prompt_ids))
        turn = self.turns[request_id] = self.turns.get(request_id, -1) + 1
        text = script[min(turn, len(script) - 1)] + self.tokenizer.eos_token
        return TokenOutput(token_ids=self.tokenizer(text, add_special_tokens=False)["input_ids"])


@pytest.fixture(scope="module")
def tiny_chat_model(tmp_path_factory) -> str:
    """The tiny byte-level Llama saved as verl loads a model (config, weights, tokenizer with a chat template)."""
    from trainer.tiny import byte_tokenizer, tiny_llama

    path = tmp_path_factory.mktemp("tiny-chat")
    tokenizer = byte_tokenizer()
    tokenizer.chat_template = AGENT_CHAT_TEMPLATE
    tiny_llama(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def _verl_agent_config(model: str, tool_config: str, **reward_kwargs):
    """What a user sets for a multi-turn run with the documented tools.yaml and reward function."""
    need("verl.experimental.agent_loop")
    import verl
    from omegaconf import OmegaConf

    config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
    root = os.path.join(os.path.dirname(__file__), "..")
    for key, value in {
            "actor_rollout_ref.model.path": model,
            "actor_rollout_ref.rollout.name": "vllm",  # read, never started: the LLM server is scripted
            "actor_rollout_ref.rollout.prompt_length": 4096, "actor_rollout_ref.rollout.response_length": 2048,
            "actor_rollout_ref.rollout.agent.default_agent_loop": "tool_agent",
            "actor_rollout_ref.rollout.multi_turn.enable": True,
            "actor_rollout_ref.rollout.multi_turn.format": "hermes",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 5,
            "actor_rollout_ref.rollout.multi_turn.tool_config_path": tool_config,
            "reward.custom_reward_function.path": os.path.abspath(f"{root}/trainer/adapters/verl_session.py"),
            "reward.custom_reward_function.name": "compute_score",
            "reward.custom_reward_function.reward_kwargs": reward_kwargs}.items():
        OmegaConf.update(config, key, value, force_add=True)
    return config


def _agent_rows(repo_id: str, markers: list[str]):
    """Rows as verl's RLHFDataset hands them to the agent loop; the task rides in the submit tool's entry only."""
    import numpy as np
    from verl import DataProto

    tools_kwargs = {"submit": {"create_kwargs": {"repo_id": repo_id, "tests": json.dumps(SESSION_TESTS)}}}
    rows = [{"raw_prompt": [{"role": "user", "content": f"Fix add in pkg/calc.py. {m}"}], "agent_name": "tool_agent",
             "data_source": "rewardbox/session", "reward_model": {"ground_truth": ""},
             "extra_info": {"tools_kwargs": tools_kwargs}, "tools_kwargs": tools_kwargs} for m in markers]
    return DataProto.from_single_dict({k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]})


def _run_verl_agent_loop(config, batch):
    """verl's AgentLoopWorker runs ToolAgentLoop on every row, with the tools built from the tool config, and has
    each finished trajectory scored by a RewardLoopWorker with the custom reward function (the reward manager's
    own path); Ray actors become plain objects, the LLM server is scripted."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def run():
        rewards = RewardLoopWorker(config)

        class RewardHandle:  # what ray.remote(RewardLoopWorker) would be, without the actor
            class compute_score:  # noqa: N801 - mirrors the actor method
                @staticmethod
                def remote(data):
                    return rewards.compute_score(data)

        worker = AgentLoopWorker(config, ScriptedLLMServer(rewards.input_tokenizer), None, [RewardHandle])
        return await worker.generate_sequences(batch)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


@pytest.fixture(scope="module")
def session_calc_id(server) -> str:
    import httpx

    from rewardbox.archive import repo_archive

    r = httpx.post(f"{server}/repos", content=repo_archive(SESSION_CALC), headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def test_verl_agent_loop_rewards_each_rollout_with_its_session_grade(server, session_calc_id, tiny_chat_model,
                                                                     monkeypatch):
    """The documented tools.yaml and reward function in verl's real loop: the grade is the rollout's reward in
    verl's batch, whether the policy submitted or not, and no session is left open."""
    monkeypatch.setenv("REWARDBOX_URL", server)  # what the documented tools.yaml reads
    documented = os.path.join(os.path.dirname(__file__), "..", "trainer", "adapters", "verl_tools.yaml")
    config = _verl_agent_config(tiny_chat_model, os.path.abspath(documented), url=server)
    markers = list(SCRIPTS)
    out = _run_verl_agent_loop(config, _agent_rows(session_calc_id, markers))

    prompt_length = out.batch["prompts"].shape[1]
    last = out.batch["attention_mask"][:, prompt_length:].sum(-1) - 1
    rewards = [out.batch["rm_scores"][i, last[i]].item() for i in range(len(markers))]
    assert dict(zip(markers, rewards, strict=True)) == {
        "SUBMITS-FIX": 1.0, "FIXES-NO-SUBMIT": 1.0, "SUBMITS-UNCHANGED": 0.0, "CALLS-NO-TOOL": 0.0}
    assert out.batch["rm_scores"].sum().item() == 2.0  # nothing anywhere else
    assert list(out.non_tensor_batch["status"]) == ["passed", "passed", "failed", "failed"]
    assert list(out.non_tensor_batch["submitted"]) == [1.0, 0.0, 1.0, 0.0]
    assert list(out.non_tensor_batch["graded"]) == [1.0] * 4
    assert list(out.non_tensor_batch["tool_rewards"][0]) == [0.0, 1.0]  # submit's step reward: the same grade
    states = out.non_tensor_batch["rewardbox"]
    assert states[3] is None or "session_id" not in states[3]  # no tool call, no session: the repo as it was
    with Client(server, retries=0) as client:
        for state in states[:3]:  # closed by submit or by the reward function
            with pytest.raises(Exception, match="410"):
                client.call("POST", f"/sessions/{state['session_id']}/exec", json={"command": "true"})


def test_verl_agent_loop_never_scores_an_unreachable_session_as_zero(session_calc_id, tiny_chat_model, tmp_path):
    """Tools that cannot reach the service: the trajectory is not graded, so training stops with the reason, or
    takes the fallback the user set, said out loud; never a silent 0."""
    from omegaconf import OmegaConf

    documented = os.path.join(os.path.dirname(__file__), "..", "trainer", "adapters", "verl_tools.yaml")
    tools = OmegaConf.load(documented)
    for tool in tools.tools:
        tool.config.url, tool.config.retries = dead_url(), 0
    OmegaConf.save(tools, tmp_path / "tools.yaml")
    batch = _agent_rows(session_calc_id, ["SUBMITS-FIX"])
    config = _verl_agent_config(tiny_chat_model, str(tmp_path / "tools.yaml"), url=dead_url(), retry_budget_s=0.2)
    with pytest.raises(Exception, match="could not grade a trajectory .a tool call failed") as raised:
        _run_verl_agent_loop(config, batch)
    assert type(raised.value).__name__ == "RewardboxUnavailable"
    config = _verl_agent_config(tiny_chat_model, str(tmp_path / "tools.yaml"), url=dead_url(), retry_budget_s=0.2,
                                on_infra_error="fallback", fallback_score=-0.5)
    out = _run_verl_agent_loop(config, _agent_rows(session_calc_id, ["SUBMITS-FIX"]))
    assert out.batch["rm_scores"].sum().item() == -0.5
    assert list(out.non_tensor_batch["status"]) == ["infra_error"]
    assert list(out.non_tensor_batch["graded"]) == [0.0]


# -- OpenRLHF


class ScriptedEngine:
    """vLLM's place in OpenRLHF (a boundary we do not own): answers each prompt with a fixed response."""

    def __init__(self, tokenizer, response: str) -> None:
        self.ids = tokenizer(response, add_special_tokens=False)["input_ids"]
        self.response = response

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=self.ids, text=self.response, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def _openrlhf_rollouts(url: str, cases: list[tuple[str, object]]) -> list[dict]:
    need("openrlhf")
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from trainer.tiny import byte_tokenizer

    tokenizer = byte_tokenizer()
    executor = SingleTurnAgentExecutor(f"{url}/openrlhf/get_reward")
    params = SimpleNamespace(max_tokens=64, logprobs=None)

    async def run():
        return await asyncio.gather(*(
            executor.execute("<|user|>Write add(a, b).<|assistant|>", label, params, 512, tokenizer,
                             ScriptedEngine(tokenizer, response)) for response, label in cases))

    return asyncio.run(run())


def test_openrlhf_remote_rm_client_gets_rewards_for_dict_and_json_labels(server):
    label = {"tests": {"kind": "assert", "test_code": "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"},
             "profile": "binary"}
    outputs = _openrlhf_rollouts(server, [(GOOD, label), (HALF, json.dumps(label)), ("no code", label)])
    assert [o["reward"] for o in outputs] == [[1.0], [0.0], [0.0]]
    assert [o["scores"] for o in outputs] == [[1.0], [0.5], [0.0]]
    assert len({tuple(o["extra_logs"]) for o in outputs}) == 1  # OpenRLHF stacks them: same keys everywhere
    for o in outputs:  # what OpenRLHF's samples generator does with each extra log
        for value in o["extra_logs"].values():
            torch.tensor([value])
    assert [torch.isnan(torch.tensor(o["extra_logs"]["efficiency"])).item() for o in outputs] == [True] * 3


def test_openrlhf_endpoint_absorbs_a_sandbox_killed_mid_rollout():
    """The sandboxes die under a running item; the endpoint scores it again on their replacements and OpenRLHF's
    client (five tries, one second apart) never sees the fault."""
    proc, url = start_server({"REWARDBOX_BACKEND": "docker", "REWARDBOX_RESULT_CACHE_SIZE": "0"})
    try:
        slow_good = "```python\nimport time\ntime.sleep(3)\ndef add(a, b):\n    return a + b\n```"
        label = {"tests": {"kind": "assert", "test_code": "assert add(1, 2) == 3\n"}, "profile": "binary"}

        def kill_sandboxes():
            time.sleep(1.5)
            ids = subprocess.run(["docker", "ps", "-q", "--filter", f"label=rewardbox.owner=vm:{proc.pid}"],
                                 capture_output=True, text=True, check=True).stdout.split()
            assert ids
            subprocess.run(["docker", "kill", *ids], capture_output=True, check=True)

        killer = threading.Thread(target=kill_sandboxes)
        killer.start()
        (output,) = _openrlhf_rollouts(url, [(slow_good, label)])
        killer.join()
        assert output["reward"] == [1.0]
        replaced = Client(url).info()
        assert replaced["sandbox"]["pool_size"] == 2
    finally:
        stop_server(proc)


# -- SandboxFusion SDK


def test_sandbox_fusion_sdk_datasets_against_rewardbox(server, humaneval):
    sf = need("sandbox_fusion")
    import httpx

    config = sf.TestConfig()
    prompts = sf.get_prompts(sf.GetPromptsRequest(dataset="humaneval_python", config=config, offset=1, limit=3),
                             endpoint=server)
    assert [p.id for p in prompts] == ["HumanEval/1", "HumanEval/2", "HumanEval/3"]
    assert prompts[0].prompt == humaneval[1]["prompt"] and "canonical_solution" in prompts[0].labels
    by_index = sf.get_prompt_by_id(sf.GetPromptByIdRequest(dataset="humaneval_python", config=config, id=2),
                                   endpoint=server)
    assert by_index.id == "HumanEval/2"
    for p in humaneval[:5]:  # pretrain style: the completion continues the prompt, trailing text cut off
        result = sf.submit(sf.SubmitRequest(dataset="humaneval_python", id=p["task_id"], config=config,
                                            completion=p["canonical_solution"] + "\n\ndef random"), endpoint=server)
        assert result.accepted and result.tests[0].passed
    wrong = sf.submit(sf.SubmitRequest(dataset="humaneval_python", id=0, config=config,
                                       completion="    return True\n"), endpoint=server)
    assert not wrong.accepted and wrong.tests[0].exec_info.run_result.return_code == 1
    freeform = sf.TestConfig(extra={"is_freeform": True})
    fenced = "Here:\n```python\n" + humaneval[0]["prompt"] + humaneval[0]["canonical_solution"] + "\n```"
    result = sf.submit(sf.SubmitRequest(dataset="humaneval_python", id=0, config=freeform, completion=fenced),
                       endpoint=server)
    assert result.accepted and result.extracted_type == "fenced"
    metrics = httpx.post(f"{server}/get_metrics", json={"dataset": "humaneval_python", "config": {},
                                                         "results": [json.loads(result.json()),
                                                                     json.loads(wrong.json())]}).json()
    assert metrics["samples"] == 2 and metrics["pass@1"] == 0.5
    assert httpx.get(f"{server}/v1/ping").json() == "pong"
    assert "humaneval_rust" in httpx.get(f"{server}/list_datasets").json()
    ids = httpx.post(f"{server}/list_ids", json={"dataset": "humaneval_python", "config": {}}).json()
    assert len(ids) == 164
    assert httpx.post(f"{server}/run_jupyter", json={"cells": ["1"]}).status_code == 501
    unknown = httpx.post(f"{server}/submit", json={"dataset": "nope", "id": 0, "completion": "", "config": {}})
    assert unknown.status_code == 400 and "no eval class" in unknown.json()["detail"]
    ran = sf.run_code(sf.RunCodeRequest(code="print(1)", language="python"), endpoint=server)
    assert ran.run_result.stdout == "1\n"


def test_sandbox_fusion_sdk_humaneval_rust(server):
    sf = need("sandbox_fusion")
    from service.compat.humaneval_rust import has_tests, problems

    problem = next(p for p in problems() if has_tests(p))
    config = sf.TestConfig()
    good = sf.submit(sf.SubmitRequest(dataset="humaneval_rust", id=problem["task_id"], config=config,
                                      completion=problem["canonical_solution"] + "\n\nfn unrelated("), endpoint=server)
    assert good.accepted
    bad = sf.submit(sf.SubmitRequest(dataset="humaneval_rust", id=problem["task_id"], config=config,
                                     completion="    not rust at all\n}"), endpoint=server)
    assert not bad.accepted and bad.tests[0].exec_info.run_result is None  # a compile error, as SandboxFusion says
    assert bad.tests[0].exec_info.compile_result.return_code == 1
