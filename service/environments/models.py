"""Request shapes of task environments: what an environment is built from (`EnvironmentSpec`, POST /environments)
and how an item or session names the environment it runs in (`EnvironmentRef`).

An environment is content-addressed: its id is the sha256 of its canonical spec, so the same spec is built once.
A user's own image (`EnvironmentRef.image`, Docker backend) is not built: it must already be on the host.
"""

from __future__ import annotations

import hashlib
import json
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ENVIRONMENT_ID = r"^[0-9a-f]{64}$"
# Debian package names (policy 5.6.1), optionally pinned with =version.
_DEBIAN = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
# pip requirements: name, optional extras, version clauses (PEP 440 operators); no markers, URLs or options.
_CLAUSE = r" *(===|==|~=|!=|<=|>=|<|>) *[A-Za-z0-9.*+!_-]+"
_PIP = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?"
                  rf"({_CLAUSE}( *,{_CLAUSE})*)?$")
# npm packages as `name@version` or `@scope/name@version`: registry names only (no URL, path, git or option).
_NPM = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*@[A-Za-z0-9.^~<>=*+| -]{1,100}$")
# A docker image reference as users type it (name[:tag] or name@sha256:...); no options, no spaces.
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_.-]{1,128})?(@sha256:[0-9a-f]{64})?$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvironmentSpec(Strict):
    """What goes on top of rewardbox's base image; every field is optional, the order of lists is kept."""

    debian: list[str] = Field(default_factory=list, max_length=500, description="Debian bookworm packages")
    python: list[str] = Field(default_factory=list, max_length=500,
                              description="pip requirements, pinned (`name==version`); compiled wheels allowed")
    npm: list[str] = Field(default_factory=list, max_length=500, description="npm packages, pinned (`name@version`)")
    setup: list[str] = Field(default_factory=list, max_length=100,
                             description="shell commands run once at build time (never at grading time)")

    @field_validator("debian")
    @classmethod
    def _debian(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _DEBIAN.match(name):
                raise ValueError(f"{name[:100]!r} is not a Debian package name (name or name=version)")
        return v

    @field_validator("python")
    @classmethod
    def _python(cls, v: list[str]) -> list[str]:
        # Each line goes into a requirements file: an option line (-i, -r, --find-links...) or a URL would let the
        # spec choose where code comes from; only `name[extras]` with version clauses, from the configured registry.
        for line in v:
            if not _PIP.fullmatch(line):
                raise ValueError(f"{line[:100]!r} is not a pip requirement (name==version; no URLs or options)")
        return v

    @field_validator("npm")
    @classmethod
    def _npm(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _NPM.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not a pinned npm package (name@version)")
        return v

    @field_validator("setup")
    @classmethod
    def _setup(cls, v: list[str]) -> list[str]:
        for command in v:
            if not command.strip() or len(command) > 10_000 or "\0" in command:
                raise ValueError("a setup command is a non-empty shell command of at most 10000 characters")
        return v

    def canonical(self) -> str:
        """The spec as the id hashes it: sorted keys, no whitespace."""
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))

    def environment_id(self) -> str:
        return hashlib.sha256(self.canonical().encode()).hexdigest()


class EnvironmentRef(Strict):
    """Where an item or session runs: an environment built by POST /environments (`id`), or a user's own image
    already on the Docker host (`image`, with the interpreter to use and the repository's path in it)."""

    id: str | None = Field(None, pattern=ENVIRONMENT_ID, description="an id answered by POST /environments")
    image: str | None = Field(None, max_length=300, description="a Docker image on the host, e.g. "
                       "sweb.eval.x86_64.foo:latest")
    python: str | None = Field(None, max_length=300, description="absolute path of the interpreter tests run with "
                               "in `image` (e.g. /opt/miniconda3/envs/testbed/bin/python)")
    repo_path: str | None = Field(None, max_length=300, description="absolute path of the repository in `image` "
                                  "(e.g. /testbed); the item then needs no `repo`")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not _IMAGE.match(v):
            raise ValueError(f"{v[:100]!r} is not a Docker image reference (name[:tag] or name@sha256:digest)")
        return v

    @field_validator("python", "repo_path")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or "\0" in v or ".." in v.split("/")):
            raise ValueError(f"{v[:100]!r} must be an absolute path without '..'")
        return v

    @model_validator(mode="after")
    def _one(self) -> EnvironmentRef:
        if (self.id is None) == (self.image is None):
            raise ValueError("give exactly one of environment.id and environment.image")
        if self.id is not None and (self.python or self.repo_path):
            raise ValueError("environment.python and environment.repo_path go with environment.image only")
        return self
