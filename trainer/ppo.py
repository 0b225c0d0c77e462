"""PPO for a causal-LM policy scored by rewardbox: the whole algorithm in one file, read top to bottom (after CleanRL).

    python -m trainer.ppo --url http://127.0.0.1:8000 --tiny --learning-rate 3e-4 --out runs/demo  # no download
    python -m trainer.ppo --url http://127.0.0.1:8000 --model PATH --tasks tasks.jsonl   # a local checkpoint

One step:
  1. sample `group_size` completions for each of `prompts_per_step` prompts from the policy;
  2. score all of them in one POST /reward/batch (`rewardbox.Client`); a completion whose reward is null (infra
     error, invalid input) is dropped from the update: it is never a zero. With `--agent true` each completion is
     instead acted out in an agent session (a fork of its task's base session: write, compile, test, submit;
     trainer/agent.py) and the session's reward is used;
  3. per-token rewards: the test reward, normalised within its prompt's group, on the last token; minus the KL to
     the frozen reference model on every token; minus (optional) the reverse KL to a teacher model on the student's
     own samples (on-policy distillation);
  4. advantages: returns-to-go of the per-token rewards (gamma = 1). No value head: the group mean is the baseline,
     as in GRPO, so advantages are group-normalised and no critic has to be trained;
  5. `ppo_epochs` passes of the clipped surrogate objective over minibatches.

CUDA when present (bf16 autocast), CPU otherwise. Writes `log.jsonl` (one line a step: reward, components, KL,
entropy, timings) and checkpoints (`save_pretrained`) to `out`.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from rewardbox import Client
from rewardbox.extract import program_of
from trainer.agent import SessionGrader
from trainer.tasks import Task, load_tasks, named_function_tasks

COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")


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
    kl_coef: float = 0.02  # weight of KL(policy || reference) in the per-token reward
    teacher_kl_coef: float = 1.0  # weight of the reverse KL to the teacher (only with `teacher`)
    group_std_eps: float = 0.05  # keeps groups that differ only by timing jitter from being blown up to +-1
    max_grad_norm: float = 1.0
    profile: str = "seed"  # rewardbox reward profile
    save_every: int = 0  # checkpoint every N steps (0: only the final one)
    tiny_sft_steps: int = 400  # supervised warm-start steps for the tiny model
    agent: bool = False  # agent mode (trainer/agent.py): each completion acted out in a forked session, then graded


# -- models


def load_model(path: str, device: torch.device) -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device)
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
    return policy.to(device), tokenizer


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
        out = policy.generate(**enc, generation_config=settings)
    n_prompt = enc["input_ids"].shape[1]
    completion = out[:, n_prompt:]
    is_eos = (completion == tokenizer.eos_token_id).int()
    mask = (is_eos.cumsum(1) - is_eos) == 0  # nothing after the first end-of-text
    texts = [tokenizer.decode(ids[m], skip_special_tokens=True) for ids, m in zip(completion, mask, strict=True)]
    attention = torch.cat([enc["attention_mask"], mask.long()], dim=1)
    return Rollouts(out, attention, mask.float(), n_prompt, texts)


def token_logprobs(model: PreTrainedModel, r: Rollouts, temperature: float,
                   rows: torch.Tensor | slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each sampled completion token and the entropy of the distribution it came from: [B, T]."""
    ids, attention = r.input_ids[rows], r.attention_mask[rows]
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)  # left padding: positions count real tokens only
    with autocast(model.device):
        logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids).logits
    logits = logits[:, r.n_prompt - 1:-1].float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids[:, r.n_prompt:, None]).squeeze(-1)
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


def train(cfg: Config, policy: PreTrainedModel | None = None, tokenizer: PreTrainedTokenizerBase | None = None,
          on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Runs `cfg.steps` PPO steps (loading the policy unless given); returns the log rows, also in log.jsonl."""
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if policy is None or tokenizer is None:
        policy, tokenizer = load_policy(cfg, device)
    policy = policy.to(device).eval()
    reference = copy.deepcopy(policy).requires_grad_(False)  # frozen: the KL anchor
    teacher = load_model(cfg.teacher, device).requires_grad_(False) if cfg.teacher else None
    tasks: list[Task] = load_tasks(cfg.tasks) if cfg.tasks else named_function_tasks()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "log.jsonl").write_text("")
    log: list[dict[str, Any]] = []
    client = Client(cfg.url)
    agent = SessionGrader(client) if cfg.agent else None

    for step in range(1, cfg.steps + 1):
        t0 = sync(device)
        # 1. sample: each prompt `group_size` times, members of a group side by side
        batch = rng.sample(tasks, cfg.prompts_per_step) if cfg.prompts_per_step <= len(tasks) \
            else rng.choices(tasks, k=cfg.prompts_per_step)
        rows = [task for task in batch for _ in range(cfg.group_size)]
        r = sample(policy, tokenizer, [task.prompt for task in rows], cfg)
        mask = r.mask
        t1 = sync(device)

        # 2. score through rewardbox, one HTTP call for the whole batch
        items = [{"id": f"step{step}-{i}", "code": program_of(task.prompt, text), "tests": task.tests,
                  "profile": cfg.profile} for i, (task, text) in enumerate(zip(rows, r.texts, strict=True))]
        if agent is not None:  # the same programs, written and tested in agent sessions before submitting
            results = agent.grade(rows, [item["code"] for item in items])
        else:
            results = client.reward_batch(items)
        rewards = [res.get("reward") for res in results]
        scores, valid = group_scores(rewards, cfg.group_size, cfg.group_std_eps)
        scores, valid = scores.to(device), valid.to(device)
        mask = mask * valid[:, None]  # infra errors: no gradient at all, never a zero reward
        t2 = sync(device)

        # 3. per-token rewards
        with torch.no_grad():
            logp_old, entropy = token_logprobs(policy, r, cfg.temperature)
            logp_ref, _ = token_logprobs(reference, r, cfg.temperature)
            logp_teacher = token_logprobs(teacher, r, cfg.temperature)[0] if teacher is not None else logp_old
        kl_ref = logp_old - logp_ref  # per-token estimate of KL(policy || reference) on the sampled tokens
        kl_teacher = logp_old - logp_teacher  # reverse KL to the teacher, on the student's own samples
        last = (r.mask.sum(1).long() - 1).clamp(min=0)
        token_rewards = torch.zeros_like(logp_old)
        token_rewards[torch.arange(len(rows), device=device), last] += scores  # the test reward, group-normalised
        token_rewards -= cfg.kl_coef * kl_ref  # stay close to the reference
        token_rewards -= cfg.teacher_kl_coef * kl_teacher  # on-policy distillation (0 without a teacher)
        token_rewards *= mask
        # 4. advantages: returns-to-go (gamma = 1); the group mean inside `scores` is the baseline
        advantages = token_rewards.flip(1).cumsum(1).flip(1) * mask
        t3 = sync(device)

        # 5. clipped surrogate
        clip_fracs, pg_losses, approx_kls = [], [], []
        generator = torch.Generator().manual_seed(cfg.seed + step)
        for _ in range(cfg.ppo_epochs):
            for idx in torch.randperm(len(rows), generator=generator).split(cfg.minibatch_size):
                idx = idx.to(device)
                m = mask[idx]
                if m.sum() == 0:
                    continue
                logp, _ = token_logprobs(policy, r, cfg.temperature, rows=idx)
                log_ratio = logp - logp_old[idx]
                ratio = log_ratio.exp()
                adv = advantages[idx]
                surrogate = torch.min(ratio * adv, ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv)
                loss = -masked_mean(surrogate, m)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                optimizer.step()
                pg_losses.append(loss.item())
                clip_fracs.append(masked_mean(((ratio - 1).abs() > cfg.clip_eps).float(), m).item())
                approx_kls.append(masked_mean((ratio - 1) - log_ratio, m).item())
        t4 = sync(device)

        n_tokens = int(r.mask.sum().item())
        update_tokens = int(mask.sum().item()) * cfg.ppo_epochs
        seq = valid.float()
        row = {"step": step, **summarise(results),
               "kl_ref": masked_mean((kl_ref * mask).sum(1), seq).item(),
               "kl_teacher": masked_mean((kl_teacher * mask).sum(1), seq).item() if teacher is not None else None,
               "entropy": masked_mean(entropy, mask).item(),
               "pg_loss": sum(pg_losses) / len(pg_losses) if pg_losses else None,
               "clip_frac": sum(clip_fracs) / len(clip_fracs) if clip_fracs else None,
               "approx_kl": sum(approx_kls) / len(approx_kls) if approx_kls else None,
               "completion_tokens": n_tokens,
               "time": {"generate_s": t1 - t0, "reward_s": t2 - t1, "logprobs_s": t3 - t2, "update_s": t4 - t3,
                        "step_s": t4 - t0},
               "tokens_per_s": {"generate": n_tokens / (t1 - t0), "update": update_tokens / max(t4 - t3, 1e-9)},
               "reward_wait_share": (t2 - t1) / (t4 - t0)}
        log.append(row)
        with open(out / "log.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if on_step is not None:
            on_step(row)
        if cfg.save_every and step % cfg.save_every == 0:
            save(policy, tokenizer, out / f"checkpoint-{step}")

    if agent is not None:
        agent.close()
    client.close()
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
        kind = {"int": int, "float": float, "bool": _flag}.get(str(field.type), str)
        parser.add_argument("--" + field.name.replace("_", "-"), type=kind, default=field.default)
    args = vars(parser.parse_args(argv))
    args.pop("tiny")
    return Config(**args)


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def print_step(row: dict[str, Any]) -> None:
    comps = " ".join(f"{c}={v:.3f}" for c, v in row["components"].items() if v is not None)
    reward = f"{row['reward']:.3f}" if row["reward"] is not None else "null"
    print(f"step {row['step']:4d}  reward {reward}  {comps}  kl {row['kl_ref']:.4f}  "
          f"entropy {row['entropy']:.3f}  wait {row['reward_wait_share']:.0%}  {row['time']['step_s']:.2f}s",
          flush=True)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    train(cfg, on_step=print_step)
    print(f"log: {Path(cfg.out) / 'log.jsonl'}  checkpoint: {Path(cfg.out) / 'final'}")


if __name__ == "__main__":
    main()
