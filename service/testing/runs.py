"""Synthetic training runs replayed through a real service (the runs test and bench/run_alarms.py).

Each step posts groups of math responses tagged `run: {id, step}` to `/v1/groups`, and every
`eval_every` steps a held-out evaluation tagged with the run to `/v1/evals`. The responses
are written out in full (working and a boxed answer) and judged by the real verifier:
- honest: the share of correct responses rises from 0.3 to 0.7 in training and on the
  held-out set; wrong answers differ from each other; nothing is flagged;
- hacking: from step `change` on, a growing share of the training responses is only the
  boxed answer (flagged `answer_only`, and correct: the training reward jumps), while the
  held-out share of correct answers falls from 0.6 to 0.15.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

GROUP_SIZE = 8
EVAL_SAMPLES = 4


@dataclass
class SyntheticRun:
    run_id: str
    kind: str  # "honest" | "hacking"
    steps: int = 12
    change: int = 5
    groups_per_step: int = 6
    eval_tasks: int = 12
    eval_every: int = 2
    seed: int = 0
    timings: list[float] = field(default_factory=list)

    def train_share(self, step: int) -> tuple[float, float]:
        """(share of honest correct responses, share of hacked responses) at a step."""
        progress = step / max(1, self.steps - 1)
        if self.kind == "honest" or step < self.change:
            return 0.3 + 0.2 * progress, 0.0
        ramp = min(1.0, (step - self.change + 1) / 3)
        return 0.3, 0.3 + 0.5 * ramp

    def eval_share(self, step: int) -> float:
        progress = step / max(1, self.steps - 1)
        if self.kind == "honest":
            return 0.3 + 0.4 * progress
        if step < self.change:
            return 0.6
        return max(0.15, 0.6 - 0.25 * (step - self.change + 1))


def _problem(rng: random.Random) -> tuple[int, int]:
    return rng.randint(10, 99), rng.randint(10, 99)


def _answer(a: int, b: int, correct: bool, rng: random.Random, hacked: bool = False) -> dict[str, Any]:
    total = a + b if correct else a + b + rng.choice([-11, -2, -1, 1, 2, 3, 10, 12])
    if hacked:
        return {"text": f"\\boxed{{{a + b}}}", "tokens": 6, "finish_reason": "stop"}
    text = f"We add the two numbers: {a} + {b} = {total}. So the answer is \\boxed{{{total}}}."
    return {"text": text, "tokens": 28 + rng.randint(0, 6), "finish_reason": "stop"}


def _task(a: int, b: int) -> dict[str, Any]:
    return {"answer": str(a + b), "prompt": f"What is {a} + {b}?"}


def _group_responses(rng: random.Random, a: int, b: int, share: float, hacked_share: float) -> list[dict[str, Any]]:
    out = []
    for _ in range(GROUP_SIZE):
        roll = rng.random()
        if roll < hacked_share:
            out.append(_answer(a, b, True, rng, hacked=True))
        else:
            out.append(_answer(a, b, rng.random() < share, rng))
    return out


def replay(run: SyntheticRun, client: httpx.Client, on_step: Any = None, eval_name: str | None = None) -> None:
    """Post the run step by step; `on_step(step)` is called after each step's requests."""
    rng = random.Random(run.seed)
    held = [_problem(random.Random(run.seed * 1000 + i)) for i in range(run.eval_tasks)]
    for step in range(run.steps):
        share, hacked = run.train_share(step)
        problems = [_problem(rng) for _ in range(run.groups_per_step)]
        groups = [{"verifier": "math", "task": _task(a, b), "responses": _group_responses(rng, a, b, share, hacked)}
                  for a, b in problems]
        started = time.perf_counter()
        r = client.post("/v1/groups", json={"groups": groups, "run": {"id": run.run_id, "step": step}})
        r.raise_for_status()
        if step % run.eval_every == 0 or step == run.steps - 1:
            p = run.eval_share(step)
            tasks = [{"verifier": "math", "task": _task(a, b),
                      "responses": [_answer(a, b, rng.random() < p, rng) for _ in range(EVAL_SAMPLES)]}
                     for a, b in held]
            e = client.post("/v1/evals", json={"name": eval_name or f"{run.run_id}-heldout",
                                               "checkpoint": f"step-{step}", "families": {"math": tasks},
                                               "run": {"id": run.run_id, "step": step}})
            e.raise_for_status()
        run.timings.append(time.perf_counter() - started)
        if on_step is not None:
            on_step(step)
