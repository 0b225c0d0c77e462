"""The settings table (service/config.py): parsed from REWARDBOX_* variables, documented in docs/configuration.md,
and the only place configuration is read (nothing under sandboxes/ or graders/ looks at the environment)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.config import ConfigError, RepoSettings, SessionSettings, Settings, env_table, variable
from service.repos.archive import ArchiveLimits

ROOT = Path(__file__).resolve().parent.parent
# Run inside the sandbox (its own environment) or at image build time, not by the service.
NOT_SERVICE_CODE = ("sandboxes/inside/", "sandboxes/image/npm_install.py")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    """A clean REWARDBOX_* environment; returns a setter."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("REWARDBOX_") or name.upper() == "REDIS_URL":
            monkeypatch.delenv(name)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


def test_every_setting_is_in_the_docs_table_as_generated():
    readme = (ROOT / "docs" / "configuration.md").read_text()
    rows = set(re.findall(r"^\| `(REWARDBOX_[A-Z0-9_]+)` \|", readme, re.M))
    missing = [variable(name) for name in Settings.model_fields if variable(name) not in rows]
    assert not missing, f"docs/configuration.md's table lacks {missing}"
    assert env_table() in readme, "docs/configuration.md's table differs from `python -m service.config`"


def test_variables_are_the_field_names_with_the_prefix(env):
    env(REWARDBOX_MAX_BATCH="7", REWARDBOX_MAX_BODY_MB="4", REWARDBOX_MAX_CODE_KB="1.5", REWARDBOX_TOKEN="t",
        REWARDBOX_DB="off", REWARDBOX_BACKEND="bubblewrap", REWARDBOX_SANDBOX_MAX_JOBS="5",
        REWARDBOX_EFFICIENCY_ROUNDS="3", REWARDBOX_CACHE="/tmp/rb-cache")
    s = Settings.from_env()
    assert (s.max_batch, s.max_body_bytes, s.max_code_bytes, s.token) == (7, 4 << 20, 1536, "t")
    assert (s.db_file, s.backend, s.sandbox_max_jobs, s.efficiency_rounds) == (None, "bubblewrap", 5, 3)
    assert s.cache_dir == Path("/tmp/rb-cache")


def test_the_rollout_store_defaults_to_the_cache_folder(env):
    env(REWARDBOX_CACHE="/tmp/rb-cache")
    assert Settings.from_env().db_file == Path("/tmp/rb-cache/rollouts.sqlite3")
    env(REWARDBOX_DB="/tmp/elsewhere.sqlite3")
    assert Settings.from_env().db_file == Path("/tmp/elsewhere.sqlite3")


def test_redis_url_is_still_read_from_its_old_name(env):
    env(REDIS_URL="redis://old:6379/0")
    assert Settings.from_env().redis_url == "redis://old:6379/0"
    env(REWARDBOX_REDIS_URL="redis://new:6379/0")
    assert Settings.from_env().redis_url == "redis://new:6379/0"
    assert Settings(redis_url="redis://given").redis_url == "redis://given"


def test_an_empty_variable_means_the_default(env):
    env(REWARDBOX_MAX_BATCH="", REWARDBOX_POOL_SIZE="")
    assert (Settings.from_env().max_batch, Settings.from_env().pool_size) == (1024, 0)


def test_a_value_that_does_not_parse_names_its_variable(env):
    env(REWARDBOX_MAX_BATCH="lots", REWARDBOX_BACKEND="podman", REWARDBOX_SESSIONS_MAX="-1")
    with pytest.raises(ConfigError) as e:
        Settings.from_env()
    lines = str(e.value).splitlines()
    assert [line.split("=")[0] for line in lines] == ["REWARDBOX_MAX_BATCH", "REWARDBOX_BACKEND",
                                                      "REWARDBOX_SESSIONS_MAX"]
    assert "'podman'" in lines[1] and "docker" in lines[1]


def test_a_misspelt_keyword_is_refused():
    with pytest.raises(ValueError, match="max_batchh"):
        Settings(max_batchh=3)


def test_sessions_and_repos_get_their_values_in_bytes(env):
    env(REWARDBOX_SESSIONS_MAX="3", REWARDBOX_SESSIONS_MAX_MB="0.5", REWARDBOX_SESSION_POOL_SIZE="1",
        REWARDBOX_REPO_MAX_ARCHIVE_MB="1", REWARDBOX_REPO_MAX_FILES="9", REWARDBOX_REPO_STORE_MB="2",
        REWARDBOX_REPO_MAX_CHANGE_KB="8", REWARDBOX_SANDBOX_MAX_JOBS="50")
    s = Settings.from_env()
    assert (s.sessions.max_open, s.sessions.max_bytes, s.sessions.pool_size, s.sessions.sandbox_max_jobs) == (
        3, 1 << 19, 1, 50)
    assert s.repos.limits == ArchiveLimits(archive_bytes=1 << 20, unpacked_bytes=ArchiveLimits.unpacked_bytes,
                                           files=9, depth=ArchiveLimits.depth)
    assert (s.repos.store_bytes, s.repos.max_change_bytes) == (2 << 20, 8 << 10)


def test_the_defaults_are_those_of_the_parts(env):
    s = Settings.from_env()
    assert s.sessions == SessionSettings() and s.repos == RepoSettings()


def test_settings_are_hashable_values():
    """repo_store() keeps one store per settings value."""
    assert hash(Settings(max_cases=3)) == hash(Settings(max_cases=3))


def test_nothing_below_the_service_reads_the_environment():
    """Values are passed down from the one settings object; sandboxes/ and graders/ take them as arguments."""
    readers = re.compile(r"\bos\.environ\b|\bgetenv\b|\benviron\.get\b")
    found = []
    for folder in ("sandboxes", "graders"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(NOT_SERVICE_CODE):
                continue
            found += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if readers.search(line)]
    assert not found, f"read the environment below service/: {found}"


def test_serve_with_a_bad_value_stops_at_start_up_naming_it():
    import os
    import subprocess
    import sys

    env = {**os.environ, "REWARDBOX_MAX_QUEUED": "many"}
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", "1"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "REWARDBOX_MAX_QUEUED='many'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
