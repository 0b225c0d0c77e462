"""Benchmark: where a PPO step's time goes when rewardbox scores the rollouts (trainer/ppo.py, real service).

    .venv/bin/python bench/ppo_throughput.py                       # starts `rewardbox serve` on a free local port
    .venv/bin/python bench/ppo_throughput.py --device cuda         # on a lent GPU: fails at once without CUDA
    .venv/bin/python bench/ppo_throughput.py --url http://127.0.0.1:8000 --model PATH --steps 10 --json

Runs `--steps` PPO steps of the tiny demo model (or `--model PATH`) on the named-function task family twice in the
same run, from the same checkpoint and seed: scoring in line (generate, score, update one after another: the
baseline) and overlapped (`Config.overlap`: step t is scored while step t+1 is generated, one update of policy lag).
Prints for each, as medians over the steps after the first (warm-up): step time, generation tokens/s, update
tokens/s (forward + backward of the clipped surrogate, all epochs), the no-grad log-prob passes (policy, reference
and their exact KL) as the same-run baseline for the update, the time blocked on rewards and its share of the step:
what tells whether the reward service keeps the accelerator busy. `--device auto` takes CUDA (bf16 autocast) when
present, else CPU; `--device cuda` exits with a message, before starting anything, when torch sees no GPU.
Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainer.ppo import Config, DeviceUnavailable, resolve_device, train  # noqa: E402
from trainer.tiny import warm_started  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(pool_size: int) -> tuple[subprocess.Popen, str]:
    """`rewardbox serve` on loopback with a real sandbox pool; returns once /readyz answers 200."""
    port = free_port()
    env = {**os.environ, "REWARDBOX_POOL_SIZE": str(pool_size), "REWARDBOX_DB": "off"}
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rewardbox serve exited with {proc.returncode}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("rewardbox serve was not ready within 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running rewardbox (default: start one)")
    parser.add_argument("--model", help="local checkpoint (default: the tiny demo model, SFT warm-started here)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--profile", default="seed")
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (cuda: fail fast without one)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--modes", default="inline,overlap", help="which loops to time, in this order")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        device = resolve_device(args.device)
    except DeviceUnavailable as e:
        raise SystemExit(f"error: {e}") from None
    if args.threads:
        torch.set_num_threads(args.threads)

    proc, url = (None, args.url) if args.url else start_service(args.pool_size)
    work = Path(tempfile.mkdtemp(prefix="ppo-bench-"))
    try:
        model = args.model
        if model is None:
            policy, tokenizer = warm_started(seed=0)
            model = str(work / "tiny")
            policy.save_pretrained(model)
            tokenizer.save_pretrained(model)
        runs = {}
        for mode in args.modes.split(","):
            cfg = Config(url=url, model=model, out=str(work / mode), steps=args.steps,
                         prompts_per_step=args.prompts_per_step, group_size=args.group_size,
                         max_new_tokens=args.max_new_tokens, profile=args.profile, learning_rate=3e-4,
                         device=str(device), overlap=mode == "overlap")
            runs[mode] = train(cfg)[1:]  # the first step warms caches (lint, allocator, kernels)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)

    batch = args.prompts_per_step * args.group_size
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    report = {"device": name, "dtype": "bf16 autocast" if device.type == "cuda" else "float32",
              "model": args.model or "tiny demo (Llama, 2 layers, hidden 128)", "completions_per_step": batch,
              "modes": {mode: figures(log, batch) for mode, log in runs.items()}}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    some = next(iter(report["modes"].values()))
    print(f"device {report['device']} ({report['dtype']}), model {report['model']}, {batch} completions a step, "
          f"{some['steps_measured']} steps measured per mode (after 1 warm-up), "
          f"~{some['mean_completion_tokens']:.0f} tokens each")
    modes = list(report["modes"])
    table = [("step time (s)", "step_s", "{:.2f}"), ("generation (tokens/s)", "generate_tokens_per_s", "{:,.0f}"),
             ("update, fwd+bwd all epochs (tokens/s)", "update_tokens_per_s", "{:,.0f}"),
             ("no-grad log-prob passes (tokens/s)", "logprob_pass_tokens_per_s", "{:,.0f}"),
             ("blocked on rewards (s)", "reward_s", "{:.2f}"), ("reward-wait share", "reward_wait_share", "{:.0%}"),
             ("mean reward", "reward", "{:.3f}")]
    print(f"  {'':40s}" + "".join(f"{m:>12s}" for m in modes))
    for label, key, fmt in table:
        print(f"  {label:40s}" + "".join(f"{fmt.format(report['modes'][m][key]):>12s}" for m in modes))
    if {"inline", "overlap"} <= set(modes):
        ratio = report["modes"]["overlap"]["step_s"] / report["modes"]["inline"]["step_s"]
        print(f"  overlapped step time / in-line step time: {ratio:.2f}")


def figures(log: list[dict], batch: int) -> dict:
    def median(f) -> float:
        return statistics.median(f(row) for row in log)

    return {
        "steps_measured": len(log),
        "step_s": median(lambda r: r["time"]["step_s"]),
        "generate_tokens_per_s": median(lambda r: r["tokens_per_s"]["generate"]),
        "update_tokens_per_s": median(lambda r: r["tokens_per_s"]["update"]),
        # policy and reference (and teacher, if any) over the same tokens
        "logprob_pass_tokens_per_s": median(lambda r: 2 * r["completion_tokens"] / r["time"]["logprobs_s"]),
        "reward_s": median(lambda r: r["time"]["reward_s"]),
        "reward_wait_share": median(lambda r: r["reward_wait_share"]),
        "share": {phase: median(lambda r, p=phase: r["time"][p] / r["time"]["step_s"])
                  for phase in ("generate_s", "reward_s", "logprobs_s", "update_s")},
        "reward": statistics.mean(r["reward"] for r in log if r["reward"] is not None),
        "mean_completion_tokens": median(lambda r: r["completion_tokens"] / batch),
    }


if __name__ == "__main__":
    main()
