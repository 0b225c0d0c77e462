"""Request and response shapes of /reward and /reward/batch (pydantic v2)."""

from __future__ import annotations

import ast
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from graders import pyast
from rewardbox.names import wire
from sandboxes.languages import supported_languages
from service.environments.models import EnvironmentRef
from service.repos.models import RepoRef, RepoTests, check_repo_fields

# One entry of sandboxes/languages.py each, Python first.
SUPPORTED_LANGUAGES = supported_languages()
PROFILES = ("seed", "gated", "binary", "pass_rate", "coderl")
COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")
MAX_WEIGHT = 100.0  # weights are never renormalised: this bounds a reward at 4 x MAX_WEIGHT
UNSUPPORTED_LANGUAGE = "unsupported_language"  # the error type answered 400 (with the supported list), not 422


class Strict(BaseModel):
    """Request models: unknown fields are refused, numbers are finite (NaN and infinity cannot reach a limit or a
    weight, nor an error body that echoes them), and numeric fields are declared strict one by one (JSON `false`
    is not 0)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Scaling(Strict):
    """Input generator for efficiency's complexity fit: `function(n)` returns the entry point's positional args."""

    generator: str = Field(min_length=1, description="trusted source defining the generator function")
    function: str = Field("generate", min_length=1, description="name of the generator function in `generator`")
    sizes: list[Annotated[int, Field(strict=True)]] = Field(min_length=3, max_length=8,
                                                            description="input sizes n, increasing, max >= 4 x min")

    @field_validator("sizes")
    @classmethod
    def _spread(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v) or any(b <= a for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("sizes must be positive and strictly increasing")
        if v[-1] < 4 * v[0]:
            raise ValueError("the largest size must be at least 4 times the smallest, or no slope can be fitted")
        return v

    @model_validator(mode="after")
    def _defines_function(self) -> Scaling:
        try:
            tree = pyast.parse(self.generator)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            raise ValueError(f"generator does not parse: {e}") from None
        if not any(isinstance(s, ast.FunctionDef) and s.name == self.function for s in tree.body):
            raise ValueError(f"generator defines no function {self.function!r}")
        return self


class AssertTests(Strict):
    """HumanEval `check(candidate)` + entry_point, or MBPP-style plain assert lines."""

    kind: Literal["assert"]
    test_code: str = Field(min_length=1)
    entry_point: str | None = None
    support_code: str | None = Field(None, description="trusted dataset code the tests may use (HumanEval prompt)")
    scaling: Scaling | None = None

    @model_validator(mode="after")
    def _scaling_needs_entry_point(self) -> AssertTests:
        if self.scaling is not None and not self.entry_point:
            raise ValueError("tests.scaling needs tests.entry_point (the function the generated inputs go to)")
        return self


class FunctionCase(Strict):
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None


class FunctionTests(Strict):
    kind: Literal["function"]
    entry_point: str = Field(min_length=1)
    cases: list[FunctionCase] = Field(min_length=1)
    float_tol: float | None = Field(None, ge=0, strict=True)
    scaling: Scaling | None = None


class FloatTolerance(Strict):
    float_tol: float = Field(ge=0, strict=True)


class IOCase(Strict):
    stdin: str = ""
    stdout: str


class IOTests(Strict):
    kind: Literal["io"]
    cases: list[IOCase] = Field(min_length=1)
    compare: Literal["exact", "lines", "tokens"] | FloatTolerance = "lines"


class PytestTests(Strict):
    kind: Literal["pytest"]
    test_code: str = Field(min_length=1)


class RustTests(Strict):
    """A `#[cfg(test)] mod tests { ... #[test] fn ... }` module compiled with the program by `rustc --test`."""

    kind: Literal["rust_test"]
    test_code: str = Field(min_length=1)
    entry_point: str | None = None


Tests = Annotated[AssertTests | FunctionTests | IOTests | PytestTests | RustTests | RepoTests,
                  Field(discriminator="kind")]


class ItemLimits(Strict):
    timeout_s: float = Field(10.0, gt=0, strict=True, description="wall-clock limit of each test case")
    memory_mb: int = Field(512, ge=32, strict=True, description="address-space limit of the program")
    compile_timeout_s: float = Field(30.0, gt=0, le=120, strict=True,
                                     description="wall/CPU limit of the compile step")


def _weight(default: float) -> Any:
    return Field(default, ge=0, le=MAX_WEIGHT, strict=True)


class Weights(Strict):
    executability: float = _weight(0.4)
    pass_rate: float = _weight(0.35)
    quality: float = _weight(0.15)
    efficiency: float = _weight(0.1)

    @model_validator(mode="after")
    def _positive_sum(self) -> Weights:
        if sum(self.as_dict().values()) <= 0:
            raise ValueError("weights must sum to more than 0")
        return self

    def as_dict(self) -> dict[str, float]:
        return {c: getattr(self, c) for c in COMPONENTS}


class RewardItem(Strict):
    id: str | None = Field(None, max_length=256, description="client rollout id, echoed")
    language: str = "python"
    code: str
    tests: Tests | None = None
    limits: ItemLimits = Field(default_factory=ItemLimits)
    reference_code: str | None = None
    profile: Literal["seed", "gated", "binary", "pass_rate", "coderl"] = "seed"
    weights: Weights | None = None
    flag_penalty: float = Field(0.0, ge=0, le=10, strict=True)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Repo items (tests.kind "repo", service/repos/models.py): the repository and the change graded against its tests.
    repo: RepoRef | None = None
    patch: str | None = Field(None, description="unified diff against the repository (git style, -p1 or -p0)")
    files: dict[str, str] | None = Field(None, description="whole new contents of files, instead of a patch")
    environment: EnvironmentRef | None = Field(None, description="where the item runs: an environment (`id`) or "
                                               "a Docker image on the host (`image`); default: rewardbox's image")

    @field_validator("language")
    @classmethod
    def _supported(cls, v: str) -> str:
        name = v.strip().lower()
        if name not in SUPPORTED_LANGUAGES:
            raise PydanticCustomError(UNSUPPORTED_LANGUAGE, "'{language}' is not supported; supported: {supported}",
                                      {"language": v[:64], "supported": ", ".join(SUPPORTED_LANGUAGES)})
        return name

    @model_validator(mode="after")
    def _tests_can_outweigh(self) -> RewardItem:
        """seed/gated promise that passing every test beats not passing (service/reward.py): that needs a weight."""
        w = self.weights
        if w is not None and self.profile in ("seed", "gated") and w.executability + w.pass_rate <= 0:
            raise ValueError("weights: executability + pass_rate must be > 0 under the seed and gated profiles")
        return self

    @model_validator(mode="before")
    @classmethod
    def _repo_items_have_no_code(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("tests"), dict) and data["tests"].get("kind") == "repo":
            return {"code": "", **data}
        return data

    @model_validator(mode="after")
    def _repo_or_program(self) -> RewardItem:
        check_repo_fields(self)
        return self


MAX_DEADLINE_S = 3600.0
Deadline = Annotated[float, Field(gt=0, le=MAX_DEADLINE_S, strict=True, allow_inf_nan=False)]


class BatchRequest(Strict):
    items: list[Any] = Field(min_length=1, description="reward items; each is validated on its own, and one that "
                             "is invalid comes back invalid_input without failing the others")
    defaults: dict[str, Any] | None = Field(None, description="fields every item takes unless it sets them itself "
                                            "(e.g. the tests, profile and limits of a GRPO group, sent once for "
                                            "all its samples); any item field but `id`")
    deadline_s: Deadline | None = Field(None, description="items not started this many seconds after the request"
                                        " arrived come back as infra_error (default REWARDBOX_DEADLINE_S)")


class TestVerdict(BaseModel):
    name: str
    passed: bool
    status: str
    message: str = ""
    cpu_ms: float | None = None


class Execution(BaseModel):
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    peak_memory_kb: int = 0
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False


class ItemResult(BaseModel):
    id: str | None = None
    rollout_id: str
    status: Literal["passed", "failed", "syntax_error", "runtime_error", "timeout", "memory_limit", "output_limit",
                    "patch_error", "invalid_input", "infra_error"]
    reward: float | None
    profile: str | None = None
    weights: dict[str, float] | None = None
    components: dict[str, float | None] = Field(default_factory=dict)
    tests: list[TestVerdict] = Field(default_factory=list)
    execution: Execution = Field(default_factory=Execution)
    flags: list[str] = Field(default_factory=list)
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict, description="lint messages, efficiency inputs, ...")

    @model_serializer(mode="wrap")
    def _names_as_text(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A file name a program made may hold bytes that are not UTF-8 (a surrogate escape here): such a string
        goes out git-quoted (rewardbox/names.py), so that every result serialises and no batch loses its others.
        Here, at the one way out, because results are assigned to and mutated after they are built."""
        fields = {name: as_text(getattr(self, name)) for name in type(self).model_fields}
        return handler(type(self).model_construct(**fields))  # (dict keys: the handler's own output loses them)


def as_text(value: Any) -> Any:
    """value with every string (dict keys too) that is not UTF-8 text replaced by its quoted form."""
    if isinstance(value, str):
        return wire(value)
    if isinstance(value, dict):
        return {as_text(k): as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_text(v) for v in value]
    return value


class BatchResult(BaseModel):
    results: list[ItemResult]
