"""The repo contract over real HTTP: POST /repos and GET /repos/{id}, bad archives refused whole, the LRU budget,
repo items in /reward and /reward/batch (a GRPO group of patches), the result cache, and the SWE-bench converter."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import random
import tarfile

import httpx
import pytest

from rewardbox.archive import repo_archive
from service.compat import swebench
from service.repos.benchmark import tasks

from .conftest import serving
from .repo_hacks import HACKS, hack_patch, repo_diff

TASKS = tasks()
TOOLZ = next(t for t in TASKS if t["instance_id"] == "toolz-1.2.0-bug0")
GZIP = {"content-type": "application/gzip"}
# Limits small enough to hit: 300 KB archives and unpacked, 64 entries, depth 6; a store of 400 KB.
LIMITS_ENV = {"REWARDBOX_REPO_MAX_ARCHIVE_MB": str(300 / 1024), "REWARDBOX_REPO_MAX_UNPACKED_MB": str(300 / 1024),
              "REWARDBOX_REPO_MAX_FILES": "64", "REWARDBOX_REPO_MAX_DEPTH": "6",
              "REWARDBOX_REPO_STORE_MB": str(400 / 1024), "REWARDBOX_RESULT_CACHE_SIZE": "1000"}


@pytest.fixture(scope="module")
def small():
    """A server of its own with small repository limits and store budget."""
    with serving(LIMITS_ENV) as client:
        yield client


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def upload(client: httpx.Client, archive: bytes) -> httpx.Response:
    return client.post("/repos", content=archive, headers=GZIP)


def item(repo_id: str, patch: str, task: dict = TOOLZ, **extra) -> dict:
    return {**swebench.to_item(task, repo_id, patch), **extra}


def test_upload_is_content_addressed_and_get_says_whether_it_is_stored(small):
    archive = TOOLZ["archive"]
    first = upload(small, archive)
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["id"] == hashlib.sha256(archive).hexdigest() and body["created"]
    assert body["archive_bytes"] == len(archive) and body["files"] > 40 and body["stripped"] == "toolz-1.2.0"
    assert upload(small, archive).status_code == 200
    got = small.get(f"/repos/{body['id']}")
    assert got.status_code == 200 and got.json()["exists"] and got.json()["unpacked_bytes"] == body["unpacked_bytes"]
    missing = small.get("/repos/" + "0" * 64)
    assert missing.status_code == 404 and missing.json()["exists"] is False
    assert small.get("/repos/not-an-id").status_code == 422
    assert small.post("/repos", content=archive, headers={"content-type": "application/json"}).status_code == 415


BAD_ARCHIVES = {
    "absolute path": (400, "absolute", [(member("/etc/evil"), b"x")]),
    "dot-dot": (400, "..", [(member("repo/../../evil"), b"x")]),
    "link outside": (400, "outside", [(member("repo/a", tarfile.SYMTYPE, "../../etc/passwd"), None),
                                      (member("repo/b"), b"x")]),
    "absolute link": (400, "outside", [(member("repo/a", tarfile.SYMTYPE, "/etc/passwd"), None)]),
    "path through a link": (400, "not a directory", [(member("repo/d", tarfile.SYMTYPE, "e"), None),
                                                     (member("repo/e", tarfile.DIRTYPE), None),
                                                     (member("repo/d/x"), b"x")]),
    "hard link outside": (400, "hard link", [(member("repo/h", tarfile.LNKTYPE, "/etc/passwd"), None)]),
    "device": (400, "device", [(member("repo/dev", tarfile.CHRTYPE), None)]),
    "fifo": (400, "FIFO", [(member("repo/fifo", tarfile.FIFOTYPE), None)]),
    "too many files": (413, "entries", [(member(f"repo/f{i}"), b"x") for i in range(80)]),
    "too deep": (413, "deeper", [(member("repo/" + "/".join("d" * 8) + "/f"), b"x")]),
    "unpacks too big": (413, "unpacks", [(member("repo/big"), b"\0" * (400 << 10))]),
}


@pytest.mark.parametrize("case", sorted(BAD_ARCHIVES))
def test_a_bad_archive_is_a_4xx_naming_the_problem_and_nothing_is_kept(small, case):
    status, words, members = BAD_ARCHIVES[case]
    archive = tar_gz(members)
    r = upload(small, archive)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"], r.json()
    assert small.get(f"/repos/{hashlib.sha256(archive).hexdigest()}").status_code == 404


def test_not_gzip_and_an_archive_over_the_byte_limit(small):
    r = upload(small, b"plain text, no tar")
    assert r.status_code == 400 and "gzip" in r.json()["detail"]
    big = repo_archive({"blob": noise(350 << 10, 1)})
    r = upload(small, big)
    assert r.status_code == 413 and "limit" in r.json()["detail"]


def test_the_store_keeps_its_budget_by_evicting_the_least_recently_used(small):
    a, b, c = (repo_archive({"data.bin": noise(150 << 10, seed)}, f"r{seed}") for seed in (10, 11, 12))
    ids = [upload(small, x).json()["id"] for x in (a, b)]
    assert small.get(f"/repos/{ids[0]}").status_code == 200  # a used again: b is now the oldest
    ids.append(upload(small, c).json()["id"])
    assert [small.get(f"/repos/{i}").status_code for i in ids] == [200, 404, 200]
    r = small.post("/reward", json=item(ids[1], ""))
    assert r.status_code == 422 and "upload it again" in r.text


def test_gold_empty_broken_and_hacked_patches_of_a_grpo_group_in_one_batch(api):
    repo_id = upload(api, TOOLZ["archive"]).json()["id"]
    hack = next(h for h in HACKS if h.name == "conftest_at_root")
    patches = [TOOLZ["patch"], TOOLZ["patch"], "", "", "garbage\n", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
               hack_patch(hack, TOOLZ), hack_patch(HACKS[0], TOOLZ)]
    batch = {"items": [item(repo_id, p, id=f"p{i}", profile="binary") for i, p in enumerate(patches)]}
    r = api.post("/reward/batch", json=batch)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["status"] for x in results] == ["passed", "passed", "failed", "failed", "patch_error", "patch_error",
                                              "failed", "failed"], [(x["status"], x["message"]) for x in results]
    assert [x["reward"] for x in results] == [1.0, 1.0, 0, 0, 0, 0, 0, 0]
    gold = results[0]
    listed = TOOLZ["FAIL_TO_PASS"] + TOOLZ["PASS_TO_PASS"]
    assert [t["name"] for t in gold["tests"]] == listed and all(t["passed"] for t in gold["tests"])
    assert gold["components"]["executability"] == 1.0 and gold["components"]["pass_rate"] == 1.0
    assert gold["components"]["quality"] is None and gold["components"]["efficiency"] is None
    assert gold["details"]["repo"]["fail_to_pass"]["passed"] == len(TOOLZ["FAIL_TO_PASS"])
    assert results[2]["components"]["executability"] == 1.0 and 0 < results[2]["components"]["pass_rate"] < 1
    assert results[4]["components"]["executability"] == 0.0 and "does not apply" in results[4]["message"]
    assert "tests_or_config_edited" in results[6]["flags"]


def test_patch_error_under_coderl_is_minus_one_and_a_fixed_item_is_cached_but_another_patch_is_not(api):
    repo_id = upload(api, TOOLZ["archive"]).json()["id"]
    broken = api.post("/reward", json=item(repo_id, "garbage\n", profile="coderl")).json()
    assert broken["status"] == "patch_error" and broken["reward"] == -1.0
    limits = {"timeout_s": 9.5}  # items no other test sends, so that none is cached already
    first = api.post("/reward", json=item(repo_id, TOOLZ["patch"], profile="binary", limits=limits)).json()
    again = api.post("/reward", json=item(repo_id, TOOLZ["patch"], profile="binary", limits=limits)).json()
    other = api.post("/reward", json=item(repo_id, "", profile="binary", limits=limits)).json()
    assert not first["details"].get("cache_hit")
    assert again["details"].get("cache_hit") and again["reward"] == first["reward"] == 1.0
    assert not other["details"].get("cache_hit") and other["reward"] == 0.0


def test_an_inline_archive_is_stored_and_an_unknown_repo_is_refused_with_upload_again(api):
    inline = {"archive_b64": base64.b64encode(TOOLZ["archive"]).decode()}
    r = api.post("/reward", json={**item("0" * 64, TOOLZ["patch"], profile="binary"), "repo": inline})
    assert r.status_code == 200 and r.json()["status"] == "passed", r.text
    assert api.get(f"/repos/{hashlib.sha256(TOOLZ['archive']).hexdigest()}").status_code == 200
    unknown = api.post("/reward", json=item("f" * 64, ""))
    assert unknown.status_code == 422 and "upload it again with POST /repos" in unknown.text
    stored = hashlib.sha256(TOOLZ["archive"]).hexdigest()
    items = [item("f" * 64, ""), item(stored, TOOLZ["patch"], profile="binary")]
    batch = api.post("/reward/batch", json={"items": items}).json()["results"]
    assert batch[0]["status"] == "invalid_input" and batch[0]["reward"] is None
    assert "upload it again" in batch[0]["message"]
    assert batch[1]["status"] == "passed"
    bad = api.post("/reward", json={**item("0" * 64, ""), "repo": {"archive_b64": "not base64!"}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "repo", "archive_b64"]
    assert "repo" in api.get("/v1/info").json()["test_kinds"]["python"]


def test_the_swebench_converter_uploads_snapshots_and_writes_items_that_grade(server, api, tmp_path):
    """SWE-bench's shape: JSON-encoded node id lists, a test_patch instead of test files, predictions."""
    task = TOOLZ
    test_file = sorted(task["test_files"])[0]
    original = task["test_files"][test_file].encode()
    with_new_test = original + b"\n\ndef test_added_by_the_test_patch():\n    assert True\n"
    test_patch = repo_diff.unified_diff({test_file: original}, {test_file: with_new_test})
    instance = {"instance_id": task["instance_id"], "patch": task["patch"], "test_patch": test_patch,
                "FAIL_TO_PASS": json.dumps(task["FAIL_TO_PASS"]),
                "PASS_TO_PASS": json.dumps(task["PASS_TO_PASS"] + [f"{test_file}::test_added_by_the_test_patch"])}
    (tmp_path / "instances.jsonl").write_text(json.dumps(instance) + "\n")
    (tmp_path / "archives").mkdir()
    (tmp_path / "archives" / f"{task['instance_id']}.tar.gz").write_bytes(task["archive"])
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in [
        {"instance_id": task["instance_id"], "model_patch": task["patch"], "model_name_or_path": "gold"},
        {"instance_id": task["instance_id"], "model_patch": "", "model_name_or_path": "empty"}]))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        swebench.main(["--instances", str(tmp_path / "instances.jsonl"), "--archives", str(tmp_path / "archives"),
                       "--predictions", str(tmp_path / "preds.jsonl"), "--url", server])
    items = [json.loads(line) for line in out.getvalue().splitlines()]
    assert items[0]["tests"]["test_files"][test_file].endswith("assert True\n")
    results = api.post("/reward/batch", json={"items": items}).json()["results"]
    assert [r["status"] for r in results] == ["passed", "failed"], [r["message"] for r in results]
    assert results[0]["flags"] == []  # the test_patch's file restored is the trusted side's step, not an edit
    added = results[0]["tests"][-1]
    assert added["name"].endswith("test_added_by_the_test_patch") and added["passed"]
