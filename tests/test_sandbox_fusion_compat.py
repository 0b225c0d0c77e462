"""What SandboxFusion users' code expects of `/run_code` beyond the wire format, as SandboxFusion's own runner tests
(`sandbox/tests/runners/`) send it: Java with assertions and javatuples, files written to absolute paths and
fetched back, bash syntax errors in `run_result`, TypeScript default imports of CommonJS modules, lodash, and the
interpreted languages php, ruby, lua, perl. Run for real through `rewardbox serve` on each sandbox backend; answers
are parsed with the SandboxFusion SDK's own response model.

The writable places a job gets besides its working folder (/tmp, /mnt) are private to that job: another job, at
the same time or later in the same sandbox, never sees what it wrote there."""

from __future__ import annotations

import base64
import concurrent.futures
import json

import httpx
import pytest
from sandbox_fusion import RunCodeResponse

from tests.conftest import BACKENDS, start_server, stop_server


@pytest.fixture(scope="module", params=BACKENDS)
def api(request: pytest.FixtureRequest):
    proc, url = start_server({"REWARDBOX_BACKEND": request.param, "REWARDBOX_RESULT_CACHE_SIZE": "0"})
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client
    finally:
        stop_server(proc)


def run(api: httpx.Client, language: str, code: str, **extra) -> RunCodeResponse:
    r = api.post("/run_code", json={"language": language, "code": code, "run_timeout": 10, **extra})
    assert r.status_code == 200, r.text
    return RunCodeResponse(**r.json())


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def unb64(data: str) -> str:
    return base64.b64decode(data).decode()


# -- Java


def test_java_assert_statements_are_checked(api):
    code = "public class Main {\n  public static void main(String[] args) {\n    assert 1 == 2;\n  }\n}\n"
    res = run(api, "java", code)
    assert res.status == "Failed"
    assert res.run_result.status == "Finished" and res.run_result.return_code == 1
    assert "java.lang.AssertionError" in res.run_result.stderr


def test_java_programs_can_use_javatuples_as_on_sandbox_fusion(api):
    code = ("import org.javatuples.Pair;\nimport org.javatuples.Triplet;\n\npublic class Main {\n"
            "  public static void main(String[] args) {\n    Pair<String, Integer> p = Pair.with(\"apple\", 1);\n"
            "    Triplet<String, Integer, Double> t = Triplet.with(\"banana\", 2, 0.99);\n"
            "    System.out.println(p.getValue0() + \" \" + t.getValue1() + \" \" + t.getValue2());\n  }\n}\n")
    res = run(api, "java", code)
    assert res.status == "Success", res
    assert res.run_result.stdout == "apple 2 0.99\n"


# -- files at absolute paths


def test_files_written_to_absolute_paths_under_mnt_and_tmp_are_fetched_back(api):
    code = ('open("a.txt", "w").write("secret"); open("/mnt/b", "w").write("sauce")\n'
            'import os; os.makedirs("/mnt/data/out", exist_ok=True); open("/mnt/data/out/c", "w").write("deep")\n'
            'open("/tmp/d", "w").write("tmp")\n')
    res = run(api, "python", code, fetch_files=["a.txt", "/mnt/b", "/mnt/data/out/c", "/tmp/d", "/mnt/missing"])
    assert res.status == "Success", res
    assert {k: unb64(v) for k, v in res.files.items()} == {"a.txt": "secret", "/mnt/b": "sauce",
                                                          "/mnt/data/out/c": "deep", "/tmp/d": "tmp"}


def test_a_compiled_program_writes_to_mnt_too(api):
    code = ('#include <stdio.h>\nint main(void) { FILE *f = fopen("/mnt/b", "w"); if (!f) return 1;'
            ' fputs("from c", f); return fclose(f); }\n')
    res = run(api, "c", code, fetch_files=["/mnt/b"])
    assert res.status == "Success", res
    assert unb64(res.files["/mnt/b"]) == "from c"


@pytest.mark.parametrize("path", ["/etc/passwd", "/mnt/../etc/passwd", "/tmp/../etc/passwd", "/mnt", "/mnt/",
                                  "/scratch/j/x", "/proc/1/environ"])
def test_fetching_anything_outside_the_jobs_own_places_is_422(api, path):
    r = api.post("/run_code", json={"language": "python", "code": "print(1)", "fetch_files": [path]})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "fetch_files", 0]


LEAVE = ("import os, time\nfor p in ('/mnt/left', '/tmp/left', 'left'):\n"
         "    open(p, 'w').write('private')\nos.makedirs('/mnt/dir/sub', exist_ok=True)\n"
         "open('/mnt/dir/sub/f', 'w').write('private')\nprint('written', flush=True)\ntime.sleep(2)\n")
LOOK = ("import json, os\nfound = []\nfor top in ('/mnt', '/tmp', '.'):\n"
        "    for d, dirs, files in os.walk(top):\n        found += [os.path.join(d, n) for n in dirs + files]\n"
        "print(json.dumps(found))\n")


def test_another_job_never_sees_what_a_job_wrote_under_mnt_tmp_or_its_folder(api):
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        leaving = ex.submit(run, api, "python", LEAVE, fetch_files=["/mnt/dir/sub/f"])
        # the other sandbox, while the first job holds its files
        during = [ex.submit(run, api, "python", LOOK) for _ in range(2)]
        left = leaving.result()
        seen_during = [f.result() for f in during]
    assert left.status == "Success" and unb64(left.files["/mnt/dir/sub/f"]) == "private"
    seen_after = [run(api, "python", LOOK) for _ in range(4)]  # every sandbox of the pool (2), twice
    for res in seen_during + seen_after:
        assert res.status == "Success", res
        assert json.loads(res.run_result.stdout) == [], res.run_result.stdout


def test_fetch_files_under_mnt_never_follow_a_planted_link(api):
    code = "import os\nos.symlink('/etc/passwd', '/mnt/link')\nopen('/mnt/real', 'w').write('ok')\n"
    res = run(api, "python", code, fetch_files=["/mnt/link", "/mnt/real"])
    assert res.status == "Success"
    assert res.files == {"/mnt/real": b64("ok")}


# -- bash


def test_a_bash_syntax_error_is_a_failed_run_with_exit_status_2(api):
    res = run(api, "bash", "if [")
    assert res.status == "Failed"
    assert res.compile_result is None
    assert res.run_result.status == "Finished" and res.run_result.return_code == 2
    assert "syntax error" in res.run_result.stderr


def test_bash_reads_its_files_and_stdin(api):
    res = run(api, "bash", "read input\necho $input\ncat dir1/dir2/flag\n", stdin="65535",
              files={"dir1/dir2/flag": b64("hello, this is a test")})
    assert res.status == "Success"
    assert res.run_result.stdout == "65535\nhello, this is a test"


# -- TypeScript and Node


def test_typescript_default_import_of_a_commonjs_module(api):
    res = run(api, "typescript", "import assert from \"assert\";\nassert.strictEqual(1, 2, '1 !== 2');\n")
    assert res.status == "Failed"
    assert res.run_result.status == "Finished" and "AssertionError" in res.run_result.stderr
    slept = run(api, "typescript", "import util from 'util';\nconst sleep = util.promisify(setTimeout);\n"
                "async function main() { await sleep(200); }\nmain();\n", run_timeout=0.1)
    assert slept.status == "Failed" and slept.run_result.status == "TimeLimitExceeded"


def test_typescript_namespace_imports_still_work(api):
    res = run(api, "typescript", "import * as fs from 'fs';\nconsole.log(typeof fs.readFileSync);\n")
    assert res.status == "Success" and res.run_result.stdout == "function\n"


@pytest.mark.parametrize("language, code", [
    ("typescript", 'import _ from "lodash";\nimport assert from "assert";\nassert(_.isEqual(1, 1));\n'
                   'console.log(_.chunk([1, 2, 3], 2).length);\n'),
    ("nodejs", 'const _ = require("lodash");\nconsole.log(_.chunk([1, 2, 3], 2).length);\n'),
    ("nodejs", 'const md5 = require("js-md5");\nconsole.log(md5("") === "d41d8cd98f00b204e9800998ecf8427e" ? 2 : 0);'),
    ("nodejs", 'const seedrandom = require("seedrandom");\nconst a = seedrandom("x")(), b = seedrandom("x")();\n'
               'console.log(a === b ? 2 : 0);\n'),
])
def test_npm_packages_sandbox_fusion_ships_can_be_imported(api, language, code):
    res = run(api, language, code)
    assert res.status == "Success", res
    assert res.run_result.stdout == "2\n"


# -- php, ruby, lua, perl (SandboxFusion's runner tests for each)


@pytest.mark.parametrize("language, code, stdout", [
    ("php", '<?php\necho "123";\n?>\n', "123"),
    ("php", "<?php\n$input = readline();\necho intval($input);\n?>\n", "65535"),
    ("ruby", 'puts "Hello, World!"\nputs gets.to_i\n', "Hello, World!\n65535\n"),
    ("lua", 'print("Hello, World!")\nprint(io.read("n"))\n', "Hello, World!\n65535\n"),
    ("perl", 'print "Hello, World!\\n";\nmy $n = <STDIN>;\nprint $n + 0, "\\n";\n', "Hello, World!\n65535\n"),
])
def test_interpreted_languages_print_and_read_stdin(api, language, code, stdout):
    res = run(api, language, code, stdin="65535")
    assert res.status == "Success", res
    assert res.run_result.stdout == stdout and res.compile_result is None


@pytest.mark.parametrize("language, passing, failing, marker", [
    ("ruby", "require 'test/unit'\nclass T < Test::Unit::TestCase\n  def test_x\n    assert_equal(0, 0)\n  end\nend\n",
     "require 'test/unit'\nclass T < Test::Unit::TestCase\n  def test_x\n    assert_equal(1, 0)\n  end\nend\n",
     "Failure"),
    ("lua", "lu = require('luaunit')\nlu.assertEquals(0, 0)\n", "lu = require('luaunit')\nlu.assertEquals(1, 2)\n",
     "expected: 2"),
    ("perl", "use Test::Deep;\nuse Data::Compare;\nexit(eq_deeply([1], [1]) && Compare(1, 1) ? 0 : 1);\n",
     "use Test::Deep;\nexit(eq_deeply(0, 1) ? 0 : 1);\n", ""),
    ("php", "<?php\nassert(1 == 1);\necho 'ok';\n", '<?php\ntrigger_error("Custom error", E_USER_ERROR);\n',
     "Custom error"),
])
def test_the_test_libraries_sandbox_fusion_users_import_are_there(api, language, passing, failing, marker):
    ok = run(api, language, passing)
    assert ok.status == "Success", ok
    bad = run(api, language, failing)
    assert bad.status == "Failed" and bad.run_result.status == "Finished" and bad.run_result.return_code != 0
    assert marker in bad.run_result.stdout + bad.run_result.stderr


@pytest.mark.parametrize("language, code", [("php", "<?php\nsleep(5);\n"), ("ruby", "sleep(5)\n"),
                                            ("lua", 'os.execute("sleep 5")\n'), ("perl", "sleep(5);\n")])
def test_interpreted_languages_hit_the_time_limit(api, language, code):
    res = run(api, language, code, run_timeout=1)
    assert res.status == "Failed" and res.run_result.status == "TimeLimitExceeded"


@pytest.mark.parametrize("language, code, marker", [
    ("php", "<?php\nfunction f( {\n", "syntax error"), ("ruby", "def f(\n", "syntax error"),
    ("lua", "function f( return 1 end\n", "expected"), ("perl", "sub f {\n", "Missing right curly"),
])
def test_a_syntax_error_of_an_interpreted_language_is_in_run_result(api, language, code, marker):
    res = run(api, language, code)
    assert res.status == "Failed" and res.compile_result is None
    assert res.run_result.status == "Finished" and res.run_result.return_code != 0
    assert marker in res.run_result.stdout + res.run_result.stderr


# -- Scala (SandboxFusion's runner tests: the first object runs, `assert` is checked)


@pytest.mark.parametrize("code, status, marker", [
    ('object HelloWorld {\n  def main(args: Array[String]): Unit = {\n    println("Hello, World!")\n  }\n}\n',
     "Success", "Hello, World!"),
    ("object HelloWorld {\n  def main(args: Array[String]) = {\n    assert((1l) == (0l));\n  }\n}\n", "Failed",
     "assertion failed"),
    ("object Main extends App {\n  def foo() = {\n    assert((0l) == (0l));\n  }\n  foo()\n}\n", "Success", ""),
])
def test_scala_runs_its_first_object_with_assertions_checked(api, code, status, marker):
    res = run(api, "scala", code, compile_timeout=60)
    assert res.status == status, res
    assert res.compile_result.status == "Finished" and res.run_result.status == "Finished"
    assert marker in res.run_result.stdout + res.run_result.stderr


def test_a_scala_compile_error_is_in_compile_result(api):
    res = run(api, "scala", "object Main { def main(args: Array[String]): Unit = { val x: Int = \"s\" } }\n",
              compile_timeout=60)
    assert res.status == "Failed" and res.run_result is None
    assert "type mismatch" in res.compile_result.stderr


# -- C# (Mono): SandboxFusion's runner tests


@pytest.mark.parametrize("code, stdin, status, where, marker", [
    ("using System;\npublic class Program {\n  public static void Main(string[] args) {\n"
     "    Console.WriteLine(Convert.ToInt32(Console.ReadLine()));\n  }\n}\n", "65535", "Success", "stdout", "65535\n"),
    ("using System;\nusing System.Diagnostics;\npublic class Program {\n  public static void Main(string[] args) {\n"
     "    Debug.Assert(1 == 2, \"Assertion failed\");\n  }\n}\n", "", "Failed", "stderr", "Assertion failed"),
])
def test_csharp_runs_with_debug_asserts_checked(api, code, stdin, status, where, marker):
    res = run(api, "csharp", code, stdin=stdin)
    assert res.status == status, res
    assert res.compile_result.status == "Finished" and res.run_result.status == "Finished"
    assert marker in getattr(res.run_result, where)


def test_a_csharp_exception_fails_the_run_with_mono_s_report(api):
    res = run(api, "csharp", "public class Program {\n  static void Main() {\n"
              "    throw new System.InvalidOperationException(\"boom\");\n  }\n}\n")
    assert res.status == "Failed" and res.run_result.return_code == 1
    assert "System.InvalidOperationException: boom" in res.run_result.stderr


def test_csharp_hits_the_time_limit(api):
    code = ("using System.Threading;\npublic class Program {\n  public static void Main(string[] args) {\n"
            "    Thread.Sleep(2000);\n  }\n}\n")
    res = run(api, "csharp", code, run_timeout=0.5)
    assert res.status == "Failed" and res.run_result.status == "TimeLimitExceeded"


# -- pytest mode


PYTEST_FILE = """
def word_count(path):
    print(open(path).read().lower().split().count("case"))


class TestWordCount:
    def test_counts_every_case(self, capfd, tmp_path):
        path = tmp_path / "words.txt"
        path.write_text("Case case CASE")
        word_count(path)
        assert capfd.readouterr().out {op} "3\\n"
"""


def test_pytest_mode_is_success_when_every_test_passes(api):
    passing = run(api, "pytest", PYTEST_FILE.format(op="=="))
    assert passing.status == "Success", passing
    assert "1 passed" in passing.run_result.stdout
    failing = run(api, "pytest", PYTEST_FILE.format(op="!="))
    assert failing.status == "Failed" and failing.run_result.return_code == 1
    assert "1 failed" in failing.run_result.stdout
    as_python = run(api, "python", PYTEST_FILE.format(op="!="))  # defines the tests, runs none
    assert as_python.status == "Success"


# -- what is not served


@pytest.mark.parametrize("language", ["jest", "junit", "R", "kotlin", "swift", "julia",
                                      "go_test"])
def test_an_unsupported_language_or_mode_is_400_listing_what_is_supported(api, language):
    r = api.post("/run_code", json={"language": language, "code": "x"})
    assert r.status_code == 400, r.text
    message = json.dumps(r.json())
    assert "not supported" in message
    for name in ("python", "nodejs", "typescript", "java", "bash", "php", "ruby", "lua", "perl", "scala", "csharp"):
        assert name in message
