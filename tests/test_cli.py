"""The client commands of the `rewardbox` CLI: --url everywhere, one actionable line on failure, no retries; pass@k
that leaves infra errors out."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from service.benchmark import summarise

CLIENT_COMMANDS = [["rollouts", "list"], ["replay", "abc"], ["export"], ["bench", "--samples", "{samples}"]]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REWARDBOX_URL", "REWARDBOX_TOKEN")} | (env or {})
    return subprocess.run([sys.executable, "-m", "service.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rewardbox: "), proc.stderr
    return lines[0]


@pytest.fixture
def samples(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return True\n"}) + "\n")
    return str(path)


class CountingCloser:
    """A port that accepts connections and closes them at once, counting them: a broken server."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.count = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=lambda c: c[0])
def test_every_client_command_fails_once_with_one_line_when_the_server_is_broken(command, samples):
    broken = CountingCloser()
    try:
        line = one_line(cli(*[a.format(samples=samples) for a in command], "--url", broken.url))
    finally:
        broken.sock.close()
    assert broken.url in line
    assert broken.count == 1  # fail fast: no silent retries


def test_a_server_that_is_down_is_named_with_what_to_do(samples):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    line = one_line(cli("rollouts", "list", "--url", url))
    assert f"cannot reach a rewardbox server at {url}" in line and "--url" in line


@contextlib.contextmanager
def answering(status: int):
    """An HTTP server that answers every request with `status` and no body: a server that is not (our) rewardbox."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = answer  # noqa: N815 - http.server's naming

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()


def test_a_url_that_is_not_rewardbox_says_so():
    with answering(404) as url:
        line = one_line(cli("rollouts", "list", "--url", url))
    assert "404" in line and "rewardbox server" in line


def test_bench_input_mistakes_are_one_line(tmp_path):
    assert "cannot read the samples file" in one_line(cli("bench", "--samples", str(tmp_path / "missing.jsonl")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "HumanEval/0"}) + "\n")
    assert "line 1 has no 'completion' field" in one_line(cli("bench", "--samples", str(bad)))
    bad.write_text("{not json\n")
    assert "line 1 is not JSON" in one_line(cli("bench", "--samples", str(bad)))


def test_a_missing_token_is_named(samples):
    with answering(401) as url:
        line = one_line(cli("bench", "--samples", samples, "--url", url))
    assert "--token" in line


def test_bench_with_url_against_the_real_server(server, humaneval, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"task_id": p["task_id"], "completion": c}) + "\n"
                            for p in humaneval[:2] for c in (p["canonical_solution"], "    return None\n")))
    out = cli("bench", "--samples", str(path), "--url", server)
    assert out.returncode == 0, out.stderr
    assert "pass@1" in out.stdout and "0.5000" in out.stdout


def test_pass_at_k_leaves_infra_errors_out_and_counts_them_apart():
    samples = [{"task_id": t} for t in ("a", "a", "a", "b", "b", "c")]
    statuses = ["passed", "infra_error", "infra_error", "failed", "failed", "infra_error"]
    results = [{"status": s, "reward": None if s == "infra_error" else float(s == "passed")} for s in statuses]
    summary = summarise(samples, results, ks=(1, 2))
    assert summary["pass@1"] == pytest.approx(0.5)  # a: 1/1, b: 0/2; c has no scored sample
    assert summary["pass@1_tasks"] == 2 and summary["tasks"] == 3
    assert summary["pass@2"] == 0.0 and summary["pass@2_tasks"] == 1  # only b has two scored samples
    assert summary["infra_errors"] == 3 and summary["reward_mean"] == pytest.approx(1 / 3)
    everything_down = summarise(samples[:2], results[1:3], ks=(1,))
    assert "pass@1" not in everything_down and everything_down["infra_errors"] == 2


def test_export_into_a_pipe_closed_early_ends_quietly(server):
    """`rewardbox export | head -1`: the reader stops after one line; the command ends without a traceback."""
    import httpx

    for n in range(3):  # rollouts to export (a few lines, more than the reader takes)
        scored = httpx.post(f"{server}/reward", json={"code": f"def f():\n    return {n}\n", "tests": {
            "kind": "assert", "test_code": "assert f() == 0\n"}}, timeout=120)
        assert scored.status_code == 200, scored.text
    env = {**os.environ, "REWARDBOX_URL": server}
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m service.cli export | head -1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.count("\n") == 1, (proc.stdout, proc.stderr)
    assert "rollout_id" in json.loads(proc.stdout)["result"]
