"""A small GRPO training loop: sample G completions per prompt, score them with Assay,
update the policy with the clipped GRPO loss, evaluate, checkpoint, log JSONL metrics.

Metric names follow TRL's GRPOTrainer where it has one (`reward`, `reward_std`,
`frac_reward_zero_std`, `completions/mean_length`, `completions/clipped_ratio`, `kl`,
`clip_ratio/region_mean`, `entropy`, `rewards/<component>/mean`), so dashboards carry over.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from tqdm import tqdm

from trainer_client.grpo import (
    LossConfig,
    completion_mask,
    compute_advantages,
    entropy_from_logits,
    grpo_loss,
    token_logprobs,
)
from trainer_client.results import ErrorPolicy, Generation, Group, GroupResult


class TaskItem(BaseModel):
    """One line of a task file: the prompt the model sees and the task Assay checks."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    verifier: str = "math"
    task: dict[str, Any] | None = None
    task_id: str | None = None

    @model_validator(mode="after")
    def _one_task(self) -> TaskItem:
        if (self.task is None) == (self.task_id is None):
            raise ValueError("a task item needs exactly one of `task` and `task_id`")
        return self

    def group(self, responses: list[str | Generation]) -> Group:
        return Group(verifier=self.verifier, task=self.task, task_id=self.task_id, responses=responses)


def load_tasks(path: str | os.PathLike[str]) -> list[TaskItem]:
    with open(path, encoding="utf-8") as fh:
        return [TaskItem.model_validate_json(line) for line in fh if line.strip()]


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: int = 100
    prompts_per_step: int = 8
    group_size: int = Field(8, ge=2)
    max_new_tokens: int = 16
    temperature: float = 1.0
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    num_iterations: int = Field(1, ge=1)
    micro_batch_size: int | None = None  # rows per forward/backward; None: the whole batch
    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo"] = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.0
    scale_rewards: Literal["group", "batch", "none"] = "group"
    advantage_eps: float = 1e-4
    mask_truncated_completions: bool = False
    error_policy: ErrorPolicy = ErrorPolicy.drop
    eval_every: int = 0  # 0: evaluate only at the end (when eval tasks are given)
    eval_limit: int | None = None
    save_every: int = 0
    output_dir: str | None = None
    metrics_out: str | None = None
    seed: int = 0
    bf16: bool | None = None  # None: on a GPU only
    disable_dropout: bool = True  # sampling, old and new log-probs then see the same network
    progress: bool | None = None  # None: a bar only when stderr is a terminal

    def loss_config(self) -> LossConfig:
        return LossConfig(self.loss_type, self.epsilon, self.epsilon_high, self.beta, self.max_new_tokens)


class Scorer(Protocol):
    def score_groups(self, groups: Sequence[Group]) -> list[GroupResult]: ...


def load_model(path: str, device: str | None = None) -> tuple[Any, Any]:
    """Any local Hugging Face causal-LM directory, offline (there may be no hub)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    return model.to(device or default_device()), tokenizer


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class GRPOTrainer:
    def __init__(self, model: Any, tokenizer: Any, scorer: Scorer, config: TrainConfig,
                 train_tasks: Sequence[TaskItem], eval_tasks: Sequence[TaskItem] = ()) -> None:
        if not train_tasks:
            raise ValueError("no training tasks")
        self.model, self.tok, self.scorer, self.cfg = model, tokenizer, scorer, config
        self.train_tasks, self.eval_tasks = list(train_tasks), list(eval_tasks)
        self.device = next(model.parameters()).device
        # bf16 autocast over fp32 master weights (default on a GPU); plain fp32 otherwise.
        bf16 = self.device.type == "cuda" if config.bf16 is None else config.bf16
        device_type = self.device.type
        self.autocast: Callable[[], AbstractContextManager[Any]] = (
            (lambda: torch.autocast(device_type, dtype=torch.bfloat16)) if bf16 else nullcontext)
        self.ref_model = None
        if config.beta != 0.0:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.opt = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
        self.rng = random.Random(config.seed)
        torch.manual_seed(config.seed)
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.tok.padding_side = "left"  # generation continues from the right edge
        self.history: list[dict[str, float]] = []

    # ---- sampling -------------------------------------------------------------------
    def _encode(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        # The tokenizer's own special tokens (BOS for Llama-style ones); chat prompts come
        # already formatted by the chat template.
        enc = self.tok(prompts, return_tensors="pt", padding=True)
        return enc.input_ids.to(self.device), enc.attention_mask.to(self.device)

    @torch.no_grad()
    def generate(self, prompts: list[str], n: int, greedy: bool = False) -> dict[str, Any]:
        ids, attn = self._encode(prompts)
        ids, attn = ids.repeat_interleave(n, 0), attn.repeat_interleave(n, 0)
        self.model.eval()
        kwargs: dict[str, Any] = {"do_sample": False} if greedy else {
            "do_sample": True, "temperature": self.cfg.temperature, "top_k": 0, "top_p": 1.0}
        with self.autocast():
            out = self.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=self.cfg.max_new_tokens,
                                      pad_token_id=self.tok.pad_token_id, eos_token_id=self.tok.eos_token_id, **kwargs)
        completion = out[:, ids.size(1):]
        mask, truncated = completion_mask(completion, self.tok.eos_token_id,
                                          mask_truncated=self.cfg.mask_truncated_completions)
        lengths, _ = completion_mask(completion, self.tok.eos_token_id)
        texts = [self._decode(row) for row in completion]
        return {"prompt_ids": ids, "prompt_mask": attn, "completion_ids": completion, "mask": mask,
                "truncated": truncated, "lengths": lengths.sum(1), "texts": texts}

    def _decode(self, row: torch.Tensor) -> str:
        ids = row.tolist()
        if self.tok.eos_token_id in ids:
            ids = ids[: ids.index(self.tok.eos_token_id)]
        return self.tok.decode(ids, skip_special_tokens=True)

    def _logps(self, model: Any, batch: dict[str, Any], rows: slice, entropy: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        p_ids, p_mask = batch["prompt_ids"][rows], batch["prompt_mask"][rows]
        c_ids = batch["completion_ids"][rows]
        c_attn, _ = completion_mask(c_ids, self.tok.eos_token_id)  # attend up to EOS even if masked in loss
        input_ids = torch.cat([p_ids, c_ids], 1)
        attn = torch.cat([p_mask, c_attn.long()], 1)
        # Positions as generate() computed them under left padding, so old and new log-probs agree.
        positions = (attn.cumsum(1) - 1).clamp(min=0)
        with self.autocast():
            logits = model(input_ids=input_ids, attention_mask=attn, position_ids=positions).logits
        logits = logits[:, p_ids.size(1) - 1 : -1, :] / self.cfg.temperature  # TRL scales by temperature too
        ent = entropy_from_logits(logits) if entropy else None
        return token_logprobs(logits, c_ids), ent

    # ---- one step -------------------------------------------------------------------
    def _rewards(self, results: list[GroupResult]) -> tuple[torch.Tensor, torch.Tensor]:
        flat = [r.reward_under(self.cfg.error_policy) for g in results for r in g.results]
        valid = torch.tensor([r is not None for r in flat], dtype=torch.bool)
        rewards = torch.tensor([0.0 if r is None else r for r in flat], dtype=torch.float32)
        return rewards, valid

    def step(self, step: int) -> dict[str, float]:
        cfg = self.cfg
        t0 = time.monotonic()
        tasks = [self.rng.choice(self.train_tasks) for _ in range(cfg.prompts_per_step)]
        batch = self.generate([t.prompt for t in tasks], cfg.group_size)
        t1 = time.monotonic()
        g = cfg.group_size
        groups = [t.group(batch["texts"][i * g : (i + 1) * g]) for i, t in enumerate(tasks)]
        at_step = getattr(self.scorer, "at_step", None)
        if at_step is not None:  # the reward service logs this step's records under the run
            at_step(step)
        results = self.scorer.score_groups(groups)
        t2 = time.monotonic()

        rewards, valid = self._rewards(results)
        adv = compute_advantages(rewards, g, valid=valid, scale=cfg.scale_rewards, eps=cfg.advantage_eps)
        advantages = adv.advantages.to(self.device)
        # An excluded (error) response contributes no token to the loss.
        mask = batch["mask"] * valid.to(self.device)[:, None].float()
        n_rows = mask.size(0)
        micro = cfg.micro_batch_size or n_rows
        slices = [slice(s, min(s + micro, n_rows)) for s in range(0, n_rows, micro)]
        total_tokens = mask.sum()

        with torch.no_grad():
            old = None
            if cfg.num_iterations > 1:  # stored sampling-time log-probs for the reused batch
                self.model.eval()
                old = torch.cat([self._logps(self.model, batch, s)[0] for s in slices])
            ref = torch.cat([self._logps(self.ref_model, batch, s)[0] for s in slices]) if self.ref_model else None

        self.model.train(not cfg.disable_dropout)
        lcfg = cfg.loss_config()
        agg: dict[str, float] = Counter()
        entropies = []
        grad_norm = 0.0
        for it in range(cfg.num_iterations):
            self.opt.zero_grad(set_to_none=True)
            for s in slices:
                logps, ent = self._logps(self.model, batch, s, entropy=(it == 0))
                loss, m = grpo_loss(logps, advantages[s], mask[s], lcfg,
                                    old_logps=None if old is None else old[s],
                                    ref_logps=None if ref is None else ref[s], num_items_in_batch=total_tokens)
                if lcfg.loss_type != "dapo":  # dapo already divides by the whole batch's tokens
                    loss = loss * (s.stop - s.start) / n_rows
                loss.backward()
                weight = (s.stop - s.start) / n_rows / cfg.num_iterations
                for k, v in m.items():
                    agg[k] += v * weight
                agg["loss"] += loss.item() / cfg.num_iterations
                if ent is not None:
                    entropies.append((ent.detach() * mask[s]).sum().item())
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
            self.opt.step()
        t3 = time.monotonic()

        metrics = self._step_metrics(results, rewards, valid, adv, batch)
        metrics.update(agg)
        metrics["entropy"] = sum(entropies) / max(1.0, total_tokens.item())
        metrics["grad_norm"] = grad_norm
        metrics["learning_rate"] = self.opt.param_groups[0]["lr"]
        stats = getattr(self.scorer, "stats", None)
        if stats is not None:
            metrics.update(stats.take())
        gen_tokens = float(batch["lengths"].sum().item())
        metrics.update({"time/generate_s": t1 - t0, "time/reward_s": t2 - t1, "time/train_s": t3 - t2,
                        "time/step_s": t3 - t0, "tokens_per_s": gen_tokens / max(t3 - t0, 1e-9)})
        return metrics

    def _step_metrics(self, results: list[GroupResult], rewards: torch.Tensor, valid: torch.Tensor,
                      adv: Any, batch: dict[str, Any]) -> dict[str, float]:
        flat = [r for g in results for r in g.results]
        vr = rewards[valid]
        m: dict[str, float] = {
            "reward": vr.mean().item() if vr.numel() else 0.0,
            "reward_std": adv.std.mean().item(),
            "frac_reward_zero_std": adv.zero_variance.float().mean().item(),
            "completions/mean_length": batch["lengths"].float().mean().item(),
            "completions/min_length": batch["lengths"].float().min().item(),
            "completions/max_length": batch["lengths"].float().max().item(),
            "completions/clipped_ratio": batch["truncated"].float().mean().item(),
        }
        comps: dict[str, list[float]] = {}
        for r in flat:
            if not r.is_error:
                for name, value in r.component_values().items():
                    comps.setdefault(name, []).append(value)
        for name, values in comps.items():
            m[f"rewards/{name}/mean"] = sum(values) / len(values)
        for verdict, n in Counter(r.verdict for r in flat).items():
            m[f"verdicts/{verdict}"] = n / len(flat)
        return m

    # ---- evaluation, checkpoints, the loop ------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        tasks = self.eval_tasks[: self.cfg.eval_limit] if self.cfg.eval_limit else self.eval_tasks
        if not tasks:
            return {}
        batch = self.generate([t.prompt for t in tasks], 1, greedy=True)
        groups = [t.group([txt]) for t, txt in zip(tasks, batch["texts"], strict=True)]
        if getattr(self.scorer, "run_id", None) is not None and hasattr(self.scorer, "evaluate"):
            out = self._evaluate_on_run(groups)
        else:
            flat = [g.results[0] for g in self.scorer.score_groups(groups)]
            ok = [r for r in flat if not r.is_error]
            out = {
                "eval/reward": sum(r.reward or 0.0 for r in ok) / max(1, len(ok)),
                "eval/accuracy": sum(r.verdict == "correct" for r in ok) / max(1, len(ok)),
                "eval/errors": float(len(flat) - len(ok)),
            }
        stats = getattr(self.scorer, "stats", None)
        if stats is not None:  # the evaluation's own service calls, apart from the step's
            out.update({f"eval/{k}": v for k, v in stats.take().items()})
        return out

    def _evaluate_on_run(self, groups: list[Group]) -> dict[str, float]:
        """A scorer that names a run gets a held-out evaluation (POST /v1/evals) tagged with the
        run and step, so the run's page shows held-out pass@1 beside the training reward and
        the evaluation's records stay out of the training series."""
        step = getattr(self.scorer, "step", None)
        report = self.scorer.evaluate("held-out", f"step-{step}", {"held_out": groups})["overall"]  # type: ignore[attr-defined]
        return {"eval/reward": report["mean_reward"] or 0.0, "eval/accuracy": report["pass_at_k"].get("1", 0.0),
                "eval/errors": float(round((report["error_rate"] or 0.0) * report["n_responses"]))}

    def save(self, tag: str) -> Path | None:
        if not self.cfg.output_dir:
            return None
        path = Path(self.cfg.output_dir) / tag
        self.model.save_pretrained(path)
        self.tok.save_pretrained(path)
        return path

    def train(self) -> list[dict[str, float]]:
        cfg = self.cfg
        show = sys.stderr.isatty() if cfg.progress is None else cfg.progress
        sink = open(cfg.metrics_out, "a", encoding="utf-8") if cfg.metrics_out else None  # noqa: SIM115
        try:
            bar = tqdm(range(1, cfg.steps + 1), disable=not show, desc="grpo", dynamic_ncols=True)
            last_eval = float("nan")
            for step in bar:
                metrics = {"step": float(step), **self.step(step)}
                last = step == cfg.steps
                if self.eval_tasks and ((cfg.eval_every and step % cfg.eval_every == 0) or last or step == 1):
                    metrics.update(self.evaluate())
                if cfg.save_every and step % cfg.save_every == 0:
                    self.save(f"checkpoint-{step}")
                self.history.append(metrics)
                if sink:
                    sink.write(json.dumps(metrics) + "\n")
                    sink.flush()
                last_eval = metrics.get("eval/reward", last_eval)  # the bar keeps the latest evaluation
                bar.set_postfix(reward=f"{metrics['reward']:.3f}", eval=f"{last_eval:.3f}")
            self.save("final")
        finally:
            if sink:
                sink.close()
        return self.history


def main(argv: list[str] | None = None) -> int:
    """`python -m trainer_client.loop --model DIR --train-file F --service URL --api-key K`"""
    import argparse

    from trainer_client.client import RewardClient

    p = argparse.ArgumentParser(description="GRPO against an Assay reward service")
    p.add_argument("--model", required=True, help="a local Hugging Face causal-LM directory (loaded offline)")
    p.add_argument("--train-file", required=True, help="JSONL: {prompt, verifier, task | task_id} per line")
    p.add_argument("--eval-file", default=None, help="held-out tasks, same format")
    p.add_argument("--service", required=True)
    p.add_argument("--api-key", default=os.environ.get("ASSAY_API_KEY"))
    p.add_argument("--config", default=None, help="JSON file of TrainConfig fields")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--metrics-out", default=None)
    p.add_argument("--output-dir", default=None)
    args = p.parse_args(argv)
    fields = json.loads(Path(args.config).read_text()) if args.config else {}
    for name in ("steps", "metrics_out", "output_dir"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    config = TrainConfig.model_validate(fields)
    model, tokenizer = load_model(args.model)
    eval_tasks = load_tasks(args.eval_file) if args.eval_file else []
    with RewardClient(args.service, args.api_key) as client:
        history = GRPOTrainer(model, tokenizer, client, config, load_tasks(args.train_file), eval_tasks).train()
    print(json.dumps(history[-1] if history else {}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
