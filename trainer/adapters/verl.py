"""verl custom reward: point `custom_reward_function.path` at this file (name `compute_score`, or
`compute_score_batch` with the batch reward manager). The service URL comes from REWARDBOX_URL; the profile from
REWARDBOX_PROFILE (default seed). Returns {"score": reward, <components>} per item, or None where the service
failed (never a made-up 0): an infra_error item, and every item of a call the client gave up on (service down,
an answer it could not read: any RewardboxError, logged), so an outage never crashes the trainer.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rewardbox import AsyncClient, Client, RewardboxError
from rewardbox.extract import extract_code
from rewardbox.ground_truth import from_verl

_client: Client | None = None
log = logging.getLogger("rewardbox.verl")


def _item(solution_str: str, ground_truth: Any) -> dict[str, Any]:
    code = extract_code(solution_str)
    return {"code": code if code is not None else solution_str, "tests": from_verl(ground_truth),
            "profile": os.environ.get("REWARDBOX_PROFILE", "seed")}


def _score(result: dict[str, Any]) -> dict[str, Any] | None:
    if result.get("reward") is None:
        return None
    return {"score": result["reward"], "status": result["status"],
            **{k: v for k, v in result["components"].items() if v is not None}}


def _shared_client() -> Client:
    global _client
    if _client is None:
        _client = Client()
    return _client


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, Any] | None:
    try:
        return _score(_shared_client().reward(_item(solution_str, ground_truth)))
    except RewardboxError as e:
        log.warning("rewardbox: no reward for this sample (None): %s", e)
        return None


def compute_score_batch(data_sources: list[str], solution_strs: list[str], ground_truths: list[Any],
                        extra_infos: list[Any] | None = None, **kwargs: Any) -> list[dict[str, Any] | None]:
    """One HTTP call for the whole batch."""
    items = [_item(s, g) for s, g in zip(solution_strs, ground_truths, strict=True)]
    try:
        return [_score(r) for r in _shared_client().reward_batch(items)]
    except RewardboxError as e:
        log.warning("rewardbox: no reward for a batch of %d (None each): %s", len(items), e)
        return [None] * len(items)


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                              **kwargs: Any) -> dict[str, Any] | None:
    try:
        async with AsyncClient() as client:
            return _score(await client.reward(_item(solution_str, ground_truth)))
    except RewardboxError as e:
        log.warning("rewardbox: no reward for this sample (None): %s", e)
        return None
