"""How good a checkpoint is on a task family, measured by the same service and the same sampling as PPO uses.

    python -m trainer.evaluate --url http://127.0.0.1:8000 --model PATH --samples 16

Samples `samples` completions per task (temperature 1, no top-k/top-p: the distribution PPO trains), scores them in
one POST /reward/batch and returns the mean reward and mean pass rate over the scored ones (null rewards are left
out and counted). It is how a teacher is shown to be better than its student before distillation.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rewardbox import Client
from rewardbox.extract import program_of
from trainer.ppo import Config, sample
from trainer.tasks import Task, named_function_tasks


@dataclass(frozen=True)
class Evaluation:
    reward: float | None
    pass_rate: float | None
    scored: int
    null_rewards: int


def evaluate(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, url: str, tasks: list[Task] | None = None,
             samples: int = 16, seed: int = 0, max_new_tokens: int = 48, profile: str = "seed") -> Evaluation:
    tasks = tasks if tasks is not None else named_function_tasks()
    rows = [task for task in tasks for _ in range(samples)]
    torch.manual_seed(seed)
    r = sample(model, tokenizer, [t.prompt for t in rows], Config(max_new_tokens=max_new_tokens))
    items = [{"id": f"eval-{i}", "code": program_of(task.prompt, text), "tests": task.tests, "profile": profile}
             for i, (task, text) in enumerate(zip(rows, r.texts, strict=True))]
    with Client(url) as client:
        results = client.reward_batch(items)
    scored = [res for res in results if res.get("reward") is not None]
    rates = [res["components"]["pass_rate"] for res in scored
             if res.get("components", {}).get("pass_rate") is not None]
    return Evaluation(reward=sum(res["reward"] for res in scored) / len(scored) if scored else None,
                      pass_rate=sum(rates) / len(rates) if rates else None,
                      scored=len(scored), null_rewards=len(results) - len(scored))


def main(argv: list[str] | None = None) -> None:
    from trainer.ppo import load_model, resolve_device

    parser = argparse.ArgumentParser(prog="python -m trainer.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="local checkpoint directory (save_pretrained layout)")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    model = load_model(args.model, resolve_device(args.device))
    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    tokenizer.padding_side = "left"
    result: dict[str, Any] = evaluate(model, tokenizer, args.url, samples=args.samples, seed=args.seed).__dict__
    print(json.dumps(result))


if __name__ == "__main__":
    main()
