"""The PPO loss terms, each shown doing its job on the tiny demo model against the real service (README figures).

    .venv/bin/python scripts/ppo_experiments.py sweep   --kl 0.02,0.1,0.3,1.0 --steps 40
    .venv/bin/python scripts/ppo_experiments.py distill --seeds 0,1 --steps 40
    .venv/bin/python scripts/ppo_experiments.py distill --seeds 0,1 --steps 30 --kl-coef 0.02 --profile binary \
        --student-p-right 0.1 --teacher-loss exact --learning-rate 1e-3 --tag sparse     # the sparse-reward case

`sweep`: the reference term. One PPO run per `kl_coef`, same student, same seed; reports reward and pass rate over
the first and last 10 steps, entropy at both ends, and the exact KL to the reference over the last 10 steps.
`distill`: the teacher term. The student (trainer.tiny.warm_started) and the teacher (trainer.tiny.teacher_of) are
evaluated first (trainer.evaluate: same sampling, same service); then per seed, two runs side by side that differ
only in `teacher_kl_coef` (0: reward alone, the teacher loaded only to measure KL to it; 1: reward + distillation).
Reports the exact reverse KL to the teacher and the pass rate over the first and last 10 steps, and the first step
whose 5-step mean pass rate is within 0.05 of the teacher's.

Torch runs on one thread (the machine is shared); a service is started on a free port unless `--url` is given.
Checkpoints are cached in `--work`. Writes `--work/<command>.json` and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ppo_throughput import start_service  # noqa: E402
from trainer.evaluate import evaluate  # noqa: E402
from trainer.ppo import Config, load_model, train  # noqa: E402
from trainer.tiny import byte_tokenizer, teacher_of, warm_started  # noqa: E402


def checkpoint(work: Path, name: str, build: Any) -> str:
    path = work / name
    if not (path / "config.json").exists():
        model, tokenizer = build()
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return str(path)


def mean(rows: list[dict[str, Any]], key: str) -> float:
    values = [row[key] if key != "pass_rate" else row["components"]["pass_rate"] for row in rows]
    return statistics.mean(v for v in values if v is not None)


def summary(log: list[dict[str, Any]]) -> dict[str, float]:
    first, last = log[:10], log[-10:]
    out = {f"{k}_{end}": mean(part, k) for k in ("reward", "pass_rate", "entropy", "kl_ref_exact")
           for end, part in (("first", first), ("last", last))}
    if log[0].get("kl_teacher_exact") is not None:
        out |= {f"kl_teacher_exact_{end}": mean(part, "kl_teacher_exact") for end, part in (("first", first),
                                                                                           ("last", last))}
    return out


def steps_to_reach(log: list[dict[str, Any]], target: float, window: int = 5) -> int | None:
    rates = [row["components"]["pass_rate"] for row in log]
    for i in range(window, len(rates) + 1):
        if statistics.mean(rates[i - window:i]) >= target:
            return i
    return None


def sweep(args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    student = checkpoint(work, f"student-{args.seed}", lambda: warm_started(seed=args.seed))
    results = {}
    for kl in [float(k) for k in args.kl.split(",")]:
        log = train(Config(url=url, model=student, out=str(work / f"sweep-{kl}"), seed=args.seed, steps=args.steps,
                           learning_rate=3e-4, kl_coef=kl, device="cpu"))
        results[str(kl)] = summary(log)
        print(kl, json.dumps(results[str(kl)]), flush=True)
    print("\n| kl_coef | reward, first 10 | last 10 | pass rate, first 10 | last 10 | entropy, first 10 | last 10 "
          "| KL to ref (exact), last 10 |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kl, s in results.items():
        print(f"| {kl} | {s['reward_first']:.3f} | {s['reward_last']:.3f} | {s['pass_rate_first']:.3f} | "
              f"{s['pass_rate_last']:.3f} | {s['entropy_first']:.3f} | {s['entropy_last']:.3f} | "
              f"{s['kl_ref_exact_last']:.3f} |")
    return results


def distill(args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    teacher = checkpoint(work, f"teacher-{args.teacher_p_right}",
                         lambda: teacher_of(seed=0, p_right=args.teacher_p_right))
    tokenizer = byte_tokenizer()
    results: dict[str, Any] = {"teacher": evaluate(load_model(teacher, torch.device("cpu")), tokenizer, url).__dict__}
    print("teacher", results["teacher"], flush=True)
    target = results["teacher"]["pass_rate"] - 0.05
    for seed in [int(s) for s in args.seeds.split(",")]:
        student_name = f"student-{seed}" + ("" if (args.student_p_right, args.student_sft_steps) == (0.5, 400)
                                            else f"-p{args.student_p_right}-sft{args.student_sft_steps}")
        student = checkpoint(work, student_name,
                             lambda seed=seed: warm_started(seed=seed, sft_steps=args.student_sft_steps,
                                                            p_right=args.student_p_right))
        results[f"student-{seed}"] = evaluate(load_model(student, torch.device("cpu")), tokenizer, url).__dict__
        print("student", seed, results[f"student-{seed}"], flush=True)
        for name, coef in (("reward", 0.0), ("reward+teacher", args.teacher_kl_coef)):
            out = work / f"distill-{seed}-{name}-{args.tag}"
            log = train(Config(url=url, model=student, teacher=teacher, out=str(out), seed=seed,
                               steps=args.steps, learning_rate=args.learning_rate, kl_coef=args.kl_coef,
                               teacher_kl_coef=coef, teacher_loss=args.teacher_loss,
                               profile=args.profile, device="cpu"))
            s = summary(log) | {"steps_to_teacher": steps_to_reach(log, target)}
            results[f"{name}-{seed}"] = s
            print(name, seed, json.dumps(s), flush=True)
    t = results["teacher"]
    print(f"\nteacher pass rate {t['pass_rate']:.3f} (reward {t['reward']:.3f}); target: 5-step mean >= "
          f"{target:.3f}\n\n| seed | loss | student pass rate (eval) | pass rate, first 10 | last 10 | KL to teacher "
          "(exact, per completion), first 10 | last 10 | steps to the teacher's pass rate |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in ("reward", "reward+teacher"):
            s = results[f"{name}-{seed}"]
            print(f"| {seed} | {name} | {results[f'student-{seed}']['pass_rate']:.3f} | {s['pass_rate_first']:.3f} | "
                  f"{s['pass_rate_last']:.3f} | {s['kl_teacher_exact_first']:.3f} | {s['kl_teacher_exact_last']:.3f}"
                  f" | {s['steps_to_teacher'] or 'not within ' + str(args.steps)} |")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("sweep", "distill"))
    parser.add_argument("--url", help="a running rewardbox (default: start one)")
    parser.add_argument("--work", default="runs/ppo-experiments")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0, help="sweep: the seed")
    parser.add_argument("--seeds", default="0,1", help="distill: the seeds")
    parser.add_argument("--kl", default="0.02,0.1,0.3,1.0", help="sweep: the kl_coef values")
    parser.add_argument("--kl-coef", type=float, default=Config.kl_coef, help="distill: kl_coef of both runs")
    parser.add_argument("--teacher-kl-coef", type=float, default=1.0, help="distill: the distillation run's weight")
    parser.add_argument("--teacher-p-right", type=float, default=0.9,
                        help="distill: how often the teacher's demonstrator is right (trainer.tiny.teacher_of)")
    parser.add_argument("--student-p-right", type=float, default=0.5,
                        help="distill: how often the student's demonstrator is right (trainer.tiny.warm_started)")
    parser.add_argument("--student-sft-steps", type=int, default=400, help="distill: the student's SFT steps")
    parser.add_argument("--teacher-loss", choices=("reward", "token", "exact"), default=Config.teacher_loss,
                        help="distill: how the teacher term enters (trainer.ppo.Config.teacher_loss)")
    parser.add_argument("--tag", default="run", help="distill: names this setting's output folders")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="distill: the learning rate of both runs")
    parser.add_argument("--profile", default=Config.profile,
                        help="distill: the reward profile PPO trains on (binary: 0/1, a sparse reward)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    proc, url = (None, args.url) if args.url else start_service(pool_size=2)
    try:
        results = (sweep if args.command == "sweep" else distill)(args, url, work)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    name = f"distill-{args.tag}" if args.command == "distill" else args.command
    (work / f"{name}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
