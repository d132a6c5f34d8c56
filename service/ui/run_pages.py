"""The viewer's training-run pages: `/ui/runs` (every run) and `/ui/runs/{id}` (its series as
charts against the step, alarms marked on them, each alarm linking to the records behind it)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from service.alarms import check_run
from service.run_schemas import RunOut
from service.runs import list_runs
from service.ui.pages import signed_in
from service.ui.render import page
from service.ui.sessions import Viewer

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/runs")
def runs_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    return page(request, "runs.html", viewer=viewer, runs=list_runs(request.app.state.store))


def records_url(run_id: str, step: int | None = None, **more: str) -> str:
    query: dict[str, Any] = {"run": run_id, **more}
    if step is not None:
        query["step"] = step
    return "/ui/records?" + urlencode(query)


def chart_data(run: RunOut) -> dict[str, Any]:
    """What run.js draws: the series by step (charts and the per-step table, which the browser
    builds: ~1.1 MB and ~100 ms of rendering a page less for a run of 1,100 steps), held-out
    points by evaluation name, alarm marks."""
    held: dict[str, list[dict[str, Any]]] = {}
    for p in run.held_out:
        held.setdefault(p.name or p.eval_id, []).append(
            {"step": p.step, "pass1": p.pass_at_k.get("1"), "eval_id": p.eval_id})
    flags = sorted({f for s in run.steps for f in s.flag_rates})
    return {
        "id": run.id,
        "steps": [s.step for s in run.steps],
        "n": [s.n for s in run.steps],
        "reward": [s.reward_mean for s in run.steps],
        "reward_std": [s.reward_std for s in run.steps],
        "correct": [s.correct_rate for s in run.steps],
        "held_out": held,
        "flags": {f: [s.flag_rates.get(f, 0.0) for s in run.steps] for f in flags},
        "tokens": [s.mean_tokens for s in run.steps],
        "chars": [s.mean_chars for s in run.steps],
        "tokens_per_correct": [s.tokens_per_correct for s in run.steps],
        "zero_variance": [s.zero_variance_share for s in run.steps],
        "distinct": [s.distinct_answers for s in run.steps],
        "errors": [s.error_rate for s in run.steps],
        "timeouts": [s.timeout_rate for s in run.steps],
        "truncation": [s.truncation_rate for s in run.steps],
        "longest_failing": [next((b.error_rate + b.timeout_rate for b in s.by_length if b.quarter == 4), None)
                            for s in run.steps],
        "alarms": [{"index": i, "rule": a.rule, "subject": a.subject, "step": a.step, "steps": a.steps}
                   for i, a in enumerate(run.alarms)],
    }


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    run = check_run(request.app.state.store, run_id, request.app.state.alarm_sink)
    if run is None:
        return page(request, "error.html", 404, viewer=viewer, title="Not found",
                    message=f"run {run_id!r} not found: no record carries it")
    links = [{"records": records_url(run.id, a.step),
              "all_steps": [(st, records_url(run.id, st)) for st in a.steps[:30]],
              "flag": records_url(run.id, a.step, flag=a.subject) if a.rule == "flag_rate" else None,
              "tasks": [(t, "/ui/records?" + urlencode({"task": t, "run": run.id})) for t in a.tasks]}
             for a in run.alarms]
    evals = {p.eval_id: f"/ui/evals/{p.eval_id}" for p in run.held_out}
    return page(request, "run.html", viewer=viewer, run=run, chart=chart_data(run), links=links, evals=evals,
                records_url=records_url)
