"""One validation for every route: a client mistake is answered 4xx naming the field, and never reaches a sandbox.

Two layers, both here or in service/models.py, called from one place (the executors' `score_many` and `run_code`,
which every route goes through):
- the pydantic models check each field on its own: types (numbers are strict and finite: `false` is not 0, NaN
  is not a limit), ranges, unknown fields, the language;
- `check_item` adds what depends on the deployment's `Settings` (code size, limit caps, cases per item) and what
  a field-by-field model cannot see: text that cannot be encoded (lone surrogates), values nested too deep,
  numbers that are not finite inside free-form values, test kinds the language lacks, and test specs that can
  judge no program (service/spec_checks.py).
Each mistake is a `Problem` (where, what, a machine-readable type), shaped like pydantic's errors, so every 4xx
body has the same form: `{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from rewardbox import batching
from sandboxes.languages import accepted_test_kinds
from service.config import Settings
from service.models import SUPPORTED_LANGUAGES, UNSUPPORTED_LANGUAGE, ItemLimits, RewardItem
from service.spec_checks import spec_problem

ITEM = TypeAdapter(RewardItem)
TEST_KINDS = accepted_test_kinds()  # language -> its test kinds (the registry's Language.test_kinds)
MAX_NESTING = 100  # levels of lists/objects in one item; the sandbox codec stops at 200, pydantic's dump near 255
MAX_FILES = 256  # /run_code files: each is a file (and its folders) in a job directory of 4096 inodes
# Absolute places a job may also write and fetch_files may name (the sandbox's private /tmp and /mnt tmpfs, wiped
# after every job: sandboxes/inside/runner.SHARED_ROOTS).
FETCH_ROOTS = ("/tmp/", "/mnt/")
MAX_FILES_BYTES = 8 << 20  # /run_code files, decoded, together (the job writes them under its memory limit)
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One client mistake: where it is (a path into the request body), what it is, and its type."""

    loc: Loc
    msg: str
    type: str = "value_error"

    @property
    def field(self) -> str:
        return ".".join(str(p) for p in self.loc) or "body"

    @property
    def message(self) -> str:
        return f"{self.field}: {self.msg}"

    def error(self, prefix: Loc = ("body",)) -> dict[str, Any]:
        """pydantic's error shape (without `input`, which may be huge or not serialisable)."""
        return {"loc": [printable(p) for p in (*prefix, *self.loc)], "msg": printable(self.msg), "type": self.type}

    def within(self, *prefix: str | int) -> Problem:
        return Problem((*prefix, *self.loc), self.msg, self.type)


class InvalidRequest(Exception):
    """A request the service will not run: answered 400 for an unsupported language (with the list), else 422."""

    def __init__(self, problems: Sequence[Problem], prefix: Loc = ("body",)) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems, self.prefix = list(problems), prefix

    @property
    def status_code(self) -> int:
        return 400 if any(p.type == UNSUPPORTED_LANGUAGE for p in self.problems) else 422

    def body(self) -> dict[str, Any]:
        detail = [p.error(self.prefix) for p in self.problems]
        for d in detail:  # the list goes with the language error alone, not with the request's other mistakes
            if d["type"] == UNSUPPORTED_LANGUAGE:
                d["supported"] = list(SUPPORTED_LANGUAGES)
        return {"detail": detail}


def printable(value: Any) -> Any:
    """A string that can go into a JSON body: what cannot be encoded (lone surrogates) is escaped."""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-8", "backslashreplace").decode()
    return value


def problems_of(error: ValidationError) -> list[Problem]:
    return [Problem(tuple(e["loc"]), e["msg"], e["type"]) for e in error.errors(include_url=False)]


def request_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """FastAPI's own validation errors in the same shape: loc, msg, type (its `input` and `ctx` can hold NaN,
    bytes or megabytes of a request, which an error body must not echo)."""
    return [{"loc": [printable(p) for p in e.get("loc", ())], "msg": printable(str(e.get("msg", ""))),
             "type": str(e.get("type", "value_error"))} for e in errors]


# -- values pydantic cannot judge field by field


def _children(value: Any) -> Iterator[tuple[str | int, Any]]:
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield name, getattr(value, name)
    elif isinstance(value, dict):
        yield from value.items()
    elif isinstance(value, list | tuple):
        yield from enumerate(value)


def value_problem(value: Any, loc: Loc = ()) -> Problem | None:
    """The first string that cannot be encoded as UTF-8 (a lone surrogate: JSON allows `\\ud800`, nothing
    downstream can write it), number that is not finite, or nesting deeper than MAX_NESTING. Iterative, so a
    value nested a million levels deep costs a loop, not the stack."""
    stack: list[tuple[Loc, Any, int]] = [(loc, value, 0)]
    while stack:
        where, v, depth = stack.pop()
        if isinstance(v, str):
            if not v.isascii():
                try:
                    v.encode()
                except UnicodeEncodeError as e:
                    return Problem(where, f"text that cannot be encoded as UTF-8 at character {e.start} "
                                          "(a lone surrogate)", "string_unicode")
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return Problem(where, "numbers must be finite (NaN and Infinity are not JSON)", "finite_number")
            continue
        if depth >= MAX_NESTING:
            if isinstance(v, BaseModel | dict | list | tuple):
                return Problem(_field_of(where), f"nested deeper than {MAX_NESTING} levels", "too_deep")
            continue
        if isinstance(v, dict):
            for key in v:
                if isinstance(key, str) and not key.isascii():
                    problem = value_problem(key, (*where, key))
                    if problem:
                        return problem
        stack.extend(((*where, k), child, depth + 1) for k, child in _children(v))
    return None


def _field_of(loc: Loc) -> Loc:
    """A deep position reported by the field that holds it: the list indexes below the last name dropped, and at
    most 12 steps (a hundred `0`s name nothing a reader can use)."""
    end = len(loc)
    while end > 1 and isinstance(loc[end - 1], int):
        end -= 1
    return loc[:min(end, 12)]


# -- reward items


def parse_item(raw: Any, settings: Settings) -> RewardItem | Problem:
    """A raw item of a batch (or an OpenRLHF label turned into one), fully checked."""
    if isinstance(raw, dict | list):
        problem = value_problem(raw)
        if problem:
            return problem
    try:
        item = ITEM.validate_python(raw)
    except ValidationError as e:
        return problems_of(e)[0]
    return check_item(item, settings, values_checked=True)


def check_item(item: RewardItem, settings: Settings, values_checked: bool = False) -> RewardItem | Problem:
    """The checks that depend on settings, and the values no field type can judge. The language itself is
    checked by the model."""
    if not values_checked:
        problem = value_problem(item)
        if problem:
            return problem
    if item.tests is not None and item.tests.kind not in TEST_KINDS[item.language]:
        return Problem(("tests", "kind"), f"{item.tests.kind!r} is not available for {item.language}; available: "
                       f"{', '.join(TEST_KINDS[item.language])}", "test_kind")
    if item.tests is not None:
        found = spec_problem(item.tests, item.language)
        if found:
            return Problem(("tests", *found[0]), found[1], found[2])
    if len(item.code.encode()) > settings.max_code_bytes:
        return Problem(("code",), f"longer than {settings.max_code_bytes} bytes", "too_long")
    cases = getattr(item.tests, "cases", None)
    if cases is not None and len(cases) > settings.max_cases:
        return Problem(("tests", "cases"), f"at most {settings.max_cases} cases per item (REWARDBOX_MAX_CASES)",
                       "too_long")
    if item.limits.timeout_s > settings.max_timeout_s:
        return Problem(("limits", "timeout_s"), f"at most {settings.max_timeout_s:g}", "less_than_equal")
    if item.limits.memory_mb > settings.max_memory_mb:
        return Problem(("limits", "memory_mb"), f"at most {settings.max_memory_mb}", "less_than_equal")
    if item.environment is not None:
        return environment_problem(item, settings) or item
    return item


def environment_problem(item: RewardItem, settings: Settings) -> Problem | None:
    """The item's environment must resolve (an image on the host, a built environment) and suit the item."""
    from service.environments.pools import EnvironmentProblem, resolver

    if settings.redis_url:  # distributed: the workers hold the images and stores, and resolve it there
        return None
    try:
        target = resolver(settings.backend).resolve(item.environment)
    except EnvironmentProblem as e:
        return Problem(e.loc, e.message, "environment")
    if item.repo is None and item.tests is not None and item.tests.kind == "repo" and not target.repo_path:
        return Problem(("repo",), "required: the environment holds no repository (environment.repo_path)", "missing")
    return None


def item_work(item: RewardItem | Any) -> int:
    """What admission counts for an item: its test cases (each is at least one program run), at least 1. Works on
    raw (unvalidated) items too, so a flood is weighed before anything else is spent on it. The client counts the
    same way to cut a batch to the queue bound: one function, in the client package."""
    return batching.item_work(item)


DEFAULT_TIMEOUT_S = ItemLimits.model_fields["timeout_s"].default


def item_worst_s(item: RewardItem | Any, settings: Settings) -> float:
    """The longest an item's test runs may hold a sandbox: its cases at their wall limit, within the item's budget
    (REWARDBOX_MAX_ITEM_S). Works on raw items too (an unreadable limit counts as the default), like item_work."""
    limits = item.get("limits") if isinstance(item, dict) else getattr(item, "limits", None)
    timeout = limits.get("timeout_s") if isinstance(limits, dict) else getattr(limits, "timeout_s", None)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout < math.inf:
        timeout = DEFAULT_TIMEOUT_S
    return min(item_work(item) * min(float(timeout), settings.max_timeout_s), settings.max_item_s)


# -- /run_code files


def check_files(files: dict[str, str | None], fetch: list[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """SandboxFusion's `files` (path -> base64) and `fetch_files`: relative paths of plain names inside the job
    directory (fetch_files also under /tmp/ and /mnt/), no file that is also a folder, bounded in count and size.
    Raises InvalidRequest naming the path."""
    if len(files) > MAX_FILES:
        raise InvalidRequest([Problem(("files",), f"at most {MAX_FILES} files", "too_long")])
    if len(fetch) > MAX_FILES:
        raise InvalidRequest([Problem(("fetch_files",), f"at most {MAX_FILES} paths", "too_long")])
    out: dict[str, dict[str, str]] = {}
    total = 0
    for path, content in files.items():
        reason = path_problem(path)
        if reason:
            raise InvalidRequest([Problem(("files", path), reason, "path")])
        try:
            data = base64.b64decode(content or "", validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest([Problem(("files", path), "not base64", "base64")]) from None
        total += len(data)
        if total > MAX_FILES_BYTES:
            raise InvalidRequest([Problem(("files", path), f"the files exceed {MAX_FILES_BYTES >> 20} MiB together",
                                          "too_long")])
        out[path] = {"b64": base64.b64encode(data).decode()}
    folders = {"/".join(p.split("/")[:i]) for p in out for i in range(1, p.count("/") + 1)}
    for path in out:
        if path in folders:
            raise InvalidRequest([Problem(("files", path), "is both a file and a folder of another file", "path")])
    for i, path in enumerate(fetch):
        reason = path_problem(path, FETCH_ROOTS)
        if reason:
            raise InvalidRequest([Problem(("fetch_files", i), f"{path[:100]!r}: {reason}", "path")])
    return out, list(fetch)


def path_problem(path: str, roots: tuple[str, ...] = ()) -> str | None:
    """Why `path` cannot name a file inside the job directory (or below one of `roots`), or None."""
    if not path:
        return "empty path"
    if value_problem(path):
        return "cannot be encoded as UTF-8"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "control characters (NUL, newline, ...) are not allowed in paths"
    if len(path.encode()) > MAX_PATH_BYTES:
        return f"longer than {MAX_PATH_BYTES} bytes"
    root = next((r for r in roots if path.startswith(r)), "")
    if path.startswith("/") and not root:
        return "must be relative to the working directory" + (f" or under {' or '.join(roots)}" if roots else "")
    parts = path[len(root):].split("/")
    if any(p == "" for p in parts):
        return "empty path component (a trailing or doubled '/')"
    if any(p in (".", "..") for p in parts):
        return "'.' and '..' are not allowed"
    if any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        return f"a name longer than {MAX_NAME_BYTES} bytes"
    return None
