"""Request and response shapes of /reward and /reward/batch (pydantic v2)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SUPPORTED_LANGUAGES = ("python", "javascript", "typescript", "c", "cpp", "java", "go", "rust", "bash")
PROFILES = ("seed", "gated", "binary", "coderl")
COMPONENTS = ("executability", "pass_rate", "quality", "efficiency")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AssertTests(Strict):
    """HumanEval `check(candidate)` + entry_point, or MBPP-style plain assert lines."""

    kind: Literal["assert"]
    test_code: str = Field(min_length=1)
    entry_point: str | None = None
    support_code: str | None = Field(None, description="trusted dataset code the tests may use (HumanEval prompt)")


class FunctionCase(Strict):
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None


class FunctionTests(Strict):
    kind: Literal["function"]
    entry_point: str = Field(min_length=1)
    cases: list[FunctionCase] = Field(min_length=1)
    float_tol: float | None = Field(None, ge=0)


class FloatTolerance(Strict):
    float_tol: float = Field(ge=0)


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


Tests = Annotated[AssertTests | FunctionTests | IOTests | PytestTests | RustTests, Field(discriminator="kind")]


class ItemLimits(Strict):
    timeout_s: float = Field(10.0, gt=0, description="wall-clock limit of each test case")
    memory_mb: int = Field(512, ge=32, description="address-space limit of the program")
    compile_timeout_s: float = Field(30.0, gt=0, le=120, description="wall/CPU limit of the compile step")


class Weights(Strict):
    executability: float = Field(0.4, ge=0)
    pass_rate: float = Field(0.35, ge=0)
    quality: float = Field(0.15, ge=0)
    efficiency: float = Field(0.1, ge=0)

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
    profile: Literal["seed", "gated", "binary", "coderl"] = "seed"
    weights: Weights | None = None
    flag_penalty: float = Field(0.0, ge=0, le=10)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("language")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip().lower()


class BatchRequest(BaseModel):
    items: list[Any] = Field(min_length=1)


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
                    "invalid_input", "infra_error"]
    reward: float | None
    profile: str | None = None
    weights: dict[str, float] | None = None
    components: dict[str, float | None] = Field(default_factory=dict)
    tests: list[TestVerdict] = Field(default_factory=list)
    execution: Execution = Field(default_factory=Execution)
    flags: list[str] = Field(default_factory=list)
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict, description="lint messages, efficiency inputs, ...")


class BatchResult(BaseModel):
    results: list[ItemResult]
