"""PPO for a causal-LM policy scored by rewardbox: the whole algorithm in one file, read top to bottom (after CleanRL).

    python -m trainer.ppo --url http://127.0.0.1:8000 --tiny --learning-rate 3e-4 --out runs/demo  # no download
    python -m trainer.ppo --url http://127.0.0.1:8000 --model PATH --tasks tasks.jsonl   # a local checkpoint
    python -m trainer.ppo --url ... --model PATH --teacher TEACHER --overlap --device cuda

One step:
  1. sample `group_size` completions for each of `prompts_per_step` prompts from the policy, and compute with that
     same policy (the behaviour policy) the log-probabilities PPO's ratio is taken against;
  2. score all of them in one POST /reward/batch (`rewardbox.Client`; with `--overlap`, `rewardbox.AsyncClient` in
     the background while the next step is sampled); a completion whose reward is null (infra error, invalid
     input) is dropped from the update: it is never a zero. With `--agent` each completion is
     instead acted out in an agent session (a fork of its task's base session: write, compile, test, submit;
     trainer/agent.py) and the session's reward is used;
  3. per-token rewards: the test reward, normalised within its prompt's group, on the last token; minus the KL to
     the frozen reference model on every token; minus (optional) the reverse KL to a teacher model on the student's
     own samples (on-policy distillation). Both KLs enter as the per-sample estimate log p - log q (k1 of
     Schulman's "Approximating KL divergence"), whose expectation under the policy is the KL; the exact KLs over the
     vocabulary are logged (`kl_ref_exact`, `kl_teacher_exact`, per completion) to see what the terms do;
  4. advantages: returns-to-go of the per-token rewards (gamma = 1). No value head: the group mean is the baseline,
     as in GRPO, so advantages are group-normalised and no critic has to be trained;
  5. `ppo_epochs` passes of the clipped surrogate objective over minibatches.

`--device auto` takes CUDA when present (bf16 autocast), else CPU; `--device cuda` fails at once without a GPU.
Writes `log.jsonl` (one line a step: reward, components, KL, entropy, timings) and checkpoints (`save_pretrained`)
to `out`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from rewardbox import Client
from rewardbox.extract import program_of
from trainer.agent import SessionGrader
from trainer.scoring import BackgroundScorer
from trainer.tasks import Task, load_tasks, named_function_tasks

COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")
TEACHER_LOSSES = ("reward", "token", "exact")  # Config.teacher_loss


@dataclass
class Config:
    url: str = os.environ.get("REWARDBOX_URL", "http://127.0.0.1:8000")
    model: str | None = None  # a local checkpoint directory (save_pretrained layout); None: the tiny demo model
    teacher: str | None = None  # a local checkpoint sharing the policy's tokenizer: enables the distillation term
    tasks: str | None = None  # JSONL of {"prompt", "tests"}; None: the generated named-function family
    out: str = "runs/ppo"
    seed: int = 0
    steps: int = 50
    prompts_per_step: int = 8
    group_size: int = 8  # completions per prompt; the group is the baseline
    max_new_tokens: int = 48
    temperature: float = 1.0
    learning_rate: float = 1e-5  # for pretrained checkpoints; the tiny demo model learns at 3e-4
    ppo_epochs: int = 2
    minibatch_size: int = 32  # completions per optimiser step
    clip_eps: float = 0.2
    kl_coef: float = 0.5  # weight of KL(policy || reference) in the per-token reward (README: the kl_coef sweep)
    teacher_kl_coef: float = 1.0  # weight of the reverse KL to the teacher (only with `teacher`)
    # how the teacher term enters: "reward" (its per-sample estimate log p - log q summed into the returns-to-go),
    # "token" (that estimate as each token's own advantage, gamma 0), or "exact" (the reverse KL over the whole
    # vocabulary at each sampled position, added to the loss and differentiated: no sampling noise)
    teacher_loss: str = "reward"
    group_std_eps: float = 0.05  # keeps groups that differ only by timing jitter from being blown up to +-1
    max_grad_norm: float = 1.0
    profile: str = "seed"  # rewardbox reward profile
    save_every: int = 0  # checkpoint every N steps (0: only the final one)
    tiny_sft_steps: int = 400  # supervised warm-start steps for the tiny model
    agent: bool = False  # agent mode (trainer/agent.py): each completion acted out in a forked session, then graded
    device: str = "auto"  # auto (CUDA when present, bf16 autocast), cpu, or cuda[:N] (fails fast without CUDA)
    overlap: bool = False  # score step t while step t+1 is generated (one update of policy lag, see `train`)


# -- models


def load_model(path: str, device: torch.device) -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device)  # type: ignore[arg-type]  # transformers types .to() for a model, not a device
    model.eval()  # dropout off for good: PPO's ratio must compare the same function before and after a step
    return model


def load_policy(cfg: Config, device: torch.device) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    if cfg.model is not None:
        tokenizer = AutoTokenizer.from_pretrained(cfg.model, local_files_only=True)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        return load_model(cfg.model, device), tokenizer
    from trainer.tiny import warm_started

    policy, tokenizer = warm_started(seed=cfg.seed, sft_steps=cfg.tiny_sft_steps)
    return policy.to(device), tokenizer  # type: ignore[arg-type]  # transformers types .to() for a model, not a device


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


def sync(device: torch.device) -> float:
    """perf_counter after the device has finished its queued work, so that phase timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


# -- rollouts


@dataclass
class Rollouts:
    input_ids: torch.Tensor  # [B, P + T] prompt (left-padded) then completion
    attention_mask: torch.Tensor  # [B, P + T]
    mask: torch.Tensor  # [B, T] completion tokens up to and including the first end-of-text
    n_prompt: int  # P
    texts: list[str]  # decoded completions


@torch.no_grad()
def sample(policy: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: list[str], cfg: Config) -> Rollouts:
    device = policy.device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    # A generation config of our own, not the checkpoint's: its repetition penalty or top-p would make the sampling
    # distribution differ from the one whose log-probabilities PPO computes.
    settings = GenerationConfig(do_sample=True, temperature=cfg.temperature, top_k=0, top_p=1.0,
                                max_new_tokens=cfg.max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id)
    with autocast(device):
        out = policy.generate(**enc, generation_config=settings)  # type: ignore[operator]  # transformers' annotations make .generate a Tensor
    n_prompt = enc["input_ids"].shape[1]
    completion = out[:, n_prompt:]
    is_eos = (completion == tokenizer.eos_token_id).int()
    mask = (is_eos.cumsum(1) - is_eos) == 0  # nothing after the first end-of-text
    texts = [tokenizer.decode(ids[m], skip_special_tokens=True) for ids, m in zip(completion, mask, strict=True)]
    attention = torch.cat([enc["attention_mask"], mask.long()], dim=1)
    return Rollouts(out, attention, mask.float(), n_prompt, texts)  # type: ignore[arg-type]  # decode of one sequence is a str


def log_distributions(model: PreTrainedModel, r: Rollouts, temperature: float,
                      rows: torch.Tensor | slice = slice(None)) -> torch.Tensor:
    """Log-softmax over the vocabulary at each completion position of `rows`: [rows, T, V], float32."""
    ids, attention = r.input_ids[rows], r.attention_mask[rows]
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)  # left padding: positions count real tokens only
    with autocast(model.device):
        logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids).logits
    return torch.log_softmax(logits[:, r.n_prompt - 1:-1].float() / temperature, dim=-1)


def token_logprobs(model: PreTrainedModel, r: Rollouts, temperature: float,
                   rows: torch.Tensor | slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each sampled completion token and the entropy of the distribution it came from: [B, T]."""
    logp_all = log_distributions(model, r, temperature, rows)
    logp = logp_all.gather(-1, r.input_ids[rows][:, r.n_prompt:, None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def group_scores(rewards: list[float | None], group_size: int, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(reward - group mean) / (group std + eps) for each completion, and which completions count at all.

    A null reward (infra error) counts for nothing: it is left out of its group's mean and std and its completion
    gets no gradient. A group with fewer than two scored completions teaches nothing and scores 0.
    """
    valid = torch.tensor([r is not None for r in rewards])
    values = torch.tensor([r if r is not None else 0.0 for r in rewards], dtype=torch.float32)
    scores = torch.zeros_like(values)
    for g in range(0, len(rewards), group_size):
        v, x = valid[g:g + group_size], values[g:g + group_size]
        if v.sum() >= 2:
            members = x[v]
            scores[g:g + group_size] = torch.where(v, (x - members.mean()) / (members.std() + eps), 0.0)
    return scores, valid


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in results if r.get("reward") is not None]
    components = {}
    for c in COMPONENTS:
        values = [r["components"][c] for r in scored if r.get("components", {}).get(c) is not None]
        components[c] = sum(values) / len(values) if values else None
    return {"reward": sum(r["reward"] for r in scored) / len(scored) if scored else None,
            "components": components, "statuses": dict(Counter(r["status"] for r in results)),
            "null_rewards": len(results) - len(scored)}  # infra errors, invalid input: left out


# -- the loop


class DeviceUnavailable(RuntimeError):
    """`device="cuda"` asked for on a machine where torch sees no CUDA device."""


def resolve_device(name: str) -> torch.device:
    """"auto": CUDA when torch sees it, else CPU. "cuda" without CUDA fails here, before any model is loaded or
    service started, instead of quietly training on the CPU for hours."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceUnavailable(
            f"device {name!r} asked for, but torch {torch.__version__} sees no CUDA device "
            f"(built with CUDA {torch.version.cuda}; CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}). "
            "Install a CUDA build of torch (make setup TORCH=torch) on a machine with a GPU, or use --device cpu.")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise ValueError(f"device must be auto, cpu or cuda[:N], not {name!r}")
    return torch.device(name)


@dataclass
class Batch:
    """One step's rollouts with everything computed from the policy that sampled them.

    `logp_old` is the behaviour policy's: with `overlap` the batch is trained on one update later than it was
    sampled, and the PPO ratio must compare the trained policy with the policy that generated the samples."""

    step: int
    rows: list[Task]
    r: Rollouts
    items: list[dict[str, Any]]
    logp_old: torch.Tensor  # [B, T] behaviour policy, on the sampled tokens
    entropy: torch.Tensor  # [B, T] behaviour policy
    logp_ref: torch.Tensor
    logp_teacher: torch.Tensor | None
    kl_ref_exact: torch.Tensor  # [B, T] KL(behaviour || reference) over the whole vocabulary, at each position
    kl_teacher_exact: torch.Tensor | None  # [B, T] KL(behaviour || teacher), the same
    sampled_at_update: int  # PPO steps the policy had been trained for when it sampled this batch
    generate_s: float
    logprobs_s: float


def exact_kl(logp_all: torch.Tensor, logq_all: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum_v p(v) (log p(v) - log q(v)) at each position: the quantity whose per-sample estimate
    log p(a) - log q(a) enters the reward, without its sampling noise. For logs; [B, T, V] -> [B, T]."""
    return (logp_all.exp() * (logp_all - logq_all)).sum(-1)


@torch.no_grad()
def rollout_stats(policy: PreTrainedModel, reference: PreTrainedModel, teacher: PreTrainedModel | None, r: Rollouts,
                  temperature: float, chunk: int) -> tuple[torch.Tensor, ...]:
    """Per-token log-probs of policy, reference and teacher on the sampled tokens, the policy's entropy and the
    exact KLs, `chunk` rows at a time so that [rows, T, vocabulary] never exists for the whole batch at once."""
    parts: list[tuple[torch.Tensor, ...]] = []
    for rows in torch.arange(r.input_ids.shape[0], device=r.input_ids.device).split(chunk):
        sampled = r.input_ids[rows][:, r.n_prompt:, None]
        dist = log_distributions(policy, r, temperature, rows)
        dist_ref = log_distributions(reference, r, temperature, rows)
        part = [dist.gather(-1, sampled).squeeze(-1), -(dist.exp() * dist).sum(-1),
                dist_ref.gather(-1, sampled).squeeze(-1), exact_kl(dist, dist_ref)]
        if teacher is not None:
            dist_teacher = log_distributions(teacher, r, temperature, rows)
            part += [dist_teacher.gather(-1, sampled).squeeze(-1), exact_kl(dist, dist_teacher)]
        parts.append(tuple(part))
    return tuple(torch.cat(column) for column in zip(*parts, strict=True))


def train(cfg: Config, policy: PreTrainedModel | None = None, tokenizer: PreTrainedTokenizerBase | None = None,
          on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Runs `cfg.steps` PPO steps (loading the policy unless given); returns the log rows, also in log.jsonl.

    In line (`overlap=False`): sample step t, score it, update on it. Overlapped (`overlap=True`): the rollouts of
    step t+1 are sampled (and sent to the service) before the update on step t, so scoring of t runs while t+1 is
    generated, and scoring of t+1 while t is trained on. The price is a policy lag of one update: every batch after
    the first is sampled by the policy before the previous update and trained on after it. It is accounted for
    where PPO expects it: `logp_old` is computed right after sampling, by the policy that sampled, so the ratio
    pi_theta / pi_old is the importance weight from the behaviour policy and the clip bounds the drift of both
    updates together (the row's `policy_lag` says 0 or 1; `first_ratio_dev` shows the lag in the first minibatch).
    """
    if cfg.teacher_loss not in TEACHER_LOSSES:
        raise ValueError(f"teacher_loss must be one of {TEACHER_LOSSES}, not {cfg.teacher_loss!r}")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = resolve_device(cfg.device)
    if policy is None or tokenizer is None:
        policy, tokenizer = load_policy(cfg, device)
    policy = policy.to(device).eval()  # type: ignore[arg-type]  # transformers types .to() for a model, not a device
    reference = copy.deepcopy(policy).requires_grad_(False)  # frozen: the KL anchor
    teacher = load_model(cfg.teacher, device).requires_grad_(False) if cfg.teacher else None
    tasks: list[Task] = load_tasks(cfg.tasks) if cfg.tasks else named_function_tasks()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "log.jsonl").write_text("")
    log: list[dict[str, Any]] = []
    updates = 0  # PPO steps trained so far: the policy's version

    def make_batch(step: int) -> Batch:
        """1. sample: each prompt `group_size` times, members of a group side by side; then everything that needs
        the sampling policy, before any update can change it."""
        t0 = sync(device)
        chosen = rng.sample(tasks, cfg.prompts_per_step) if cfg.prompts_per_step <= len(tasks) \
            else rng.choices(tasks, k=cfg.prompts_per_step)
        rows = [task for task in chosen for _ in range(cfg.group_size)]
        r = sample(policy, tokenizer, [task.prompt for task in rows], cfg)
        t1 = sync(device)
        stats = rollout_stats(policy, reference, teacher, r, cfg.temperature, cfg.minibatch_size)
        logp_old, entropy, logp_ref, kl_ref_exact = stats[:4]
        logp_teacher, kl_teacher_exact = stats[4:] if teacher is not None else (None, None)
        items = [{"id": f"step{step}-{i}", "code": program_of(task.prompt, text), "tests": task.tests,
                  "profile": cfg.profile} for i, (task, text) in enumerate(zip(rows, r.texts, strict=True))]
        t2 = sync(device)
        return Batch(step, rows, r, items, logp_old, entropy, logp_ref, logp_teacher, kl_ref_exact,
                     kl_teacher_exact, updates, t1 - t0, t2 - t1)

    def learn(b: Batch, results: list[dict[str, Any]]) -> dict[str, Any]:
        """2.-5.: rewards to per-token rewards to advantages, then the clipped surrogate. Returns the log row."""
        nonlocal updates
        t3 = sync(device)
        rewards = [res.get("reward") for res in results]
        scores, valid = group_scores(rewards, cfg.group_size, cfg.group_std_eps)
        scores, valid = scores.to(device), valid.to(device)
        mask = b.r.mask * valid[:, None]  # infra errors: no gradient at all, never a zero reward
        # 3. per-token rewards
        kl_ref = b.logp_old - b.logp_ref  # per-token estimate of KL(policy || reference) on the sampled tokens
        # reverse KL to the teacher, on the student's own samples (0 without a teacher)
        kl_teacher = b.logp_old - b.logp_teacher if b.logp_teacher is not None else torch.zeros_like(kl_ref)
        last = (b.r.mask.sum(1).long() - 1).clamp(min=0)
        token_rewards = torch.zeros_like(b.logp_old)
        token_rewards[torch.arange(len(b.rows), device=device), last] += scores  # the test reward, group-normalised
        token_rewards -= cfg.kl_coef * kl_ref  # stay close to the reference
        if cfg.teacher_loss == "reward":
            token_rewards -= cfg.teacher_kl_coef * kl_teacher  # on-policy distillation
        token_rewards *= mask
        # 4. advantages: returns-to-go (gamma = 1); the group mean inside `scores` is the baseline
        advantages = token_rewards.flip(1).cumsum(1).flip(1) * mask
        if cfg.teacher_loss == "token":
            advantages -= cfg.teacher_kl_coef * kl_teacher * mask
        policy_lag = updates - b.sampled_at_update

        # 5. clipped surrogate; the ratio is to the behaviour policy (b.logp_old), whatever the lag
        clip_fracs, pg_losses, approx_kls = [], [], []
        first_ratio_dev = None
        generator = torch.Generator().manual_seed(cfg.seed + b.step)
        for _ in range(cfg.ppo_epochs):
            for idx in torch.randperm(len(b.rows), generator=generator).split(cfg.minibatch_size):
                idx = idx.to(device)
                m = mask[idx]
                if m.sum() == 0:
                    continue
                logp_all = log_distributions(policy, b.r, cfg.temperature, idx)
                logp = logp_all.gather(-1, b.r.input_ids[idx][:, b.r.n_prompt:, None]).squeeze(-1)
                log_ratio = logp - b.logp_old[idx]
                ratio = log_ratio.exp()
                if first_ratio_dev is None:  # before this step's first update: 0 in line, the lag's drift if not
                    first_ratio_dev = ((ratio.detach() - 1).abs() * m).max().item()
                adv = advantages[idx]
                surrogate = torch.min(ratio * adv, ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv)
                loss = -masked_mean(surrogate, m)
                if teacher is not None and cfg.teacher_loss == "exact" and cfg.teacher_kl_coef:
                    with torch.no_grad():
                        logq_all = log_distributions(teacher, b.r, cfg.temperature, idx)
                    loss = loss + cfg.teacher_kl_coef * masked_mean(exact_kl(logp_all, logq_all), m)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                optimizer.step()
                pg_losses.append(loss.item())
                clip_fracs.append(masked_mean(((ratio - 1).abs() > cfg.clip_eps).float(), m).item())
                approx_kls.append(masked_mean((ratio - 1) - log_ratio, m).item())
        updates += 1
        t4 = sync(device)

        n_tokens = int(b.r.mask.sum().item())
        update_tokens = int(mask.sum().item()) * cfg.ppo_epochs
        seq = valid.float()

        def per_sequence(x: torch.Tensor) -> float:  # summed over the completion, averaged over scored ones
            return masked_mean((x * mask).sum(1), seq).item()

        return {"step": b.step, **summarise(results),
                "kl_ref": per_sequence(kl_ref), "kl_ref_exact": per_sequence(b.kl_ref_exact),
                "kl_teacher": per_sequence(kl_teacher) if teacher is not None else None,
                "kl_teacher_exact": per_sequence(b.kl_teacher_exact) if b.kl_teacher_exact is not None else None,
                "entropy": masked_mean(b.entropy, mask).item(),
                "pg_loss": sum(pg_losses) / len(pg_losses) if pg_losses else None,
                "clip_frac": sum(clip_fracs) / len(clip_fracs) if clip_fracs else None,
                "approx_kl": sum(approx_kls) / len(approx_kls) if approx_kls else None,
                "policy_lag": policy_lag, "first_ratio_dev": first_ratio_dev,
                "completion_tokens": n_tokens,
                "time": {"generate_s": b.generate_s, "logprobs_s": b.logprobs_s, "update_s": t4 - t3},
                "tokens_per_s": {"generate": n_tokens / b.generate_s, "update": update_tokens / max(t4 - t3, 1e-9)}}

    def finish(row: dict[str, Any], t_start: float, reward_s: float) -> None:
        step_s = sync(device) - t_start
        row["time"].update(reward_s=reward_s, step_s=step_s)
        row["reward_wait_share"] = reward_s / step_s
        row["overlap"] = cfg.overlap
        log.append(row)
        with open(out / "log.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if on_step is not None:
            on_step(row)
        if cfg.save_every and row["step"] % cfg.save_every == 0:
            save(policy, tokenizer, out / f"checkpoint-{row['step']}")

    def in_sessions(grader: SessionGrader, b: Batch) -> list[dict[str, Any]]:
        """Agent mode: the same programs written, compiled and tested in agent sessions before submitting."""
        return grader.grade(b.rows, [item["code"] for item in b.items])

    if cfg.overlap:
        # The agent's grader runs on one background thread, the only user of its (synchronous) client.
        with BackgroundScorer(cfg.url) as scorer, Client(cfg.url) as client, ThreadPoolExecutor(1) as pool:
            grader = SessionGrader(client) if cfg.agent else None

            def submit(b: Batch) -> Future[list[dict[str, Any]]]:
                return scorer.submit(b.items) if grader is None else pool.submit(in_sessions, grader, b)

            try:
                pending: tuple[Batch, Future[list[dict[str, Any]]]] | None = None
                for step in range(1, cfg.steps + 1):
                    t_start = sync(device)
                    if pending is None:
                        first = make_batch(step)
                        pending = (first, submit(first))
                    batch, future = pending
                    if step < cfg.steps:  # sample t+1 with the policy before update t, while t is being scored
                        following = make_batch(step + 1)
                        pending = (following, submit(following))
                    t_wait = time.perf_counter()
                    results = future.result()
                    reward_s = time.perf_counter() - t_wait
                    finish(learn(batch, results), t_start, reward_s)
            finally:
                if grader is not None:
                    grader.close()
    else:
        with Client(cfg.url) as client:
            grader = SessionGrader(client) if cfg.agent else None
            try:
                for step in range(1, cfg.steps + 1):
                    t_start = sync(device)
                    batch = make_batch(step)
                    t_wait = time.perf_counter()
                    # 2. one HTTP call for the whole batch (agent mode: one session per completion)
                    results = client.reward_batch(batch.items) if grader is None else in_sessions(grader, batch)
                    reward_s = time.perf_counter() - t_wait
                    finish(learn(batch, results), t_start, reward_s)
            finally:
                if grader is not None:
                    grader.close()

    save(policy, tokenizer, out / "final")
    return log


def save(policy: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: Path) -> None:
    policy.save_pretrained(path)
    tokenizer.save_pretrained(path)


# -- command line


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(prog="python -m trainer.ppo", description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="local checkpoint directory (save_pretrained layout)")
    which.add_argument("--tiny", action="store_true", help="a tiny random-init model, SFT warm-started here")
    for field in dataclasses.fields(Config):
        if field.name == "model":
            continue
        flag = "--" + field.name.replace("_", "-")
        if str(field.type) == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default)
            continue
        kind = {"int": int, "float": float}.get(str(field.type), str)
        parser.add_argument(flag, type=kind, default=field.default)
    args = vars(parser.parse_args(argv))
    args.pop("tiny")
    return Config(**args)


def print_step(row: dict[str, Any]) -> None:
    comps = " ".join(f"{c}={v:.3f}" for c, v in row["components"].items() if v is not None)
    reward = f"{row['reward']:.3f}" if row["reward"] is not None else "null"
    print(f"step {row['step']:4d}  reward {reward}  {comps}  kl {row['kl_ref']:.4f}  "
          f"entropy {row['entropy']:.3f}  wait {row['reward_wait_share']:.0%}  {row['time']['step_s']:.2f}s",
          flush=True)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    try:
        resolve_device(cfg.device)
    except DeviceUnavailable as e:
        raise SystemExit(f"error: {e}") from None
    train(cfg, on_step=print_step)
    print(f"log: {Path(cfg.out) / 'log.jsonl'}  checkpoint: {Path(cfg.out) / 'final'}")


if __name__ == "__main__":
    main()
