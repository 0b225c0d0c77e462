"""The PPO policy client (trainer/ppo.py) against the real service: learning, the command line, null rewards."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainer.ppo import Config, group_scores, train
from trainer.tasks import FUNCTIONS, named_function_task
from trainer.tiny import byte_tokenizer, tiny_llama, warm_started

# Measured (README, "Policy client (PPO)"): last-10 minus first-10 mean reward 0.07-0.10 over seeds 0-3.
MIN_REWARD_GAIN = 0.04


def test_group_scores_leave_null_rewards_out_of_the_baseline_and_the_update():
    scores, valid = group_scores([1.0, None, 0.0, 0.5, None, None, 0.2, 0.9], group_size=4, eps=0.0)
    assert valid.tolist() == [True, False, True, True, False, False, True, True]
    assert scores[1] == 0 and scores[4] == 0 and scores[5] == 0
    assert scores[:4][valid[:4]].sum().abs() < 1e-6  # centred on the mean of the three scored members only
    assert scores[0] == pytest.approx((1.0 - 0.5) / 0.5)  # sample std of (1.0, 0.0, 0.5) is 0.5


def test_group_with_one_scored_completion_teaches_nothing():
    scores, valid = group_scores([0.7, None, None, None], group_size=4, eps=0.05)
    assert valid.tolist() == [True, False, False, False]
    assert scores.tolist() == [0.0, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def warm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny model after its SFT warm start, saved like any pretrained checkpoint and loaded back by path."""
    model, tokenizer = warm_started(seed=0)
    path = tmp_path_factory.mktemp("tiny-sft")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_ppo_raises_the_reward_of_a_warm_started_model(server: str, warm_checkpoint: str, tmp_path):
    log = train(Config(url=server, model=warm_checkpoint, out=str(tmp_path), seed=0, steps=40, learning_rate=3e-4))
    rewards = [row["reward"] for row in log]
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    assert last - first >= MIN_REWARD_GAIN, f"reward did not rise: first 10 {first:.3f}, last 10 {last:.3f}"


def test_ppo_writes_one_log_line_per_step_and_a_loadable_checkpoint(server: str, warm_checkpoint: str, tmp_path):
    train(Config(url=server, model=warm_checkpoint, out=str(tmp_path), steps=2, prompts_per_step=2, group_size=4))
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for key in ("reward", "components", "kl_ref", "entropy", "pg_loss", "time", "tokens_per_s", "reward_wait_share"):
        assert rows[-1][key] is not None, key
    assert set(rows[-1]["components"]) == {"executability", "pass_rate", "quality", "efficiency"}
    AutoModelForCausalLM.from_pretrained(tmp_path / "final", local_files_only=True)


def test_null_rewards_are_counted_and_left_out_of_the_update(server: str, tmp_path):
    valid = named_function_task("double")
    broken = {"kind": "function", "entry_point": "f", "cases": []}  # the service answers invalid_input, reward null
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": valid.prompt, "tests": valid.tests}) + "\n"
                     + json.dumps({"prompt": "def f(x):\n    # triple\n    return", "tests": broken}) + "\n")
    tokenizer = byte_tokenizer()
    policy = tiny_llama(tokenizer, seed=0)
    [row] = train(Config(url=server, tasks=str(tasks), out=str(tmp_path / "run"), steps=1, prompts_per_step=2,
                         group_size=4, max_new_tokens=24, learning_rate=1e-3), policy, tokenizer)
    assert row["null_rewards"] == 4
    assert row["statuses"].get("invalid_input") == 4
    assert row["reward"] is not None and 0.0 <= row["reward"] <= 1.0  # the mean of the four scored completions
    assert row["pg_loss"] is not None  # the update ran, over the scored completions only


def test_cli_trains_the_tiny_model_then_loads_its_checkpoint_with_itself_as_teacher(server: str, tmp_path):
    common = ["--url", server, "--steps", "1", "--prompts-per-step", "2", "--group-size", "2",
              "--max-new-tokens", "32"]
    first = tmp_path / "first"
    subprocess.run([sys.executable, "-m", "trainer.ppo", "--tiny", "--tiny-sft-steps", "20", "--out", str(first),
                    *common], check=True, timeout=300)
    second = tmp_path / "second"
    subprocess.run([sys.executable, "-m", "trainer.ppo", "--model", str(first / "final"), "--teacher",
                    str(first / "final"), "--out", str(second), *common], check=True, timeout=300)
    [row] = [json.loads(line) for line in (second / "log.jsonl").read_text().splitlines()]
    assert row["kl_teacher"] == pytest.approx(0.0, abs=1e-4)  # the teacher is the policy: no distillation pull yet


def test_log_probs_of_a_left_padded_batch_match_each_row_scored_alone():
    """GPT-2's absolute positions make this fail unless positions count real tokens only (RoPE alone would not)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from trainer.ppo import Rollouts, sample, token_logprobs

    tokenizer = byte_tokenizer()
    torch.manual_seed(1)
    policy = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                        eos_token_id=tokenizer.eos_token_id,
                                        pad_token_id=tokenizer.pad_token_id)).eval()
    prompts = ["def f(x):\n    # double\n    return", "def f(x):\n    # remainder by three\n    return"]
    torch.manual_seed(0)
    batch = sample(policy, tokenizer, prompts, Config(max_new_tokens=6))
    with torch.no_grad():
        together, _ = token_logprobs(policy, batch, temperature=1.0)
        for i, prompt in enumerate(prompts):
            prompt_ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
            ids = torch.cat([prompt_ids, batch.input_ids[i:i + 1, batch.n_prompt:]], dim=1)
            alone = Rollouts(ids, torch.ones_like(ids), batch.mask[i:i + 1], prompt_ids.shape[1], batch.texts[i:i + 1])
            logp, _ = token_logprobs(policy, alone, temperature=1.0)
            assert torch.allclose(logp[batch.mask[i:i + 1].bool()], together[i][batch.mask[i].bool()], atol=1e-4)


def test_ppo_agent_mode_acts_each_completion_out_in_a_session_before_it_is_graded(server: str, warm_checkpoint: str,
                                                                                  tmp_path):
    from trainer.agent import SessionGrader, task_repo
    from trainer.client import Client

    log = train(Config(url=server, model=warm_checkpoint, out=str(tmp_path), steps=1, prompts_per_step=2,
                       group_size=4, agent=True))
    assert log[0]["null_rewards"] == 0 and sum(log[0]["statuses"].values()) == 8, log[0]
    task = named_function_task(next(iter(FUNCTIONS)))
    files, tests = task_repo(task)
    assert set(files) == {"solution.py", "tests/test_solution.py"} and len(tests["fail_to_pass"]) > 1
    with Client(server) as client:
        grader = SessionGrader(client)
        right, wrong = grader.grade([task, task], [task.prompt + task.solution, "def f(x):\n    return None\n"])
        grader.close()
    assert right["status"] == "passed" and right["reward"] == 1.0, right
    assert wrong["status"] == "failed" and "failed" in wrong["details"]["agent_transcript"][-1], wrong
