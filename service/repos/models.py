"""Request shapes of repo items (`tests.kind: "repo"`): which repository, which change, which tests.

An item names a stored snapshot (`repo.id`, see service/repos/snapshots.py) or carries it (`repo.archive_b64`), and the
change as a unified diff (`patch`) or as whole files (`files`). `tests.fail_to_pass` and `tests.pass_to_pass` are
pytest node ids (SWE-bench's FAIL_TO_PASS / PASS_TO_PASS); `tests.test_files` are written over whatever the change
did to them before the tests run.
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandboxes.languages import LANGUAGES

MAX_TESTS = 20000
NODE_FRAMEWORKS = ("node:test",)
PYTEST_COMMANDS = (("pytest",), ("py.test",), ("python", "-m", "pytest"), ("python3", "-m", "pytest"))


def safe_path(path: str) -> str:
    """A relative path inside the repository ("a/b.py"), or ValueError."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not path or path.startswith("/") or "\\" in path or "\0" in path or ".." in parts or not parts:
        raise ValueError(f"{path[:200]!r} is not a relative path inside the repository")
    return "/".join(parts)


class RepoRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="sha256 of an archive stored by POST /repos")
    archive_b64: str | None = Field(None, description="the .tar.gz itself, base64 (stored like an upload)")

    @model_validator(mode="after")
    def _one(self) -> RepoRef:
        if (self.id is None) == (self.archive_b64 is None):
            raise ValueError("give exactly one of repo.id and repo.archive_b64")
        return self


class RepoTests(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["repo"]
    framework: Literal["pytest", "node:test"] = Field(
        "pytest", description="the repository's test runner: pytest (language python) or node:test (language "
        "javascript; ids `path/file.test.js::suite > test`, docs/repo-node.md)")
    test_files: dict[str, str] = Field(default_factory=dict, description="trusted test files, written last")
    fail_to_pass: list[str] = Field(default_factory=list, max_length=MAX_TESTS)
    pass_to_pass: list[str] = Field(default_factory=list, max_length=MAX_TESTS)
    command: str | list[str] | None = Field(None, description="the repository's test command, e.g. `pytest -p "
                                            "pytest_asyncio`: its options are passed to pytest (trusted)")

    @field_validator("test_files")
    @classmethod
    def _paths(cls, v: dict[str, str]) -> dict[str, str]:
        return {safe_path(p): content for p, content in v.items()}

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _node_ids(cls, v: list[str]) -> list[str]:
        for node in v:
            safe_path(node.split("::", 1)[0])
        return v

    @model_validator(mode="after")
    def _some_test(self) -> RepoTests:
        if not self.fail_to_pass and not self.pass_to_pass:
            raise ValueError("tests: list at least one node id in fail_to_pass or pass_to_pass")
        if self.framework != "pytest" and self.command is not None:
            raise ValueError("tests.command: only for framework pytest")
        self.pytest_args()
        return self

    def listed(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS, each node id once."""
        return list(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))

    def pytest_args(self) -> list[str]:
        """The options of `command` (after `pytest` / `python -m pytest`)."""
        if self.command is None:
            return []
        words = shlex.split(self.command) if isinstance(self.command, str) else list(self.command)
        for prefix in PYTEST_COMMANDS:
            if tuple(words[: len(prefix)]) == prefix:
                return words[len(prefix):]
        raise ValueError("tests.command: must run pytest (`pytest ...` or `python -m pytest ...`)")


def check_repo_fields(item) -> None:
    """A RewardItem is a repo item (tests.kind "repo", a repo, one change and no code) or a program item (code,
    and none of repo, patch, files)."""
    is_repo = item.tests is not None and item.tests.kind == "repo"
    if not is_repo:
        extra = [name for name in ("repo", "patch", "files") if getattr(item, name) is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)}: only for tests.kind 'repo'")
        return
    env = getattr(item, "environment", None)
    if item.repo is None and not (env is not None and env.repo_path):  # else: the repository in the user's image
        raise ValueError("repo: required for tests.kind 'repo' ({'id': ...} or {'archive_b64': ...}), unless "
                         "environment.repo_path names the repository in environment.image")
    if item.code:
        raise ValueError("code: a repo item carries its change in patch or files, not code")
    if (item.patch is None) == (item.files is None):
        raise ValueError("give exactly one of patch (a unified diff; may be empty) and files")
    if item.files is not None:
        item.files = {safe_path(p): content for p, content in item.files.items()}
    if item.tests.framework in NODE_FRAMEWORKS:
        if item.language != "javascript":
            raise ValueError(f"language: tests.framework {item.tests.framework!r} is for language 'javascript'")
        return
    repo_languages = [name for name, lang in LANGUAGES.items() if {"repo", "pytest"} <= set(lang.test_kinds)]
    if item.language not in repo_languages:
        raise ValueError(f"language: repo items are {' or '.join(repo_languages)} (pytest) or javascript "
                         "(tests.framework 'node:test') for now")
