"""verl custom reward over rewardbox, for verl >= 0.9 (RewardLoopManager with its naive, dapo, ... managers).

    reward.custom_reward_function.path=trainer/adapters/verl.py
    reward.custom_reward_function.name=compute_score_async           # many samples in flight; or compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://rewardbox:8000
    +reward.custom_reward_function.reward_kwargs.profile=pass_rate   # verl-native: pass fraction (binary: 0/1)

verl calls the function once per sample (there is no batch manager since 0.9) and merges `reward_kwargs` into
its keyword arguments, so everything is configured there and reaches every Ray worker with the config: `url`,
`token`, `profile` (seed by default; `pass_rate` and `binary` score as verl's own sandbox_fusion scorer does),
`language`, `retry_budget_s`, `on_infra_error`, `fallback_score`. A row's `extra_info.language` overrides
`language`. Without reward_kwargs the URL and token fall back to REWARDBOX_URL / REWARDBOX_TOKEN.

Every result has the same keys, because verl takes the keys of a batch from its first item: `score`, `acc`
(1.0 when every test passed, else 0.0), `status`, and the four components; a component that was not computed is
None (verl's metrics skip None). A response with no fenced code block is not run: `score` 0 (-1 under coderl),
status `no_code`, as verl's own scorer does.

verl cannot skip a sample and crashes on a None score, so an infrastructure fault is never passed on as None or
as a silent 0: the sample is scored again for up to `retry_budget_s` (default 300 s), then `on_infra_error`
decides: `raise` (default) stops training with RewardboxUnavailable naming the service and the fault;
`fallback` returns `fallback_score` (which must be set), status `infra_error`, and logs a warning each time.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from rewardbox import AsyncClient, Client
from rewardbox.adapters import retry
from rewardbox.extract import extract_code, no_code_reward
from rewardbox.ground_truth import from_verl

log = logging.getLogger("rewardbox.verl")
COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")
KEYS = ("score", "acc", "status", *COMPONENTS)
OPTIONS = {"url", "token", "profile", "language", "retry_budget_s", "on_infra_error", "fallback_score"}
VERL_KWARGS = {"reward_router_address", "reward_model_tokenizer"}  # what verl itself may pass


class RewardboxUnavailable(RuntimeError):
    """rewardbox could not score a sample within the retry budget; training stops rather than learn a fake value."""


class Options:
    def __init__(self, url: str | None = None, token: str | None = None, profile: str = "seed",
                 language: str = "python", retry_budget_s: float = retry.DEFAULT_BUDGET_S,
                 on_infra_error: str = "raise", fallback_score: float | None = None, **unknown: Any) -> None:
        extra = set(unknown) - VERL_KWARGS
        if extra:
            raise TypeError(f"rewardbox verl adapter: unknown reward_kwargs {sorted(extra)}; known: {sorted(OPTIONS)}")
        if on_infra_error not in ("raise", "fallback"):
            raise ValueError(f"on_infra_error must be 'raise' or 'fallback', not {on_infra_error!r}")
        if on_infra_error == "fallback" and fallback_score is None:
            raise ValueError("on_infra_error='fallback' needs fallback_score (the value to train on, said out loud)")
        self.url, self.token, self.profile, self.language = url, token, profile, language
        self.retry_budget_s, self.on_infra_error = float(retry_budget_s), on_infra_error
        self.fallback_score = None if fallback_score is None else float(fallback_score)


def _item(options: Options, solution_str: str, ground_truth: Any, extra_info: Any) -> dict[str, Any] | None:
    """The reward item, or None when the response holds no fenced code block."""
    code = extract_code(solution_str)
    if code is None:
        return None
    language = extra_info.get("language") if isinstance(extra_info, dict) else None
    return {"code": code, "tests": from_verl(ground_truth), "profile": options.profile,
            "language": language or options.language}


def _no_code(options: Options) -> dict[str, Any]:
    return {"score": no_code_reward(options.profile), "acc": 0.0, "status": "no_code", "executability": 0.0,
            "pass_rate": 0.0, "quality": None, "efficiency": None}


def _result(options: Options, result: dict[str, Any]) -> dict[str, Any]:
    status = result["status"]
    if status == "invalid_input":
        raise ValueError(f"rewardbox rejected this sample's reward item: {result.get('message')}")
    if result.get("reward") is None:  # still an infrastructure fault after the retry budget
        where = options.url or "REWARDBOX_URL"
        message = (f"rewardbox at {where} could not score a sample for {options.retry_budget_s:g} s: "
                   f"{result.get('message') or status}. Training stops rather than learn from a made-up reward; "
                   "fix the service or raise reward_kwargs.retry_budget_s.")
        if options.on_infra_error == "raise":
            raise RewardboxUnavailable(message)
        log.warning("%s Using fallback_score=%s.", message, options.fallback_score)
        return {"score": options.fallback_score, "acc": None, "status": status,
                **dict.fromkeys(COMPONENTS)}
    components = result.get("components") or {}
    return {"score": float(result["reward"]), "acc": 1.0 if status == "passed" else 0.0, "status": status,
            **{c: components.get(c) for c in COMPONENTS}}


_clients: dict[tuple[str | None, str | None], Client] = {}
_async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> {(url, token): client}


def _client(options: Options) -> Client:
    key = (options.url, options.token)
    if key not in _clients:
        _clients[key] = Client(options.url, token=options.token, retries=0)  # retry.score owns retrying
    return _clients[key]


def _async_client(options: Options) -> AsyncClient:
    """One client per event loop: an httpx AsyncClient belongs to the loop it first ran on."""
    per_loop = _async_clients.setdefault(asyncio.get_running_loop(), {})
    key = (options.url, options.token)
    if key not in per_loop:
        per_loop[key] = AsyncClient(options.url, token=options.token, retries=0)
    return per_loop[key]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, Any]:
    options = Options(**kwargs)
    item = _item(options, solution_str, ground_truth, extra_info)
    if item is None:
        return _no_code(options)
    return _result(options, retry.score(_client(options), [item], options.retry_budget_s)[0])


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                              **kwargs: Any) -> dict[str, Any]:
    options = Options(**kwargs)
    item = _item(options, solution_str, ground_truth, extra_info)
    if item is None:
        return _no_code(options)
    return _result(options, await retry.score_async(_async_client(options), item, options.retry_budget_s))
