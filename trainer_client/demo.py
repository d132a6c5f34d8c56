"""A GRPO run that learns on a CPU in minutes, against a running Assay service.

    python -m trainer_client.demo --service http://127.0.0.1:8000 --api-key ak_... \\
        --steps 60 --metrics-out metrics.jsonl

A tiny randomly initialised Llama (no download) with a character-level tokenizer learns
the task family "N%10=" (the units digit of N, a single-digit answer) from the math
verifier's rewards alone. A completion is one token (`--max-new-tokens 1`), so at the
start the reward is chance (1 in 16 tokens is the right digit); by about step 60 it is
well above it. Held-out numbers test that it learned the rule (copy the digit before
`%`), not a table. At the end, a held-out evaluation run (POST /v1/evals) reports pass@k
on a task family it never trained on ("N%5=") beside the trained family's held-out numbers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import uuid
from pathlib import Path

import torch

from trainer_client.client import RewardClient
from trainer_client.loop import GRPOTrainer, TaskItem, TrainConfig, load_tasks
from trainer_client.results import Generation, RewardRequestError
from trainer_client.tiny import build_model, build_tokenizer

ALPHABET = "0123456789%="


def make_tasks(n_train: int, n_eval: int, seed: int) -> tuple[list[TaskItem], list[TaskItem]]:
    """Distinct numbers for training and evaluation (the eval numbers are never trained on)."""
    numbers = random.Random(seed).sample(range(10, 10_000), n_train + n_eval)
    items = [TaskItem(prompt=f"{n}%10=", verifier="math", task={"answer": str(n % 10)}) for n in numbers]
    return items[:n_train], items[n_train:]


HELD_OUT_SAMPLES = 4


def held_out_eval(trainer: GRPOTrainer, client: RewardClient, trained: list[TaskItem], seed: int,
                  step: int) -> dict[str, object]:
    """pass@k on the trained family's held-out numbers and on "N%5=", never trained on."""
    numbers = random.Random(seed + 1).sample(range(10, 10_000), 20)
    families = {"units_digit_held_out": trained[:20],
                "mod5_never_trained": [TaskItem(prompt=f"{n}%5=", verifier="math", task={"answer": str(n % 5)})
                                       for n in numbers]}
    groups: dict[str, list] = {}
    for family, items in families.items():
        batch = trainer.generate([t.prompt for t in items], HELD_OUT_SAMPLES)
        texts, lengths, cut = batch["texts"], batch["lengths"].tolist(), batch["truncated"].tolist()
        groups[family] = []
        for i, item in enumerate(items):
            rows = range(i * HELD_OUT_SAMPLES, (i + 1) * HELD_OUT_SAMPLES)
            groups[family].append(item.group([Generation(text=texts[r], tokens=int(lengths[r]),
                                                         finish_reason="length" if cut[r] else "stop")
                                              for r in rows]))
    return client.evaluate("demo-held-out", f"step-{step}", groups)


# The demo's answers are one token by design: every response is flagged `answer_only`, which
# this run's alarms need not watch. The other rules keep their defaults.
RUN_THRESHOLDS = {"flag_rate": {"ignore": ["truncated", "answer_only"]}}


def watch_run(client: RewardClient) -> None:
    """Tell the service what this run's alarms should ignore (needs a key with `audit`)."""
    try:
        client.set_run_thresholds(RUN_THRESHOLDS)
    except RewardRequestError as exc:
        print(f"run thresholds not set ({exc}); alarms use the defaults", file=sys.stderr)


def write_jsonl(path: Path, items: list[TaskItem]) -> None:
    path.write_text("".join(item.model_dump_json(exclude_none=True) + "\n" for item in items))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--service", required=True, help="Assay base URL")
    p.add_argument("--api-key", required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--metrics-out", default=None)
    p.add_argument("--output-dir", default=None, help="task files and checkpoints (default: a temp dir)")
    p.add_argument("--prompts-per-step", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--max-new-tokens", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-id", default=None, help="the run's name in Assay (default: demo-<seed>-<random>)")
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--loss-type", default="dapo", choices=["grpo", "bnpo", "dr_grpo", "dapo"])
    p.add_argument("--threads", type=int, default=1, help="torch threads (the service needs the other cores)")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, object]:
    torch.set_num_threads(args.threads)
    out = Path(args.output_dir or tempfile.mkdtemp(prefix="assay-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    train, held_out = make_tasks(400, 50, args.seed)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "eval.jsonl", held_out)
    tokenizer = build_tokenizer(ALPHABET)
    model = build_model(tokenizer, hidden_size=64, layers=1, seed=args.seed)
    config = TrainConfig(
        steps=args.steps, prompts_per_step=args.prompts_per_step, group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        learning_rate=args.learning_rate, loss_type=args.loss_type, beta=args.beta, eval_every=args.eval_every,
        metrics_out=args.metrics_out, output_dir=str(out / "checkpoints") if args.output_dir else None,
        seed=args.seed,
    )
    run_id = args.run_id or f"demo-{args.seed}-{uuid.uuid4().hex[:8]}"
    with RewardClient(args.service, args.api_key, max_concurrency=2, run_id=run_id) as client:
        watch_run(client)
        trainer = GRPOTrainer(model, tokenizer, client, config, load_tasks(out / "train.jsonl"),
                              load_tasks(out / "eval.jsonl"))
        history = trainer.train()
        report = held_out_eval(trainer, client, held_out, args.seed, len(history))
    k = max(1, min(5, len(history) // 4))
    evals = [h for h in history if "eval/reward" in h]
    summary: dict[str, object] = {
        "run_id": run_id,
        "run_page": f"{args.service.rstrip('/')}/ui/runs/{run_id}",
        "steps": float(len(history)),
        "reward_first": sum(h["reward"] for h in history[:k]) / k,
        "reward_last": sum(h["reward"] for h in history[-k:]) / k,
        "eval_reward_first": evals[0]["eval/reward"] if evals else float("nan"),
        "eval_reward_last": evals[-1]["eval/reward"] if evals else float("nan"),
        "step_time_mean_s": sum(h["time/step_s"] for h in history) / len(history),
        "reward_time_mean_s": sum(h["time/reward_s"] for h in history) / len(history),
    }
    for family, found in report["families"].items():  # type: ignore[union-attr]
        for k, value in found["pass_at_k"].items():
            summary[f"held_out/{family}/pass@{k}"] = value
    return summary


def main(argv: list[str] | None = None) -> int:
    summary = run(parse_args(argv))
    print(json.dumps(summary, indent=2))
    return 0 if summary["reward_last"] > summary["reward_first"] else 1


if __name__ == "__main__":
    sys.exit(main())
