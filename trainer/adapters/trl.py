"""TRL GRPOTrainer / RLOOTrainer reward functions over rewardbox.

    from rewardbox.adapters.trl import reward_functions
    trainer = GRPOTrainer(..., reward_funcs=reward_functions(profile="seed"))

One function, `rewardbox_reward`, the service's total: weigh the components with `weights={...}` (the service's
weighted sum under the seed and gated profiles; a zero weight is never computed), or pick a profile (`binary`,
`pass_rate`, `coderl`). The components are logged next to TRL's own metrics as `rewardbox/<component>` (mean over
the rows where the component was computed), with `rewardbox/infra_errors`, and each row's status goes to the
completions table. `components=True` adds one function per component, for TRL's `reward_weights`; then pass
`reward_weights=[1.0, 0.0, 0.0, 0.0, 0.0]` (TRL's default weighs every function 1.0, which would add the components
to the total). The batch is scored once and shared by all of them.

The program: the last fenced code block of the completion; without one, prompt + completion when the prompt is
text (a continuation: the prompt ends inside the function, as in HumanEval and trainer/tasks.py), else the completion
itself (`program="completion"` never prepends the prompt). Tests come from the dataset column `tests_column`
(default `tests`) or open-r1's `verification_info`: store them as JSON strings, the safe way through Arrow; dicts
work too, including Arrow's null-filled merged structs. A missing column, or a row whose tests cannot be read, is an
error naming it. A row whose tests are null gets None (TRL: not applicable).

None for a row the service could not score within `retry_budget_s` (infrastructure fault) or rejected: TRL masks
it (advantage 0) with a warning; never a made-up zero.
"""

from __future__ import annotations

import functools
import json
import logging
import statistics
from collections.abc import Callable
from typing import Any

from rewardbox import Client
from rewardbox.adapters import retry
from rewardbox.extract import program_of
from rewardbox.ground_truth import item_fields

log = logging.getLogger("rewardbox.trl")
COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")
TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")  # what TRL adds beside dataset columns


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return completion[0]["content"] if completion else ""
    return str(completion)


def _column(kwargs: dict[str, Any], tests_column: str) -> list[Any]:
    for name in (tests_column, "verification_info"):
        if name in kwargs:
            return kwargs[name]
    columns = sorted(k for k in kwargs if k not in TRL_KWARGS)
    raise KeyError(f"rewardbox: the dataset has no {tests_column!r} column (nor 'verification_info'); its columns "
                   f"are {columns}. Add the tests as JSON strings in a {tests_column!r} column, or pass "
                   "reward_functions(tests_column=...).")


def _fields(row: int, value: Any) -> dict[str, Any] | None:
    try:
        return item_fields(value)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"rewardbox: row {row} of the tests column cannot be read: {e}") from None


def reward_functions(client: Client | None = None, profile: str = "seed", tests_column: str = "tests", *,
                     weights: dict[str, float] | None = None, components: bool = False, program: str = "auto",
                     retry_budget_s: float = 60.0) -> list[Callable[..., list[float | None]]]:
    if program not in ("auto", "completion"):
        raise ValueError(f"program must be 'auto' or 'completion', not {program!r}")
    client = client or Client()
    last: dict[str, Any] = {"key": None, "results": None}

    def item(prompt: Any, completion: Any, fields: dict[str, Any]) -> dict[str, Any]:
        text_prompt = prompt if program == "auto" and isinstance(prompt, str) else None
        extra = {"weights": weights} if weights is not None else {}
        return {"profile": profile, **extra, **fields, "code": program_of(text_prompt, _text(completion))}

    def score_batch(prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]) -> list[dict | None]:
        column = _column(kwargs, tests_column)
        key = json.dumps([prompts, [_text(c) for c in completions], column], sort_keys=True, default=str)
        if key != last["key"]:
            rows = [_fields(i, value) for i, value in enumerate(column)]
            scored = [i for i, fields in enumerate(rows) if fields is not None and fields.get("tests") is not None]
            results: list[dict | None] = [None] * len(rows)
            items = [item(prompts[i], completions[i], rows[i] or {}) for i in scored]  # scored rows are never None
            for i, result in zip(scored, retry.score(client, items, retry_budget_s), strict=True):
                results[i] = result
            last["key"], last["results"] = key, results
            _log(results, kwargs)
        return last["results"]

    def make(name: str, pick: Callable[[dict[str, Any]], float | None]) -> Callable[..., list[float | None]]:
        def reward(prompts: list[Any], completions: list[Any], completion_ids: Any = None,
                   **kwargs: Any) -> list[float | None]:
            return [None if r is None or r.get("reward") is None else pick(r)
                    for r in score_batch(prompts, completions, kwargs)]

        reward.__name__ = name
        return reward

    funcs = [make("rewardbox_reward", lambda r: r["reward"])]
    if components:
        funcs += [make(f"rewardbox_{c}", functools.partial(_component, c)) for c in COMPONENTS]
    return funcs


def _component(name: str, result: dict[str, Any]) -> float | None:
    return result["components"].get(name)


def _log(results: list[dict | None], kwargs: dict[str, Any]) -> None:
    """Components and faults as TRL metrics (TRL >= 1.x passes log_metric / log_extra), once per batch."""
    unscored = [r for r in results if r is not None and r.get("reward") is None]
    for r in unscored:
        log.warning("rewardbox gave no reward (%s): %s; TRL masks this row", r["status"], r.get("message"))
    log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
    if log_metric is not None:
        scored = [r for r in results if r is not None and r.get("reward") is not None]
        for c in COMPONENTS:
            values = [r["components"][c] for r in scored if r["components"].get(c) is not None]
            if values:
                log_metric(f"rewardbox/{c}", statistics.fmean(values))
        log_metric("rewardbox/infra_errors", float(sum(r["status"] == "infra_error" for r in unscored)))
    if log_extra is not None:
        log_extra("rewardbox_status", ["no_tests" if r is None else r["status"] for r in results])
