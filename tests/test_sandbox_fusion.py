"""SandboxFusion's /run_code contract, with the payloads verl's sandbox_fusion client sends."""

from __future__ import annotations

import base64
import json
import re

import pytest


def post_json(api, path: str, body: dict):
    """As JSON with \\u escapes, so that strings no UTF-8 encoder accepts (lone surrogates) can be sent too."""
    return api.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def pool_jobs(api) -> float:
    return float(re.search(r"^rewardbox_pool_jobs (\S+)$", api.get("/metrics").text, re.M).group(1))


def run_code(api, **payload):
    r = api.post("/run_code", json={"language": "python", "compile_timeout": 10, "run_timeout": 10,
                                    "memory_limit_MB": -1, **payload})
    assert r.status_code == 200, r.text
    return r.json()


def test_success_with_stdin_as_verl_sends_it(api):
    res = run_code(api, code="a, b = map(int, input().split())\nprint(a + b)\n", stdin="2 3\n")
    assert res["status"] == "Success"
    run = res["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 0
    assert run["stdout"].rstrip("\n") == "5"
    assert run["execution_time"] >= 0
    assert res["compile_result"] is None


def test_non_zero_exit_is_failed_but_finished(api):
    res = run_code(api, code="import sys\nprint('x', file=sys.stderr)\nsys.exit(3)\n")
    assert res["status"] == "Failed"
    assert res["run_result"]["status"] == "Finished" and res["run_result"]["return_code"] == 3
    assert res["run_result"]["stderr"] == "x\n"


def test_time_limit(api):
    res = run_code(api, code="while True: pass\n", run_timeout=1)
    assert res["status"] == "Failed" and res["run_result"]["status"] == "TimeLimitExceeded"
    assert res["rewardbox"]["status"] == "timeout"


def test_memory_limit_is_reported_in_the_extra_field(api):
    res = run_code(api, code="x = bytearray(900 * 2**20)\n", memory_limit_MB=256)
    assert res["status"] == "Failed"
    assert res["rewardbox"]["status"] == "memory_limit" and res["message"] == "memory limit exceeded"


def test_output_truncation_is_reported(api):
    res = run_code(api, code="import sys\nwhile True: sys.stdout.write('x' * 65536)\n", run_timeout=5)
    assert res["rewardbox"]["stdout_truncated"] is True and res["rewardbox"]["status"] == "output_limit"


def test_files_in_and_fetch_files_out_round_trip_bytes(api):
    blob = bytes(range(256))
    res = run_code(api, code="data = open('in.bin', 'rb').read()\nopen('out.bin', 'wb').write(data[::-1])\n",
                   files={"in.bin": base64.b64encode(blob).decode()}, fetch_files=["out.bin", "missing.txt"])
    assert res["status"] == "Success"
    assert base64.b64decode(res["files"]["out.bin"]) == blob[::-1]
    assert "missing.txt" not in res["files"]


def test_fetch_files_never_follows_links_nor_blocks_on_fifos(api):
    code = ("import os\nos.symlink('/etc/passwd', 'link')\nos.mkfifo('fifo')\nos.symlink('/proc/1/environ', 'env')\n"
            "open('real.txt', 'w').write('ok')\n")
    res = run_code(api, code=code, fetch_files=["link", "fifo", "env", "real.txt"])
    assert res["status"] == "Success"
    assert res["files"] == {"real.txt": base64.b64encode(b"ok").decode()}


@pytest.mark.parametrize("path", ["/etc/x", "../x", "a/../../x", "a\x00b", ".", "d/", "a//b", "./x", "",
                                  "x\ny", "\ud800", "n" * 256])
def test_a_bad_file_name_is_422_naming_the_path_and_nothing_runs(api, path):
    before = pool_jobs(api)
    r = post_json(api, "/run_code", {"code": "print(1)", "files": {path: ""}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][:2] == ["body", "files"] and r.json()["detail"][0]["type"] == "path"
    fetch = post_json(api, "/run_code", {"code": "print(1)", "fetch_files": ["ok.txt", path]})
    assert fetch.status_code == 422 and fetch.json()["detail"][0]["loc"] == ["body", "fetch_files", 1]
    assert pool_jobs(api) == before  # nothing reached a sandbox


@pytest.mark.parametrize("files", [
    {"a": "", "a/b": ""},  # a file and a folder of one name
    {"d/e/f": "", "d/e": ""},
    {f"f{i}": "" for i in range(3000)},  # more files than a job directory has inodes
    {"x.txt": "not base64!"},
], ids=["file-and-folder", "nested-file-and-folder", "thousands", "not-base64"])
def test_files_that_cannot_be_written_are_422_not_sandbox_errors(api, files):
    r = api.post("/run_code", json={"code": "print(1)", "files": files})
    assert r.status_code == 422, r.text[:300]
    assert r.json()["detail"][0]["loc"][1] == "files"
    # the sandboxes are untouched: the next request runs normally
    assert run_code(api, code="print(2)")["run_result"]["stdout"] == "2\n"


def test_nested_files_are_written_and_read_back(api):
    files = {"pkg/__init__.py": "", "pkg/mod.py": base64.b64encode(b"X = 41\n").decode()}
    res = run_code(api, code="import pkg.mod\nprint(pkg.mod.X + 1)\n", files=files)
    assert res["status"] == "Success" and res["run_result"]["stdout"] == "42\n"


def test_unsupported_language_is_400(api):
    r = api.post("/run_code", json={"code": "DISPLAY 'X'.", "language": "cobol"})
    assert r.status_code == 400


@pytest.mark.parametrize("language, code", [
    ("cpp", '#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; }\n'),
    ("nodejs", 'const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(" ").map(Number);\n'
               'console.log(a + b);\n'),
    ("go", 'package main\n\nimport "fmt"\n\nfunc main() { var a, b int; fmt.Scan(&a, &b); fmt.Println(a + b) }\n'),
    ("java", 'import java.util.*;\npublic class Main { public static void main(String[] x) {'
             ' Scanner s = new Scanner(System.in); System.out.println(s.nextInt() + s.nextInt()); } }\n'),
    ("rust", 'fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap();'
             ' let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();'
             ' println!("{}", v[0] + v[1]); }\n'),
    ("bash", 'read a b\necho $((a + b))\n'),
    ("typescript", 'const [a, b]: number[] = require("fs").readFileSync(0, "utf8").trim().split(" ").map(Number);\n'
                   'console.log(a + b);\n'),
])
def test_sandbox_fusion_languages_compile_and_run(api, language, code):
    res = run_code(api, language=language, code=code, stdin="2 3\n")
    assert res["status"] == "Success", res
    assert res["run_result"]["stdout"].strip() == "5"
    if language in ("cpp", "go", "java", "rust", "typescript"):
        assert res["compile_result"]["status"] == "Finished" and res["compile_result"]["return_code"] == 0


def test_a_compile_error_is_failed_with_the_compilers_message(api):
    res = run_code(api, language="cpp", code="int main() { return x; }\n")
    assert res["status"] == "Failed" and res["run_result"] is None
    assert "not declared" in res["compile_result"]["stderr"] and res["compile_result"]["return_code"] == 1
