"""Benchmark: where a PPO step's time goes when rewardbox scores the rollouts (trainer/ppo.py, real service).

    .venv/bin/python bench/ppo_throughput.py                       # starts `rewardbox serve` on a free local port
    .venv/bin/python bench/ppo_throughput.py --url http://127.0.0.1:8000 --model PATH --steps 10 --json

Runs `--steps` PPO steps of the tiny demo model (or `--model PATH`) on the named-function task family and prints, as
medians over the steps after the first (warm-up): generation tokens/s, update tokens/s (forward + backward of the
clipped surrogate, all epochs), the no-grad log-prob passes (policy and reference) as the same-run baseline for the
update, the reward round trip and the service's rollouts/s, and the share of step time spent waiting for rewards:
what tells whether the reward service keeps the accelerator busy. Uses CUDA (bf16 autocast) when present, else CPU.
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

from trainer.ppo import Config, train  # noqa: E402
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    proc, url = (None, args.url) if args.url else start_service(args.pool_size)
    work = Path(tempfile.mkdtemp(prefix="ppo-bench-"))
    try:
        model = args.model
        if model is None:
            policy, tokenizer = warm_started(seed=0)
            model = str(work / "tiny")
            policy.save_pretrained(model)
            tokenizer.save_pretrained(model)
        cfg = Config(url=url, model=model, out=str(work / "run"), steps=args.steps,
                     prompts_per_step=args.prompts_per_step, group_size=args.group_size,
                     max_new_tokens=args.max_new_tokens, profile=args.profile, learning_rate=3e-4)
        log = train(cfg)[1:]  # the first step warms caches (lint, allocator, kernels)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)

    def median(f) -> float:
        return statistics.median(f(row) for row in log)

    batch = args.prompts_per_step * args.group_size
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu ({torch.get_num_threads()} threads)"
    figures = {
        "device": device,
        "model": args.model or "tiny demo (Llama, 2 layers, hidden 128)",
        "completions_per_step": batch, "steps_measured": len(log),
        "step_s": median(lambda r: r["time"]["step_s"]),
        "generate_tokens_per_s": median(lambda r: r["tokens_per_s"]["generate"]),
        "update_tokens_per_s": median(lambda r: r["tokens_per_s"]["update"]),
        "logprob_pass_tokens_per_s": median(lambda r: 2 * r["completion_tokens"] / r["time"]["logprobs_s"]),
        "reward_s": median(lambda r: r["time"]["reward_s"]),
        "service_rollouts_per_s": median(lambda r: batch / r["time"]["reward_s"]),
        "share": {phase: median(lambda r, p=phase: r["time"][p] / r["time"]["step_s"])
                  for phase in ("generate_s", "reward_s", "logprobs_s", "update_s")},
        "mean_completion_tokens": median(lambda r: r["completion_tokens"] / batch),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"device {figures['device']}, model {figures['model']}, {batch} completions a step, "
          f"{len(log)} steps measured (after 1 warm-up), ~{figures['mean_completion_tokens']:.0f} tokens each")
    print(f"  step time                     {figures['step_s']:.2f} s (median)")
    print(f"  generation                    {figures['generate_tokens_per_s']:,.0f} tokens/s")
    print(f"  update (fwd+bwd, all epochs)  {figures['update_tokens_per_s']:,.0f} tokens/s")
    print(f"  no-grad log-prob pass         {figures['logprob_pass_tokens_per_s']:,.0f} tokens/s (baseline)")
    print(f"  reward round trip             {figures['reward_s']:.2f} s ({figures['service_rollouts_per_s']:.0f} "
          f"rollouts/s)")
    print("  share of step time:           " + ", ".join(f"{k[:-2]} {v:.0%}" for k, v in figures["share"].items()))


if __name__ == "__main__":
    main()
