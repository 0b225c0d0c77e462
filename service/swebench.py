"""SWE-bench-style datasets as rewardbox repo items.

An instance carries `instance_id`, `FAIL_TO_PASS` and `PASS_TO_PASS` (pytest node ids: lists, or JSON-encoded
lists as in the SWE-bench release), the gold `patch`, and its tests either as `test_files` ({path: content}, the
files to restore) or as SWE-bench's `test_patch` (a diff, applied here to the snapshot's files to get them). A
prediction is `{instance_id, model_patch, model_name_or_path}`. Snapshots are .tar.gz archives of the repository
at the instance's base commit (`git archive`, an sdist, ...), uploaded with POST /repos.

    python -m service.swebench --instances instances.jsonl --archives DIR [--predictions preds.jsonl] \\
        [--url URL] > items.jsonl

reads DIR/<instance_id>.tar.gz for every instance, uploads it (REWARDBOX_URL or --url), and writes one /reward item
per prediction (or per instance, with its gold patch, without --predictions); a prediction whose model_patch is
null is graded with no patch at all (SWE-bench: `patch_is_None`, unresolved). report() turns an item and its
result into SWE-bench's per-instance report, pytest_log() into the test part of its evaluation log:

    python -m service.swebench report --items items.jsonl --results results.jsonl [--logs DIR] > report.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any


def node_ids(value: Any) -> list[str]:
    """SWE-bench stores the lists as JSON strings; other datasets as lists."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("FAIL_TO_PASS / PASS_TO_PASS must be lists of pytest node ids")
    return value


def to_item(instance: dict[str, Any], repo_id: str, patch: str | None = None, profile: str = "binary",
            test_files: dict[str, str] | None = None) -> dict[str, Any]:
    """A /reward item grading `patch` (default: the instance's model_patch, else its gold patch). For a prediction
    use prediction_item: its `model_patch: null` is no patch at all, never the gold one."""
    if patch is None:
        patch = instance.get("model_patch", instance.get("patch", ""))
    tests: dict[str, Any] = {"kind": "repo", "fail_to_pass": node_ids(instance.get("FAIL_TO_PASS", [])),
                             "pass_to_pass": node_ids(instance.get("PASS_TO_PASS", [])),
                             "test_files": test_files if test_files is not None else instance.get("test_files") or {}}
    if instance.get("test_command"):
        tests["command"] = instance["test_command"]
    return {"id": instance["instance_id"], "language": "python", "repo": {"id": repo_id}, "patch": patch or "",
            "tests": tests, "profile": profile, "metadata": {"instance_id": instance["instance_id"]}}


def prediction_item(instance: dict[str, Any], prediction: dict[str, Any], repo_id: str, profile: str = "binary",
                    test_files: dict[str, str] | None = None) -> dict[str, Any]:
    """The /reward item for a SWE-bench prediction. `model_patch: null` (or missing) is SWE-bench's
    `patch_is_None`: nothing is applied, the tests run on the snapshot as it is (so it is never resolved), and
    the item's metadata says so for report()."""
    model_patch = prediction.get("model_patch")
    item = to_item(instance, repo_id, model_patch if isinstance(model_patch, str) else "", profile, test_files)
    item["metadata"]["patch_is_None"] = model_patch is None
    if prediction.get("model_name_or_path"):
        item["metadata"]["model_name_or_path"] = prediction["model_name_or_path"]
    return item


def report(item: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """rewardbox's result for `item` in the shape of SWE-bench's per-instance report (get_eval_report with
    include_tests_status): resolved when every FAIL_TO_PASS and PASS_TO_PASS test passed; a listed test rewardbox
    did not see pass (failed, error, not collected, unknown id, skipped, xfailed, not run) is in `failure`."""
    iid = item["metadata"]["instance_id"]
    patch_is_none = bool(item["metadata"].get("patch_is_None"))
    applied = not patch_is_none and result.get("status") not in ("patch_error", "infra_error", "invalid_input")
    entry: dict[str, Any] = {"patch_is_None": patch_is_none, "patch_exists": not patch_is_none,
                             "patch_successfully_applied": applied, "resolved": False,
                             "infra_failure": result.get("status") == "infra_error"}
    if not applied:
        return {iid: entry}
    passed = {v["name"] for v in result.get("tests") or [] if v.get("passed") is True}
    status = {key: {"success": [n for n in item["tests"][field] if n in passed],
                    "failure": [n for n in item["tests"][field] if n not in passed]}
              for key, field in (("FAIL_TO_PASS", "fail_to_pass"), ("PASS_TO_PASS", "pass_to_pass"))}
    entry["resolved"] = not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"]
    entry["tests_status"] = status
    return {iid: entry}


def pytest_log(result: dict[str, Any]) -> str:
    """rewardbox's verdicts as the test part of a SWE-bench evaluation log: pytest's `-rA` summary lines (one
    `PASSED`/`FAILED` per listed test, rewardbox's verdict, its status in the reason) between the harness's
    markers, or its `Patch Apply Failed` line; SWE-bench's parse_log_pytest and get_logs_eval read it."""
    if result.get("status") == "patch_error":
        return f">>>>> Patch Apply Failed\n{result.get('message', '')}\n"
    lines = [">>>>> Start Test Output", "=" * 27 + " short test summary info " + "=" * 28]
    for v in result.get("tests") or []:
        name = str(v["name"])
        if any(c.isspace() for c in name):  # the parser splits on whitespace: such an id cannot be written
            continue
        if v.get("passed") is True:
            lines.append(f"PASSED {name}")
        else:
            why = " ".join(f"{v.get('status')}: {v.get('message', '')}".split())[:200]
            lines.append(f"FAILED {name} - {why}")
    lines.append(">>>>> End Test Output")
    return "\n".join(lines) + "\n"


def unknown_ids(item: dict[str, Any], files: dict[str, bytes]) -> list[str]:
    """Listed node ids whose file is neither in the snapshot nor among the restored test files: they cannot
    exist, so they will fail (SWE-bench counts them as failed too); the converter warns about them."""
    known = set(files) | set(item["tests"]["test_files"])
    return [n for n in item["tests"]["fail_to_pass"] + item["tests"]["pass_to_pass"] if n.split("::")[0] not in known]


def archive_files(archive: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz, with one top-level folder stripped as the service does."""
    from .repo_archive import ArchiveLimits, normalize

    normalized = normalize(archive, ArchiveLimits(archive_bytes=1 << 40, unpacked_bytes=1 << 40, files=1 << 30))
    files = {}
    with tarfile.open(fileobj=io.BytesIO(normalized.data), mode="r:gz") as tar:
        for member in tar:
            if member.isreg():
                data = tar.extractfile(member)
                assert data is not None  # a regular member always has its data
                files[member.name] = data.read()
    return files


def test_files_from_patch(test_patch: str, files: dict[str, bytes]) -> dict[str, str]:
    """Apply SWE-bench's test_patch to the snapshot's files (GNU patch, in a scratch directory: trusted dataset
    content, never a model's patch) and return the files it touches, as they are after it."""
    patch_tool = shutil.which("patch")
    if patch_tool is None:
        raise RuntimeError("applying a test_patch needs GNU patch on this host: apt-get install patch")
    touched = []
    for line in test_patch.splitlines():
        if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            path = line[4:].split("\t")[0].strip()
            touched.append(path[2:] if path.startswith("b/") else path)
    with tempfile.TemporaryDirectory(prefix="rewardbox-swebench-") as tmp:
        for path in touched:
            if path in files:
                target = Path(tmp, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(files[path])
        subprocess.run([patch_tool, "-p1", "--force", "--no-backup-if-mismatch", "--quiet"], input=test_patch.encode(),
                       cwd=tmp, check=True, capture_output=True)
        return {path: Path(tmp, path).read_text() for path in touched if Path(tmp, path).is_file()}


def report_main(argv: list[str]) -> None:
    """`python -m service.swebench report --items items.jsonl --results results.jsonl [--logs DIR]`: SWE-bench's
    report (one entry per instance, as its run report's per-instance reports) on stdout; with --logs, each item's
    pytest_log as DIR/<instance_id>/test_output.txt, where SWE-bench keeps its own."""
    p = argparse.ArgumentParser(description="rewardbox results as SWE-bench's per-instance reports (JSON)")
    p.add_argument("--items", required=True, type=Path, help="the JSONL the converter wrote")
    p.add_argument("--results", required=True, type=Path, help="JSONL of /reward results, in the items' order")
    p.add_argument("--logs", type=Path)
    a = p.parse_args(argv)
    items = [json.loads(line) for line in a.items.read_text().splitlines() if line.strip()]
    results = [json.loads(line) for line in a.results.read_text().splitlines() if line.strip()]
    if len(items) != len(results):
        raise SystemExit(f"{len(items)} items but {len(results)} results")
    out: dict[str, Any] = {}
    for item, result in zip(items, results, strict=True):
        out.update(report(item, result))
        if a.logs:
            folder = a.logs / item["metadata"]["instance_id"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "test_output.txt").write_text(pytest_log(result))
    sys.stdout.write(json.dumps(out, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    p = argparse.ArgumentParser(description="SWE-bench-style JSONL to rewardbox repo items (JSONL on stdout)")
    p.add_argument("--instances", required=True, type=Path)
    p.add_argument("--archives", required=True, type=Path, help="directory of <instance_id>.tar.gz snapshots")
    p.add_argument("--predictions", type=Path, help="JSONL of {instance_id, model_patch}; default: gold patches")
    p.add_argument("--url", default=os.environ.get("REWARDBOX_URL", "http://127.0.0.1:8000"))
    p.add_argument("--profile", default="binary")
    a = p.parse_args(argv)
    import httpx

    instances = {i["instance_id"]: i for i in map(json.loads, a.instances.read_text().splitlines()) if i}
    predictions = ([json.loads(line) for line in a.predictions.read_text().splitlines() if line.strip()]
                   if a.predictions else [{"instance_id": k, "model_patch": i.get("patch", ""),
                                           "model_name_or_path": "gold"} for k, i in instances.items()])
    repo_ids: dict[str, str] = {}
    test_files: dict[str, dict[str, str]] = {}
    snapshot_files: dict[str, dict[str, bytes]] = {}
    with httpx.Client(base_url=a.url, timeout=300) as client:
        for pred in predictions:
            iid = pred["instance_id"]
            instance = instances[iid]
            if iid not in repo_ids:
                archive = (a.archives / f"{iid}.tar.gz").read_bytes()
                r = client.post("/repos", content=archive, headers={"content-type": "application/gzip"})
                r.raise_for_status()
                repo_ids[iid] = r.json()["id"]
                snapshot_files[iid] = archive_files(archive)
                if not instance.get("test_files") and instance.get("test_patch"):
                    test_files[iid] = test_files_from_patch(instance["test_patch"], snapshot_files[iid])
            item = prediction_item(instance, pred, repo_ids[iid], a.profile, test_files.get(iid))
            for node in unknown_ids(item, snapshot_files[iid]):
                print(f"{iid}: {node}: no such test file in the snapshot or the test_patch; it will fail",
                      file=sys.stderr)
            sys.stdout.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    main()
