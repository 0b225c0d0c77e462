"""The PPO policy client (trainer/ppo.py) against the real service: learning, the command line, null rewards."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainer.evaluate import evaluate
from trainer.ppo import Config, DeviceUnavailable, exact_kl, group_scores, resolve_device, train
from trainer.tasks import FUNCTIONS, named_function_task
from trainer.tiny import byte_tokenizer, teacher_of, tiny_llama, warm_started

# Measured (README, "Policy client (PPO)"): last-10 minus first-10 mean reward 0.07-0.10 over seeds 0-3.
MIN_REWARD_GAIN = 0.04
# The in-line loop's first minibatch ratio differs from 1 only by float noise (minibatch vs whole-batch forward).
RATIO_NOISE = 1e-3
# Measured (README, "Teacher term"), seed 0, kl_coef 0.02: teacher pass rate 0.905, student 0.462; after 15 steps
# the exact KL to the teacher over steps 11-15 is 0.28x its steps 1-3 value with distillation and 0.41x the value of
# the reward-alone run, whose pass rate the distilled student matches (0.867 vs 0.876, 0.41 above the student's).
MIN_TEACHER_LEAD = 0.25
DISTILL_STEPS = 15
MAX_KL_LEFT = 0.5  # of its start, with distillation
MAX_KL_VS_REWARD_ALONE = 0.7
MIN_PASS_RATE_GAIN = 0.25  # over the student's evaluation
# Measured (README, "Teacher term", sparse reward): a weak student (demonstrator right 10% of the time, pass rate
# 0.18) on the binary profile, lr 1e-3, teacher_loss "exact": pass rate over steps 21-30 0.477 with the teacher term
# against 0.297 by the reward alone (seed 0; seed 1: 0.495 against 0.209).
SPARSE_STEPS = 30
MIN_SPARSE_LEAD = 0.1  # distilled minus reward-alone pass rate, steps 21-30 (measured 0.18)


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


def saved(tmp_path_factory: pytest.TempPathFactory, name: str, model, tokenizer) -> str:
    """Save like any pretrained checkpoint, to be loaded back by path."""
    path = tmp_path_factory.mktemp(name)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def warm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny model after its SFT warm start, saved like any pretrained checkpoint and loaded back by path."""
    return saved(tmp_path_factory, "tiny-sft", *warm_started(seed=0))


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
    from rewardbox import Client
    from trainer.agent import SessionGrader, task_repo

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


def test_exact_kl_is_zero_for_equal_distributions_and_matches_the_definition():
    p = torch.log_softmax(torch.tensor([[[2.0, 0.0, -1.0]]]), -1)
    q = torch.log_softmax(torch.tensor([[[0.0, 0.0, 0.0]]]), -1)
    assert exact_kl(p, p).item() == pytest.approx(0.0, abs=1e-7)
    assert exact_kl(p, q).item() == pytest.approx((p.exp() * (p - q)).sum().item())
    assert exact_kl(p, q).item() > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where there is no GPU")
def test_asking_for_cuda_without_a_gpu_fails_before_anything_starts():
    with pytest.raises(DeviceUnavailable, match="sees no CUDA device"):
        resolve_device("cuda")
    for command in ([sys.executable, "bench/ppo_throughput.py", "--device", "cuda"],
                    [sys.executable, "-m", "trainer.ppo", "--tiny", "--device", "cuda"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, command
        assert "sees no CUDA device" in done.stderr and "--device cpu" in done.stderr, done.stderr[-2000:]
        assert "Traceback" not in done.stderr  # a message, not a crash


def test_overlapped_scoring_trains_on_the_log_probs_of_the_policy_that_sampled(server: str, warm_checkpoint: str,
                                                                               tmp_path):
    """With overlap, batch t+1 is sampled before the update on batch t: its PPO ratio must start away from 1 (the
    update in between moved the policy). Log-probs recomputed at training time would make it start at exactly 1."""
    common = dict(url=server, model=warm_checkpoint, steps=3, prompts_per_step=4, group_size=8, learning_rate=3e-4)
    inline = train(Config(out=str(tmp_path / "inline"), **common))
    overlapped = train(Config(out=str(tmp_path / "overlap"), overlap=True, **common))
    assert [row["policy_lag"] for row in inline] == [0, 0, 0]
    assert [row["policy_lag"] for row in overlapped] == [0, 1, 1]
    assert all(row["first_ratio_dev"] < RATIO_NOISE for row in inline)
    assert overlapped[0]["first_ratio_dev"] < RATIO_NOISE  # the first batch has no update before it
    assert all(row["first_ratio_dev"] > 10 * RATIO_NOISE for row in overlapped[1:])
    assert all(row["reward"] is not None and row["time"]["reward_s"] >= 0 for row in overlapped)


@pytest.fixture(scope="module")
def weak_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A student whose demonstrator was right 10% of the time: on the binary profile most of its groups all fail."""
    return saved(tmp_path_factory, "tiny-weak", *warm_started(seed=0, p_right=0.1))


@pytest.fixture(scope="module")
def teacher_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    return saved(tmp_path_factory, "tiny-teacher", *teacher_of(seed=0))


def test_distillation_pulls_the_student_toward_a_better_teacher_where_the_reward_alone_does_not(
        server: str, warm_checkpoint: str, teacher_checkpoint: str, tmp_path):
    from trainer.ppo import load_model

    tokenizer = byte_tokenizer()
    cpu = torch.device("cpu")
    teacher_eval = evaluate(load_model(teacher_checkpoint, cpu), tokenizer, server, samples=8)
    student_eval = evaluate(load_model(warm_checkpoint, cpu), tokenizer, server, samples=8)
    assert teacher_eval.pass_rate - student_eval.pass_rate >= MIN_TEACHER_LEAD, (teacher_eval, student_eval)

    # The exact teacher loss (the KL over the vocabulary, differentiated): the reward form (the KL as a reward
    # penalty) showed no pull measurable in 15 steps on a 2026-12-02 machine (teacher KL over steps 4-15: 0.658
    # distilled vs 0.650 alone), where the exact loss ends at 0.19 vs 0.57.
    common = dict(url=server, model=warm_checkpoint, teacher=teacher_checkpoint, seed=0, steps=DISTILL_STEPS,
                  learning_rate=3e-4, kl_coef=0.02, teacher_loss="exact")
    alone = train(Config(out=str(tmp_path / "reward"), teacher_kl_coef=0.0, **common))  # the teacher only measured
    distilled = train(Config(out=str(tmp_path / "distill"), teacher_kl_coef=1.0, **common))

    def last(log: list[dict], key: str) -> float:
        rows = log[-5:]
        return sum(r["components"]["pass_rate"] if key == "pass_rate" else r[key] for r in rows) / len(rows)

    kl_start = sum(r["kl_teacher_exact"] for r in distilled[:3]) / 3
    kl_end, kl_alone = last(distilled, "kl_teacher_exact"), last(alone, "kl_teacher_exact")
    assert kl_end <= MAX_KL_LEFT * kl_start, (kl_start, kl_end)
    assert kl_end <= MAX_KL_VS_REWARD_ALONE * kl_alone, (kl_end, kl_alone)
    assert last(distilled, "pass_rate") - student_eval.pass_rate >= MIN_PASS_RATE_GAIN, (
        last(distilled, "pass_rate"), student_eval, last(alone, "pass_rate"))


def test_distillation_raises_a_weak_students_pass_rate_faster_than_a_sparse_reward_alone(
        server: str, weak_checkpoint: str, teacher_checkpoint: str, tmp_path):
    common = dict(url=server, model=weak_checkpoint, teacher=teacher_checkpoint, seed=0, steps=SPARSE_STEPS,
                  learning_rate=1e-3, kl_coef=0.02, profile="binary", teacher_loss="exact")
    alone = train(Config(out=str(tmp_path / "reward"), teacher_kl_coef=0.0, **common))
    distilled = train(Config(out=str(tmp_path / "distill"), teacher_kl_coef=1.0, **common))

    def late_pass_rate(log: list[dict]) -> float:
        return sum(r["components"]["pass_rate"] for r in log[-10:]) / 10

    assert late_pass_rate(distilled) - late_pass_rate(alone) >= MIN_SPARSE_LEAD, (
        late_pass_rate(distilled), late_pass_rate(alone))
