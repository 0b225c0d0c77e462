"""SWE-bench-style datasets as rewardbox repo items.

An instance carries `instance_id`, `FAIL_TO_PASS` and `PASS_TO_PASS` (pytest node ids: lists, or JSON-encoded
lists as in the SWE-bench release), the gold `patch`, and its tests either as `test_files` ({path: content}, the
files to restore) or as SWE-bench's `test_patch` (a diff, applied here to the snapshot's files to get them). A
prediction is `{instance_id, model_patch, model_name_or_path}`. Snapshots are .tar.gz archives of the repository
at the instance's base commit (`git archive`, an sdist, ...), uploaded with POST /repos.

    python -m service.compat.swebench --instances instances.jsonl --archives DIR [--predictions preds.jsonl] \\
        [--url URL] > items.jsonl

reads DIR/<instance_id>.tar.gz for every instance, uploads it (REWARDBOX_URL or --url), and writes one /reward item
per prediction (or per instance, with its gold patch, without --predictions); a prediction whose model_patch is
null is graded with no patch at all (SWE-bench: `patch_is_None`, unresolved). report() turns an item and its
result into SWE-bench's per-instance report, pytest_log() into the test part of its evaluation log:

    python -m service.compat.swebench report --items items.jsonl --results results.jsonl [--logs DIR] > report.json

Where the tests run: the row's `image` (or, with --image-namespace, SWE-bench's instance image name) makes the
item run in that image on the Docker host, with its testbed interpreter and the repository at /testbed (no
snapshot needed: the test files come from the image); --environments maps `repo@version` to an environment built
by POST /environments; otherwise rewardbox's default image. The row's repo, base_commit, version,
environment_setup_commit and image are kept in the item's metadata.
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

from service.repos.archive import archive_files


def node_ids(value: Any) -> list[str]:
    """SWE-bench stores the lists as JSON strings; other datasets as lists."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("FAIL_TO_PASS / PASS_TO_PASS must be lists of pytest node ids")
    return value


# What a SWE-bench row says about where its tests run, kept in the item's metadata (the harness needs them; a
# converter that dropped them left an item that could only run in the default image).
PROVENANCE = ("repo", "base_commit", "version", "environment_setup_commit", "image")
# SWE-bench's instance images: the repository at /testbed, its dependencies in the conda env `testbed`.
TESTBED = "/testbed"
TESTBED_PYTHON = "/opt/miniconda3/envs/testbed/bin/python"


def instance_image(instance_id: str, namespace: str = "swebench") -> str:
    """The image name SWE-bench's harness derives for an instance (swebench.task.checks.expected_image)."""
    key = f"sweb.eval.x86_64.{instance_id}:latest".lower()
    return f"{namespace}/{key}".replace("__", "_1776_") if namespace else key.replace("__", "_1776_")


def environment_for(instance: dict[str, Any], environments: dict[str, str] | None = None,
                    image_namespace: str | None = None) -> dict[str, Any] | None:
    """Where the instance's tests run, as an item's `environment` (service/environment_models.EnvironmentRef):
    the row's own `image` (a SWE-bench instance image on the Docker host: its testbed interpreter, the repository
    at /testbed), else an environment built for its `repo` + `version` (`environments` maps "repo@version" or
    "repo@version@environment_setup_commit" to an id from POST /environments), else SWE-bench's image name for
    the instance when `image_namespace` is given ("" for local names), else None: rewardbox's default image."""
    image = instance.get("image")
    if not image and image_namespace is not None:
        image = instance_image(instance["instance_id"], image_namespace)
    if image:
        return {"image": image, "python": instance.get("python") or TESTBED_PYTHON,
                "repo_path": instance.get("repo_path") or TESTBED}
    if environments and instance.get("repo") and instance.get("version") is not None:
        base = f"{instance['repo']}@{instance['version']}"
        setup = instance.get("environment_setup_commit")
        env_id = environments.get(f"{base}@{setup}") if setup else None
        env_id = env_id or environments.get(base)
        if env_id:
            return {"id": env_id}
    return None


def to_item(instance: dict[str, Any], repo_id: str | None, patch: str | None = None, profile: str = "binary",
            test_files: dict[str, str] | None = None, environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """A /reward item grading `patch` (default: the instance's model_patch, else its gold patch). For a prediction
    use prediction_item: its `model_patch: null` is no patch at all, never the gold one. `environment`: where the
    tests run (environment_for); with an image holding the repository, `repo_id` may be None (no snapshot)."""
    if patch is None:
        patch = instance.get("model_patch", instance.get("patch", ""))
    tests: dict[str, Any] = {"kind": "repo", "fail_to_pass": node_ids(instance.get("FAIL_TO_PASS", [])),
                             "pass_to_pass": node_ids(instance.get("PASS_TO_PASS", [])),
                             "test_files": test_files if test_files is not None else instance.get("test_files") or {}}
    if instance.get("test_command"):
        tests["command"] = instance["test_command"]
    metadata = {"instance_id": instance["instance_id"],
                **{k: instance[k] for k in PROVENANCE if instance.get(k) is not None}}
    item: dict[str, Any] = {"id": instance["instance_id"], "language": "python", "patch": patch or "",
                            "tests": tests, "profile": profile, "metadata": metadata}
    if repo_id is not None:
        item["repo"] = {"id": repo_id}
    elif not (environment and environment.get("repo_path")):
        raise ValueError(f"{instance['instance_id']}: no snapshot and no image holding the repository")
    if environment:
        item["environment"] = environment
    return item


def prediction_item(instance: dict[str, Any], prediction: dict[str, Any], repo_id: str | None,
                    profile: str = "binary", test_files: dict[str, str] | None = None,
                    environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The /reward item for a SWE-bench prediction. `model_patch: null` (or missing) is SWE-bench's
    `patch_is_None`: nothing is applied, the tests run on the snapshot as it is (so it is never resolved), and
    the item's metadata says so for report()."""
    model_patch = prediction.get("model_patch")
    item = to_item(instance, repo_id, model_patch if isinstance(model_patch, str) else "", profile, test_files,
                   environment)
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


def patched_paths(diff: str) -> list[str]:
    """The files a git-style diff writes (its `+++ b/...` lines)."""
    touched = []
    for line in diff.splitlines():
        if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            path = line[4:].split("\t")[0].strip()
            touched.append(path[2:] if path.startswith("b/") else path)
    return touched


def image_files(image: str, repo_path: str, paths: list[str]) -> dict[str, bytes]:
    """The files `paths` of the repository at `repo_path` in a Docker image (read from a created, never started,
    container), for applying a test_patch when the image holds the repository. Missing files are left out."""
    import docker

    client = docker.from_env()
    container = client.containers.create(image, command=["true"])
    files: dict[str, bytes] = {}
    try:
        for path in paths:
            try:
                stream, _ = container.get_archive(f"{repo_path.rstrip('/')}/{path}")
            except docker.errors.NotFound:
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = next((m for m in tar if m.isreg()), None)
                data = tar.extractfile(member) if member else None
                if data is not None:
                    files[path] = data.read()
    finally:
        container.remove(force=True)
    return files


def test_files_from_patch(test_patch: str, files: dict[str, bytes]) -> dict[str, str]:
    """Apply SWE-bench's test_patch to the snapshot's files (GNU patch, in a scratch directory: trusted dataset
    content, never a model's patch) and return the files it touches, as they are after it."""
    patch_tool = shutil.which("patch")
    if patch_tool is None:
        raise RuntimeError("applying a test_patch needs GNU patch on this host: apt-get install patch")
    touched = patched_paths(test_patch)
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
    """`python -m service.compat.swebench report --items items.jsonl --results results.jsonl [--logs DIR]`: SWE-bench's
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
    p.add_argument("--archives", type=Path, help="directory of <instance_id>.tar.gz snapshots (not needed for an "
                   "instance whose image holds the repository)")
    p.add_argument("--environments", type=Path, help="JSON {\"repo@version\": environment id} (or "
                   "\"repo@version@environment_setup_commit\"): environments built by POST /environments")
    p.add_argument("--image-namespace", help="grade every instance in SWE-bench's instance image on the Docker host "
                   "(<namespace>/sweb.eval.x86_64.<id>:latest; '' for local names) unless its row names `image`")
    p.add_argument("--predictions", type=Path, help="JSONL of {instance_id, model_patch}; default: gold patches")
    p.add_argument("--url", default=os.environ.get("REWARDBOX_URL", "http://127.0.0.1:8000"))
    p.add_argument("--profile", default="binary")
    a = p.parse_args(argv)
    import httpx

    instances = {i["instance_id"]: i for i in map(json.loads, a.instances.read_text().splitlines()) if i}
    predictions = ([json.loads(line) for line in a.predictions.read_text().splitlines() if line.strip()]
                   if a.predictions else [{"instance_id": k, "model_patch": i.get("patch", ""),
                                           "model_name_or_path": "gold"} for k, i in instances.items()])
    env_map = json.loads(a.environments.read_text()) if a.environments else None
    repo_ids: dict[str, str | None] = {}
    test_files: dict[str, dict[str, str]] = {}
    snapshot_files: dict[str, dict[str, bytes]] = {}
    with httpx.Client(base_url=a.url, timeout=300) as client:
        for pred in predictions:
            iid = pred["instance_id"]
            instance = instances[iid]
            environment = environment_for(instance, env_map, a.image_namespace)
            archive_path = a.archives / f"{iid}.tar.gz" if a.archives else None
            if iid not in repo_ids and environment and environment.get("repo_path") and not (
                    archive_path and archive_path.is_file()):
                # the image holds the repository: no snapshot to upload; the test files come from the image
                repo_ids[iid] = None
                snapshot_files[iid] = image_files(environment["image"], environment["repo_path"],
                                                  patched_paths(instance.get("test_patch") or ""))
                if not instance.get("test_files") and instance.get("test_patch"):
                    test_files[iid] = test_files_from_patch(instance["test_patch"], snapshot_files[iid])
            if iid not in repo_ids:
                if archive_path is None:
                    raise SystemExit(f"{iid}: no --archives and no image holding the repository")
                archive = archive_path.read_bytes()
                r = client.post("/repos", content=archive, headers={"content-type": "application/gzip"})
                r.raise_for_status()
                repo_ids[iid] = r.json()["id"]
                snapshot_files[iid] = archive_files(archive)
                if not instance.get("test_files") and instance.get("test_patch"):
                    test_files[iid] = test_files_from_patch(instance["test_patch"], snapshot_files[iid])
            item = prediction_item(instance, pred, repo_ids[iid], a.profile, test_files.get(iid), environment)
            for node in (unknown_ids(item, snapshot_files[iid]) if repo_ids[iid] is not None else []):
                print(f"{iid}: {node}: no such test file in the snapshot or the test_patch; it will fail",
                      file=sys.stderr)
            sys.stdout.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    main()
