"""git and pip in agent sessions, over real HTTP against real sandboxes, on both backends: the workspace is a git
repository at the snapshot (one deterministic commit), git state lasts from command to command and into forks,
`pip install` works offline from the image's wheel folder into the session's site folder; and whatever an agent
does to its git state (commit, stash, checkout, reset, a rewritten or replaced .git, hooks and config that run
commands) changes nothing of its diff or reward, and nothing it plants runs on the host or in the grader."""

from __future__ import annotations

import os
import secrets

import pytest

from rewardbox.archive import repo_archive

from .conftest import BACKENDS, serving
from .session_calls import open_session, upload

CALC = {
    "pkg/__init__.py": b"",
    "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    ".gitignore": b"*.log\n",
    "notes.log": b"ignored by .gitignore, yet part of the snapshot\n",
}
TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
FIX = "sed -i 's/a - b/a + b/' pkg/calc.py"
SITE = "/scratch/c/.rewardbox-site"


@pytest.fixture(scope="module", params=BACKENDS)
def api(request):
    with serving({"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1",
                  "REWARDBOX_SESSION_POOL_SIZE": "2"}) as client:
        yield client


@pytest.fixture(scope="module")
def calc_id(api) -> str:
    return upload(api, CALC)


new = open_session


def sh(api, sid: str, command: str) -> dict:
    r = api.post(f"/sessions/{sid}/exec", json={"command": command})
    assert r.status_code == 200, r.text
    return r.json()


def ok(api, sid: str, command: str) -> str:
    out = sh(api, sid, command)
    assert out["exit_code"] == 0, out
    return out["stdout"]


def diff(api, sid: str) -> str:
    r = api.get(f"/sessions/{sid}/diff")
    assert r.status_code == 200, r.text
    return r.json()["patch"]


def reward(api, sid: str) -> float:
    r = api.post(f"/sessions/{sid}/reward", json={"tests": TESTS})
    assert r.status_code == 200, r.text
    assert r.json()["status"] in ("passed", "failed"), r.text
    return r.json()["reward"]


# ------------------------------------------------------------------------------------------------------ git


def test_the_workspace_is_a_clean_repository_with_one_deterministic_snapshot_commit(api, calc_id):
    a, b = new(api, calc_id), new(api, calc_id)
    log = ok(api, a, "git log --format='%H %an %at %s'")
    assert log.count("\n") == 1 and log.split()[1:] == ["rewardbox", "946684800", "snapshot"]
    assert ok(api, b, "git rev-parse HEAD").strip() == log.split()[0]  # same snapshot, same commit
    assert ok(api, a, "git status --porcelain") == ""
    assert ok(api, a, "git ls-files notes.log") == "notes.log\n"  # ignored files are in the commit too


def test_git_diff_and_status_show_the_agents_edit(api, calc_id):
    sid = new(api, calc_id)
    ok(api, sid, FIX)
    assert "+    return a + b" in ok(api, sid, "git diff")
    assert ok(api, sid, "git status --porcelain") == " M pkg/calc.py\n"
    assert ok(api, sid, "cd pkg && git diff --stat").startswith(" pkg/calc.py | 2 +-")  # from a subfolder too


def test_stash_pop_checkout_and_commit_last_from_command_to_command(api, calc_id):
    sid = new(api, calc_id)
    ok(api, sid, FIX)
    ok(api, sid, "git stash -q")
    assert "a - b" in ok(api, sid, "cat pkg/calc.py") and diff(api, sid) == ""
    ok(api, sid, "git stash pop -q")
    assert "a + b" in ok(api, sid, "cat pkg/calc.py") and "+    return a + b" in diff(api, sid)
    ok(api, sid, "git checkout -- pkg/calc.py")
    assert diff(api, sid) == ""
    ok(api, sid, f"{FIX} && git commit -qam fix")
    assert ok(api, sid, "git log --format=%s") == "fix\nsnapshot\n"
    assert ok(api, sid, "git status --porcelain") == ""


def test_git_config_global_lasts_and_stays_out_of_the_diff(api, calc_id):
    sid = new(api, calc_id)
    assert ok(api, sid, "git config user.name") == "agent\n"  # the default
    ok(api, sid, "git config --global user.name 'Some Agent'")
    assert ok(api, sid, "git commit -q --allow-empty -m x && git log -1 --format=%an") == "Some Agent\n"
    assert ok(api, sid, "ls -a | grep -c gitconfig || true") == "0\n"
    assert diff(api, sid) == ""


def test_the_files_api_refuses_the_git_directory(api, calc_id):
    sid = new(api, calc_id)
    for path in (".git/config", ".git/hooks/pre-commit", ".git"):
        r = api.put(f"/sessions/{sid}/files", json={"path": path, "content": "x"})
        assert r.status_code == 422 and "git" in r.text, r.text
        r = api.get(f"/sessions/{sid}/files", params={"path": path})
        assert r.status_code == 422 and "git" in r.text, r.text


def test_forks_keep_the_git_state_and_siblings_do_not_share_it(api, calc_id):
    sid = new(api, calc_id)
    ok(api, sid, f"{FIX} && git commit -qam fix && echo extra >> README.md && git stash -q -u")
    r = api.post(f"/sessions/{sid}/fork", json={"n": 2})
    assert r.status_code == 201, r.text
    one, two = r.json()["session_ids"]
    assert ok(api, one, "git log --format=%s") == "fix\nsnapshot\n"
    ok(api, one, "git stash pop -q")
    assert ok(api, one, "cat README.md") == "extra\n"
    assert ok(api, two, "git stash list").startswith("stash@{0}")  # the sibling's stash is its own
    assert ok(api, two, "ls README.md 2>&1 || true").startswith("ls:")


# ------------------------------------------------------------------------------------ hacks on the git state


def test_a_fix_committed_is_still_graded_as_the_workspace_holds_it(api, calc_id):
    sid = new(api, calc_id)
    ok(api, sid, f"{FIX} && git commit -qam fix")
    assert ok(api, sid, "git diff") == ""  # the agent's git sees nothing left to change
    assert "+    return a + b" in diff(api, sid)  # the service's diff is against the snapshot
    assert reward(api, sid) == 1.0


@pytest.mark.parametrize("away", ["git stash -q", "git checkout -- pkg/calc.py",
                                  "git commit -qam fix && git reset -q --hard HEAD~1"])
def test_a_fix_taken_away_by_git_earns_nothing(api, calc_id, away):
    sid = new(api, calc_id)
    ok(api, sid, f"{FIX} && {away}")
    assert diff(api, sid) == ""
    assert reward(api, sid) == 0.0


@pytest.mark.parametrize("rewrite", [
    "rm -rf .git",
    "rm -rf .git && printf 'gitdir: /etc\\n' > .git",
    "rm -rf .git && ln -s / .git",
    "rm -rf .git/objects && mkdir .git/objects",
    "printf 'ref: refs/heads/nothing\\n' > .git/HEAD",
])
def test_a_rewritten_git_directory_changes_nothing_of_the_diff_or_reward(api, calc_id, rewrite):
    sid = new(api, calc_id)
    ok(api, sid, f"{FIX} && {rewrite}")
    ok(api, sid, "true")  # the state is carried into the next command as it was left
    patch = diff(api, sid)
    assert ".git" not in patch.replace(".gitignore", "") and "+    return a + b" in patch
    assert reward(api, sid) == 1.0


def test_git_hooks_and_config_planted_by_an_agent_never_run_on_the_host_or_in_the_grader(api, calc_id):
    marker = f"/tmp/rewardbox-git-marker-{secrets.token_hex(8)}"
    # Each would write the marker on the host and fix calc.py wherever it ran (the grader's workspace included),
    # turning a reward of 0 into 1.
    payload = f"touch {marker}; printf 'def add(a, b):\\\\n    return a + b\\\\n' > pkg/calc.py"
    hooks = " ".join(f".git/hooks/{h}" for h in ("pre-commit", "post-checkout", "post-merge", "pre-applypatch",
                                                "post-applypatch", "post-index-change", "reference-transaction"))
    plant = (f"mkdir -p .git/hooks && for h in {hooks}; do printf '#!/bin/sh\\n%s\\n' \"$PAYLOAD\" > $h; "
             "chmod +x $h; done; "
             "git config core.fsmonitor \"$PAYLOAD\" && git config core.pager \"$PAYLOAD\" && "
             "git config alias.diff \"!$PAYLOAD\" && git config diff.external \"$PAYLOAD\" && "
             "git config core.hooksPath .git/hooks && "
             "printf '[core]\\n\\tsshCommand = %s\\n' \"$PAYLOAD\" > .gitconfig && "
             "printf '*.py diff=evil filter=evil\\n' > .gitattributes && "
             "git config filter.evil.clean \"$PAYLOAD\" && git config filter.evil.smudge \"$PAYLOAD\" && "
             "git config diff.evil.command \"$PAYLOAD\"")
    sid = new(api, calc_id)
    out = sh(api, sid, f"PAYLOAD=\"{payload}\"; {plant}")
    assert out["exit_code"] == 0, out
    ok(api, sid, "true")
    r = api.post(f"/sessions/{sid}/fork", json={"n": 2})
    assert r.status_code == 201, r.text
    child, control = r.json()["session_ids"]
    ok(api, child, "true")
    # The control: the agent's own git in a fork runs what was planted (in its sandbox, its own doing), which
    # shows the payload is live.
    sh(api, control, "git commit -q --allow-empty -m x")
    assert "a + b" in ok(api, control, "cat pkg/calc.py")
    patch = diff(api, sid)
    assert "a - b" not in patch and ".git/" not in patch
    assert reward(api, sid) == 0.0  # calc.py was never fixed: nothing planted ran in the grader
    assert not os.path.exists(marker)


@pytest.mark.parametrize("grow", ["head -c 200000 /dev/zero > .git/blob",
                                  f"mkdir -p {SITE}/junk && head -c 200000 /dev/zero > {SITE}/junk/blob"])
def test_git_and_site_state_count_against_the_workspace_cap_but_the_snapshot_commit_does_not(api, calc_id, grow):
    sid = new(api, calc_id, limits={"workspace_mb": 0.05})
    ok(api, sid, "git status --porcelain")  # the commit alone fits
    out = sh(api, sid, f"echo small > ok.txt; {grow}")
    assert out["status"] == "output_limit" and "workspace" in out["error"], out
    assert ok(api, sid, "ls .git/blob ok.txt 2>/dev/null || true") == ""  # the command's changes all dropped


def test_a_git_directory_in_the_snapshot_is_not_the_sessions(api):
    files = {**CALC, ".git/config": b"[core]\n\tfsmonitor = touch PWNED\n", ".git/HEAD": b"ref: refs/heads/x\n"}
    r = api.post("/repos", content=repo_archive(files), headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    sid = new(api, r.json()["id"])
    assert ok(api, sid, "git log --format=%s") == "snapshot\n"
    assert ok(api, sid, "git status --porcelain; ls PWNED 2>/dev/null || true") == ""
    ok(api, sid, FIX)
    assert ".git" not in diff(api, sid).replace(".gitignore", "")


# ------------------------------------------------------------------------------------------------------ pip


def test_pip_installs_a_wheel_of_the_image_into_the_sessions_site_folder(api, calc_id):
    sid = new(api, calc_id)
    out = sh(api, sid, "pip install six")
    assert out["exit_code"] == 0 and "Successfully installed six" in out["stdout"], out
    assert ok(api, sid, "python -c 'import six; print(six.__file__)'").startswith(f"{SITE}/six.py")
    assert ok(api, sid, "pip3 --version").startswith("pip ")
    assert diff(api, sid) == "" and ok(api, sid, "git status --porcelain") == ""
    r = api.post(f"/sessions/{sid}/fork", json={"n": 1})
    child = r.json()["session_ids"][0]
    assert ok(api, child, "python -c 'import six; print(six.__file__)'").startswith(SITE)


def test_pip_install_of_a_package_not_in_the_wheel_folder_fails_with_pips_message(api, calc_id):
    sid = new(api, calc_id)
    out = sh(api, sid, "pip install rewardbox-no-such-package")
    assert out["exit_code"] != 0
    assert "No matching distribution found for rewardbox-no-such-package" in out["stderr"], out


def test_a_package_installed_by_the_session_is_not_in_its_reward(api, calc_id):
    # The grader runs the workspace's tests without the session's site folder: installing a package changes
    # nothing of the grade, only the workspace's content does.
    sid = new(api, calc_id)
    ok(api, sid, "pip install -q six")
    assert reward(api, sid) == 0.0


# ----------------------------------------------------------------------------------------- git switched off


@pytest.fixture(scope="module", params=BACKENDS)
def no_git(request):
    with serving({"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1",
                  "REWARDBOX_SESSION_POOL_SIZE": "1", "REWARDBOX_SESSION_GIT": "0"}) as client:
        yield client


def test_with_session_git_off_the_workspace_is_no_repository(no_git):
    r = no_git.post("/repos", content=repo_archive(CALC), headers={"content-type": "application/gzip"})
    sid = new(no_git, r.json()["id"])
    out = sh(no_git, sid, "ls -a; git status")
    assert ".git\n" not in out["stdout"] and out["exit_code"] != 0
    assert "not a git repository" in out["stderr"], out
