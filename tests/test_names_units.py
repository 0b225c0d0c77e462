"""Names that are not UTF-8 (no sandbox): one quoting rule on both sides, lossless, and results that always
serialise. The real-sandbox behaviour is in tests/test_names_not_utf8.py."""

from __future__ import annotations

import io
import os
import random
import subprocess
import tarfile
import tempfile

import pytest

from rewardbox.names import quote, unquote, wire
from service.app import _item_json
from service.models import BatchResult, ItemResult
from service.repos.archive import ArchiveLimits, BadArchive, normalize
from service.sessions.workspace import load_snapshot, repo_diff

NAMES = ["\udcff.py", "d\udcfe/a\\b\"c.txt", "tab\there", "nl\nhere", "é.py", "\udcc3\udca9", "del\x7f"]


def test_the_sandbox_and_the_client_quote_alike() -> None:
    for name in NAMES:
        if not repo_diff.quote_path(name).startswith('"'):
            continue
        assert repo_diff.quote_path(name) == quote(name), name


def test_a_utf8_name_without_special_characters_is_not_quoted() -> None:
    assert repo_diff.quote_path("pkg/é.py") == "pkg/é.py"
    assert wire("pkg/é.py") == "pkg/é.py" and wire("a\\b") == "a\\b"


def test_quoting_is_lossless_for_any_bytes() -> None:
    rng = random.Random(7)
    for _ in range(500):
        raw = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 12)))
        name = raw.decode("utf-8", "surrogateescape")
        assert unquote(quote(name)) == raw
        assert unquote(repo_diff.quote_path(name)) == raw


def test_a_diff_of_such_names_applies_back_to_the_same_bytes() -> None:
    old = {"README": b"calc\n", "keep.py": b"a\n"}
    new = {"keep.py": b"b\n", **{n: f"{i}\n".encode() for i, n in enumerate(NAMES)}}
    patch = repo_diff.unified_diff(old, new)
    patch.encode("utf-8")  # text a client can take
    with tempfile.TemporaryDirectory() as d:
        root = os.fsencode(d)
        for rel, data in old.items():
            with open(os.path.join(root, rel.encode()), "wb") as f:
                f.write(data)
        subprocess.run(["patch", "-p1", "--quiet"], input=patch.encode(), cwd=d, check=True,
                       env={**os.environ, "LC_ALL": "C"})
        got = {}
        for here, _, files in os.walk(root):
            for f in files:
                with open(os.path.join(here, f), "rb") as fh:
                    got[os.path.relpath(os.path.join(here, f), root)] = fh.read()
    assert got == {n.encode("utf-8", "surrogateescape"): v for n, v in new.items()}


def test_a_result_holding_such_strings_serialises_them_quoted_even_after_mutation() -> None:
    result = ItemResult(rollout_id="r", status="failed", reward=0.0)
    result.flags = ["\udcff.py"]
    result.details["\udcfe"] = {"changed": ["a\udcff"]}
    result.message = "edited \udcff.py"
    body = BatchResult(results=[result]).model_dump()["results"][0]
    assert body["flags"] == ['"\\377.py"'] and body["message"] == '"edited \\377.py"'
    assert body["details"] == {'"\\376"': {"changed": ['"a\\377"']}}


def test_a_batch_item_that_cannot_serialise_is_its_own_infra_error() -> None:
    result = ItemResult(rollout_id="r", status="failed", reward=0.0, details={"x": object()})
    body = _item_json(result)
    assert b'"infra_error"' in body and b"could not be serialised" in body


def _archive(members: list[tuple[str, bytes, str]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, target in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    return out.getvalue()


def test_an_archive_link_whose_target_is_not_utf8_is_kept_byte_for_byte() -> None:
    upload = _archive([("f\udcff", tarfile.REGTYPE, ""), ("ln", tarfile.SYMTYPE, "f\udcff")])
    snapshot = load_snapshot(normalize(upload, ArchiveLimits()).data)
    assert snapshot["ln"].data == b"f\xff" and snapshot["f\udcff"].kind == "f"


def test_a_refusal_naming_a_member_that_is_not_utf8_is_text() -> None:
    with pytest.raises(BadArchive) as refused:
        normalize(_archive([("x\udcff", tarfile.FIFOTYPE, "")]), ArchiveLimits())
    str(refused.value).encode("utf-8")
    assert "\\377" in str(refused.value)
