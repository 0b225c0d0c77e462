"""File names that are not UTF-8, over real HTTP against real sandboxes, on both backends.

A name is data: a patch may create `\\377.py` (git writes it C-quoted: `"b/\\377.py"`), an agent may `touch` it
in a session, an archive may hold it. None of that may be a 5xx, a 422 blaming the client, or the loss of another
item's result in a batch. Names that are not UTF-8 reach the client in git's C-quoted form
(service/names.py), and a session's diff applies back to the same bytes.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile

import pytest

from rewardbox.names import unquote

from .conftest import BACKENDS, serving
from .session_calls import open_session, upload

CALC = {
    "pkg/__init__.py": b"",
    "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README": b"calc\n",
}
CALC_TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}
FIX = ("diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n"
       "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
# A new file whose name is the byte 0xff, in both places git names it.
NEW_FF = ('diff --git "a/\\377.py" "b/\\377.py"\nnew file mode 100644\n--- /dev/null\n+++ "b/\\377.py"\n'
          "@@ -0,0 +1 @@\n+x = 1\n")
# The same, with the name only in the ---/+++ lines (what `diff -u` writes, and what GNU patch reads).
NEW_FE_PLAIN = '--- /dev/null\n+++ "b/pkg/\\376\\375.txt"\n@@ -0,0 +1 @@\n+y\n'
RENAME = ('diff --git a/README "b/READ\\377ME"\nsimilarity index 100%\nrename from README\n'
          'rename to "READ\\377ME"\n')


@pytest.fixture(scope="module", params=BACKENDS)
def api(request):
    with serving({"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1",
                  "REWARDBOX_SESSION_POOL_SIZE": "1"}) as client:
        yield client


@pytest.fixture(scope="module")
def calc_id(api) -> str:
    return upload(api, CALC)


def item(repo_id: str, patch: str, id: str) -> dict:
    return {"id": id, "language": "python", "repo": {"id": repo_id}, "patch": patch, "tests": CALC_TESTS,
            "profile": "binary"}


@pytest.mark.parametrize("extra", [NEW_FF, NEW_FE_PLAIN, RENAME], ids=["git-header", "plus-line", "rename"])
def test_a_patch_naming_a_file_that_is_not_utf8_is_graded_like_any_other(api, calc_id, extra):
    r = api.post("/reward", json=item(calc_id, FIX + extra, "one"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "passed" and r.json()["reward"] == 1.0, r.json()


def test_in_a_batch_such_an_item_loses_no_other_items_result(api, calc_id):
    patches = [FIX, FIX + NEW_FF, "", FIX + NEW_FE_PLAIN + NEW_FF]
    batch = {"items": [item(calc_id, p, f"p{i}") for i, p in enumerate(patches)]}
    r = api.post("/reward/batch", json=batch)
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["passed", "passed", "failed", "passed"], r.json()


new = open_session


def sh(api, sid: str, command: str) -> dict:
    r = api.post(f"/sessions/{sid}/exec", json={"command": command})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_session_diff_with_such_names_applies_back_to_the_same_bytes(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "sed -i 's/a - b/a + b/' pkg/calc.py && printf 'x = 1\\n' > \"$(printf '\\377.py')\" && "
                 "mkdir \"$(printf 'd\\376')\" && printf 'q\\n' > \"$(printf 'd\\376/a\\\\b\"c.txt')\" && "
                 "mv README \"$(printf 'READ\\375ME')\"")
    r = api.get(f"/sessions/{sid}/diff")
    assert r.status_code == 200, r.text
    patch = r.json()["patch"]
    assert '+++ "b/\\377.py"' in patch
    with tempfile.TemporaryDirectory() as d:
        root = os.fsencode(d)
        for rel, data in CALC.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel.encode())), exist_ok=True)
            with open(os.path.join(root, rel.encode()), "wb") as f:
                f.write(data)
        subprocess.run(["patch", "-p1", "--quiet"], input=patch.encode(), cwd=d, check=True,
                       env={**os.environ, "LC_ALL": "C"})
        found = {os.path.relpath(os.path.join(p, n), root) for p, _, ns in os.walk(root) for n in ns}
    assert found == {b"pkg/__init__.py", b"pkg/calc.py", b"tests/test_calc.py", b"\xff.py", b'd\xfe/a\\b"c.txt',
                     b"READ\xfdME"}


def test_a_session_with_such_names_is_graded_and_submitted(api, calc_id):
    sid = new(api, calc_id)
    sh(api, sid, "sed -i 's/a - b/a + b/' pkg/calc.py && touch \"$(printf '\\377.py')\"")
    r = api.post(f"/sessions/{sid}/reward", json={"tests": CALC_TESTS})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "passed" and r.json()["reward"] == 1.0, r.json()
    binary = new(api, calc_id)
    sh(api, binary, "sed -i 's/a - b/a + b/' pkg/calc.py && printf '\\377\\000' > \"$(printf 'b\\377.bin')\"")
    graded = api.post(f"/sessions/{binary}/reward", json={"tests": CALC_TESTS})
    assert graded.status_code == 200 and graded.json()["status"] == "passed", graded.text
    assert graded.json()["details"]["session"]["not_in_patch"] == ['"b\\377.bin"']
    assert api.get(f"/sessions/{binary}/diff").json()["not_in_patch"] == ['"b\\377.bin"']
    listing = api.get(f"/sessions/{sid}/files", params={"path": "\"\\377.py\""})
    assert listing.status_code == 200, listing.text
    assert listing.json()["content"] == ""


def test_an_archive_with_such_a_name_is_stored_and_the_name_reaches_the_session(api):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:
        for rel, data in {**{k: v for k, v in CALC.items()}, "\udcff.txt": b"raw\n"}.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    r = api.post("/repos", content=out.getvalue(), headers={"content-type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    sid = new(api, r.json()["id"])
    assert sh(api, sid, "cat \"$(printf '\\377.txt')\"")["stdout"] == "raw\n"
    assert api.get(f"/sessions/{sid}/diff").json()["patch"] == ""


def test_unquote_gives_back_the_bytes_of_a_quoted_name():
    assert unquote('"\\377.py"') == b"\xff.py"
    assert unquote("plain.py") == b"plain.py"
    assert unquote('"a\\\\b\\"c\\n"') == b'a\\b"c\n'
