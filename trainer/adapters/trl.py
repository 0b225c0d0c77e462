"""TRL GRPOTrainer / RLOOTrainer reward functions over rewardbox.

    from trainer.adapters.trl import reward_functions
    trainer = GRPOTrainer(..., reward_funcs=reward_functions(), reward_weights=[1.0, 0, 0, 0, 0])

One callable per component plus the total (`rewardbox_reward`, `rewardbox_executability`, `rewardbox_pass_rate`,
`rewardbox_quality`, `rewardbox_efficiency`), so TRL's `reward_weights` can weigh them; the batch is scored once and
shared by all five. Tests come from the dataset column `tests` (a tests object, verl ground truth) or open-r1's
`verification_info`. Conversational completions are read from `completion[0]["content"]`. None where the service
failed or a component was not computed (TRL treats None as "not applicable"); a call the client gave up on (any
RewardboxError: service down, an answer it could not read) is logged and gives None for the whole batch, so an
outage never crashes the trainer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from rewardbox import Client, RewardboxError
from rewardbox.extract import extract_code
from rewardbox.ground_truth import tests_of

COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")
log = logging.getLogger("rewardbox.trl")


def _text(completion: Any) -> str:
    if isinstance(completion, list):
        return completion[0]["content"] if completion else ""
    return str(completion)


def reward_functions(client: Client | None = None, profile: str = "seed",
                     tests_column: str = "tests") -> list[Callable[..., list[float | None]]]:
    client = client or Client()
    last: dict[str, Any] = {"key": None, "results": None}

    def score_batch(completions: list[Any], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        column = kwargs.get(tests_column) or kwargs.get("verification_info")
        texts = [_text(c) for c in completions]
        key = json.dumps([texts, column], sort_keys=True, default=str)
        if key != last["key"]:
            items = []
            for text, spec in zip(texts, column, strict=True):
                code = extract_code(text)
                items.append({"code": code if code is not None else text, "tests": tests_of(spec), "profile": profile})
            try:
                results = client.reward_batch(items)
            except RewardboxError as e:
                log.warning("rewardbox: no reward for a batch of %d (None each): %s", len(items), e)
                results = [{"status": "infra_error", "reward": None, "components": {}}] * len(items)
            last["key"], last["results"] = key, results
        return last["results"]

    def make(name: str, pick: Callable[[dict[str, Any]], float | None]) -> Callable[..., list[float | None]]:
        def reward(prompts: list[Any], completions: list[Any], completion_ids: Any = None,
                   **kwargs: Any) -> list[float | None]:
            return [pick(r) for r in score_batch(completions, kwargs)]

        reward.__name__ = name
        return reward

    funcs = [make("rewardbox_reward", lambda r: r.get("reward"))]
    for component in COMPONENTS:
        funcs.append(make(f"rewardbox_{component}",
                          lambda r, c=component: None if r.get("reward") is None else r["components"].get(c)))
    return funcs
