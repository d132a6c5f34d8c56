"""Alarm rules over a run's series, and what happens when one is raised.

Each rule is a pure function of the run's series (service/runs.py) and its thresholds
(service/run_schemas.py: defaults, or what a team set for the run) that returns the
first step at which its condition held, the steps where it holds and the figures it
compared; `find_examples` then names the tasks and records to read. An alarm is raised once
per (run, rule, subject) — the `run_alarms` table's unique key — and a newly raised one is
counted in `assay_alarms_total{run,rule}`, logged (logger `assay.alarms`, level WARNING) and,
when `ASSAY_ALARM_WEBHOOK_URL` is set, POSTed there as JSON.

Rules (docs/runs.md says the same, with the defaults):
- `reward_up_heldout_down`: at an evaluation tagged with the run, held-out pass@1 is below
  the best earlier evaluation's and the bootstrap 95% interval of the difference (over
  tasks, paired when both answered the same tasks) lies below zero, while the training
  reward (mean of `window` steps up to each evaluation's step) rose by `min_reward_rise`.
  Evaluations are compared with others of the same name only (the same held-out set).
- `flag_rate` (one per flag): a step's rate of the flag reaches `level`, or rose by `rise`
  within `window` steps.
- `length_growth`: the mean length of the latest `window` steps is `ratio` times that of the
  first `window` steps, while their mean reward gained at most `max_reward_gain`.
- `timeouts_by_length`: in a step, the longest quarter of responses has a timeout+error rate
  of at least `min_rate` and `ratio` times the rate of the shorter half, with `min_count` of them.
- `diversity_collapse`: for `sustain` steps in a row, the zero-variance share of groups is at
  least `max_zero_variance_share`, or the mean distinct answers per group is at most
  `min_distinct_answers`.
Steps with fewer than `min_responses` judged responses are not judged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from service import bootstrap_store
from service.config import Settings
from service.eval_metrics import mean
from service.metrics import Metrics
from service.run_schemas import AlarmExample, AlarmOut, HeldOut, RunOut, RunStep, Thresholds
from service.runs import (
    HeldOutTasks,
    examples,
    held_out,
    length_of,
    run_records,
    runs_to_compute,
    step_marks,
    steps,
)
from service.store import AuditStore
from service.tables import RecordRow, RunAlarmRow, RunThresholdsRow

log = logging.getLogger("assay.alarms")
METRIC_RUN_CHARS = 64
OTHER_RUNS = "(other)"


@dataclass
class Finding:
    """A rule's condition held: from `step` on, at `steps`, with the figures it compared."""

    rule: str
    step: int
    steps: list[int]
    message: str
    figures: dict[str, Any]
    subject: str = ""
    # What find_examples needs: record conditions (a flag_rate finding adds its flag) and an
    # order (most telling first).
    where: list[Any] = field(default_factory=list)
    order: Any = None


def _judged(series: list[RunStep], t: Thresholds) -> list[RunStep]:
    return [s for s in series if s.n - round(s.error_rate * s.n) >= t.min_responses and s.reward_mean is not None]


def _window_mean(series: list[RunStep], upto: int, window: int, value: Callable[[RunStep], float | None]
                 ) -> float | None:
    picked = [v for s in series if s.step <= upto for v in [value(s)] if v is not None][-window:]
    return mean(picked)


# -------------------------------------------------------------------- the rules


def reward_up_heldout_down(series: list[RunStep], points: list[HeldOut], per_task: dict[str, HeldOutTasks],
                           t: Thresholds) -> Finding | None:
    """Evaluations are compared within one name (the same held-out set at other steps)."""
    by_name: dict[str | None, list[HeldOut]] = {}
    for p in points:
        if "1" in p.pass_at_k:
            by_name.setdefault(p.name, []).append(p)
    found = [f for same in by_name.values() if (f := _heldout_fell(series, same, per_task, t)) is not None]
    return min(found, key=lambda f: f.step, default=None)


def _bootstrap(a: tuple[float, ...], b: tuple[float, ...], paired: bool) -> tuple[float, float] | None:
    """`bootstrap_difference` (seeded: the same inputs give the same interval), kept per process
    and, inside `check_run`, in the database for every process (service/bootstrap_store.py): a run
    page re-reads the same two evaluations' pass rates on every load (2,000 resamples of ~1,500
    tasks cost about a second of Python)."""
    return bootstrap_store.interval(a, b, paired)


def _heldout_fell(series: list[RunStep], with_pass: list[HeldOut], per_task: dict[str, HeldOutTasks],
                  t: Thresholds) -> Finding | None:
    rule = t.reward_up_heldout_down
    judged = _judged(series, t)
    for i in range(1, len(with_pass)):
        best = max(with_pass[:i], key=lambda p: p.pass_at_k["1"])
        last = with_pass[i]
        if last.step <= best.step or last.pass_at_k["1"] >= best.pass_at_k["1"]:
            continue
        a, b = per_task[best.eval_id].pass1(), per_task[last.eval_id].pass1()
        paired = sorted(a) == sorted(b)
        keys = sorted(a) if paired else None
        interval = _bootstrap(tuple(a[k] for k in keys) if keys else tuple(a.values()),
                              tuple(b[k] for k in keys) if keys else tuple(b.values()), paired)
        r_then = _window_mean(judged, best.step, t.window, lambda s: s.reward_mean)
        r_now = _window_mean(judged, last.step, t.window, lambda s: s.reward_mean)
        if interval is None or interval[1] >= 0 or r_then is None or r_now is None:
            continue
        if r_now - r_then < rule.min_reward_rise:
            continue
        fell = sorted((k for k in b if k in a and b[k] < a[k]), key=lambda k: b[k] - a[k])
        return Finding(
            "reward_up_heldout_down", last.step, [best.step, last.step],
            f"training reward rose {r_then:.3f} -> {r_now:.3f} (steps {best.step} -> {last.step}) while held-out "
            f"pass@1 fell {best.pass_at_k['1']:.3f} -> {last.pass_at_k['1']:.3f} (95% interval of the change "
            f"[{interval[0]:.3f}, {interval[1]:.3f}])",
            {"reward_before": r_then, "reward_after": r_now, "pass1_before": best.pass_at_k["1"],
             "pass1_after": last.pass_at_k["1"], "interval": list(interval), "eval_before": best.eval_id,
             "eval_after": last.eval_id, "paired": paired, "tasks_fell": fell[:20]},
            where=[RecordRow.eval_id == last.eval_id, RecordRow.verdict != "correct",
                   *([RecordRow.task_id.in_(fell[:20]) | RecordRow.task_hash.in_(fell[:20])] if fell else [])])
    return None


def flag_rate(series: list[RunStep], t: Thresholds) -> list[Finding]:
    rule = t.flag_rate
    judged = _judged(series, t)
    names = sorted({f for s in judged for f in s.flag_rates} - set(rule.ignore))
    found = []
    for name in names:
        rates = [(s.step, s.flag_rates.get(name, 0.0)) for s in judged]
        hits = []
        for i, (st, rate) in enumerate(rates):
            earlier = [r for _, r in rates[max(0, i - t.window):i]]
            rise = rate - min(earlier) if earlier else 0.0
            if rate >= rule.level or rise >= rule.rise:
                hits.append((st, rate, rise))
        if hits:
            first = hits[0]
            found.append(Finding(
                "flag_rate", first[0], [h[0] for h in hits],
                f"flag {name!r} on {first[1]:.1%} of step {first[0]}'s responses (rose {first[2]:.1%} within "
                f"{t.window} steps; level {rule.level:.0%}, rise {rule.rise:.0%})",
                {"rates": {str(st): r for st, r in rates}, "level": rule.level, "rise": rule.rise},
                subject=name, where=[RecordRow.run_step.in_([h[0] for h in hits]), RecordRow.eval_id.is_(None)]))
    return found


def length_growth(series: list[RunStep], t: Thresholds) -> Finding | None:
    rule = t.length_growth
    judged = _judged(series, t)

    def length(s: RunStep) -> float | None:
        return s.mean_tokens if s.mean_tokens is not None else s.mean_chars

    if len(judged) < 2 * t.window:
        return None
    first = judged[: t.window]
    l0 = mean([v for s in first if (v := length(s)) is not None])
    r0 = mean([s.reward_mean for s in first if s.reward_mean is not None])
    if not l0 or r0 is None:
        return None
    hits = []
    for i in range(2 * t.window - 1, len(judged)):
        recent = judged[i - t.window + 1: i + 1]
        l1 = mean([v for s in recent if (v := length(s)) is not None])
        r1 = mean([s.reward_mean for s in recent if s.reward_mean is not None])
        if l1 is not None and r1 is not None and l1 / l0 >= rule.ratio and r1 - r0 <= rule.max_reward_gain:
            hits.append((judged[i].step, l1, r1))
    if not hits:
        return None
    st, l1, r1 = hits[0]
    unit = "tokens" if first[0].mean_tokens is not None else "characters"
    return Finding("length_growth", st, [h[0] for h in hits],
                   f"mean length grew {l0:.0f} -> {l1:.0f} {unit} ({l1 / l0:.2f}x) by step {st} while the mean "
                   f"reward went {r0:.3f} -> {r1:.3f}",
                   {"length_before": l0, "length_after": l1, "reward_before": r0, "reward_after": r1, "unit": unit},
                   where=[RecordRow.run_step.in_([h[0] for h in hits]), RecordRow.eval_id.is_(None)],
                   order=length_of().desc())


def timeouts_by_length(series: list[RunStep], t: Thresholds) -> Finding | None:
    rule = t.timeouts_by_length
    hits = []
    for s in series:
        quarters = {b.quarter: b for b in s.by_length}
        top = quarters.get(4)
        short = [quarters[q] for q in (1, 2) if q in quarters]
        if top is None or not short:
            continue
        top_rate = top.error_rate + top.timeout_rate
        bad = round(top_rate * top.n)
        short_n = sum(b.n for b in short)
        short_rate = sum((b.error_rate + b.timeout_rate) * b.n for b in short) / short_n
        if top_rate >= rule.min_rate and bad >= rule.min_count and top_rate >= rule.ratio * short_rate:
            hits.append((s.step, top_rate, short_rate, top.min_length))
    if not hits:
        return None
    st, top_rate, short_rate, boundary = hits[0]
    return Finding("timeouts_by_length", st, [h[0] for h in hits],
                   f"step {st}: {top_rate:.1%} of the longest quarter of responses (length >= {boundary}) timed out "
                   f"or failed, against {short_rate:.1%} of the shorter half",
                   {"longest_rate": top_rate, "shorter_rate": short_rate, "boundary": boundary},
                   where=[RecordRow.run_step == st, RecordRow.eval_id.is_(None),
                          RecordRow.verdict.in_(["timeout", "error"]), length_of() >= boundary],
                   order=length_of().desc())


def diversity_collapse(series: list[RunStep], t: Thresholds) -> Finding | None:
    rule = t.diversity_collapse
    judged = [s for s in _judged(series, t) if s.groups]
    streak: list[RunStep] = []
    for s in judged:
        zero = s.zero_variance_share is not None and s.zero_variance_share >= rule.max_zero_variance_share
        same = s.distinct_answers is not None and s.distinct_answers <= rule.min_distinct_answers
        streak = [*streak, s] if zero or same else []
        if len(streak) >= rule.sustain:
            last = streak[-1]
            return Finding(
                "diversity_collapse", last.step, [x.step for x in streak],
                f"steps {streak[0].step}-{last.step}: zero-variance share of groups "
                f"{last.zero_variance_share or 0:.0%}, {last.distinct_answers or 0:.2f} distinct answers per group "
                f"(levels {rule.max_zero_variance_share:.0%}, {rule.min_distinct_answers})",
                {"zero_variance_share": {str(x.step): x.zero_variance_share for x in streak},
                 "distinct_answers": {str(x.step): x.distinct_answers for x in streak}},
                where=[RecordRow.run_step.in_([x.step for x in streak]), RecordRow.eval_id.is_(None),
                       RecordRow.group_zero_variance.is_(True)])
    return None


def evaluate(series: list[RunStep], points: list[HeldOut], per_task: dict[str, HeldOutTasks],
             t: Thresholds) -> list[Finding]:
    found: list[Finding | None] = []
    if t.reward_up_heldout_down.enabled:
        found.append(reward_up_heldout_down(series, points, per_task, t))
    out = [f for f in found if f is not None]
    if t.flag_rate.enabled:
        out += flag_rate(series, t)
    for enabled, rule in ((t.length_growth.enabled, length_growth), (t.timeouts_by_length.enabled, timeouts_by_length),
                          (t.diversity_collapse.enabled, diversity_collapse)):
        finding = rule(series, t) if enabled else None
        if finding is not None:
            out.append(finding)
    return out


# ---------------------------------------------------------------- persistence


def find_examples(store: AuditStore, run_id: str, finding: Finding) -> tuple[list[AlarmExample], list[str]]:
    where = [*finding.where, *([store.has_flag(finding.subject)] if finding.rule == "flag_rate" else [])]
    rows, tasks = examples(store, run_id, where, finding.order)
    return [AlarmExample(**r) for r in rows], tasks


def thresholds(store: AuditStore, run_id: str) -> Thresholds:
    with store.db() as s:
        row = s.get(RunThresholdsRow, run_id)
    return Thresholds.model_validate(row.thresholds) if row is not None else Thresholds()


def set_thresholds(store: AuditStore, run_id: str, value: Thresholds, key_id: str | None) -> Thresholds:
    with store.db() as s, s.begin():
        row = s.get(RunThresholdsRow, run_id)
        if row is None:
            s.add(RunThresholdsRow(run_id=run_id, thresholds=value.model_dump(mode="json"), caller_key_id=key_id))
        else:
            row.thresholds, row.caller_key_id = value.model_dump(mode="json"), key_id
    return value


class AlarmSink:
    """Where a newly raised alarm goes: the counter, the log, the webhook."""

    def __init__(self, settings: Settings, metrics: Metrics | None) -> None:
        self.settings, self.metrics = settings, metrics
        self._labelled: set[str] = set()
        self._lock = threading.Lock()

    def run_label(self, run_id: str) -> str:
        """A run id is the caller's choice: the first `alarm_metric_runs` distinct runs (cut to
        64 characters) get their own label value, later ones share `(other)`."""
        label = run_id[:METRIC_RUN_CHARS]
        with self._lock:
            if label in self._labelled or len(self._labelled) < self.settings.alarm_metric_runs:
                self._labelled.add(label)
                return label
        return OTHER_RUNS

    def raised(self, run_id: str, alarm: AlarmOut) -> None:
        if self.metrics is not None:
            self.metrics.inc("assay_alarms_total", run=self.run_label(run_id), rule=alarm.rule)
        log.warning("alarm %s on run %s at step %d: %s", alarm.rule, run_id, alarm.step, alarm.message, extra={
            "run_id": run_id, "rule": alarm.rule, "subject": alarm.subject, "run_step": alarm.step,
            "steps": alarm.steps[:50], "tasks": alarm.tasks, "records": [e.record_id for e in alarm.examples]})
        if self.settings.alarm_webhook_url:
            self._post({"run": run_id, **alarm.model_dump(mode="json")})

    def _post(self, payload: dict[str, Any]) -> None:
        try:
            httpx.post(self.settings.alarm_webhook_url or "", json=payload,
                       timeout=self.settings.alarm_webhook_timeout_s).raise_for_status()
        except httpx.HTTPError as exc:
            log.error("alarm webhook failed: %s", type(exc).__name__, extra={"run_id": payload["run"]})
            if self.metrics is not None:
                self.metrics.inc("assay_alarm_webhook_failures_total")


def _alarm_out(row: RunAlarmRow, holds: bool) -> AlarmOut:
    return AlarmOut(**{**row.detail, "rule": row.rule, "subject": row.subject, "step": row.step,
                       "raised_at": row.raised_at, "holds_now": holds})


def check_run(store: AuditStore, run_id: str, sink: AlarmSink | None = None) -> RunOut | None:
    """The run's series and alarms; raises (stores and announces) any alarm whose rule holds
    for the first time. None when no record carries the run."""
    marks = step_marks(store, run_id)
    n, first, last = run_records(store, run_id, marks)
    if n == 0:
        return None
    t = thresholds(store, run_id)
    series = steps(store, run_id, marks=marks)
    points, per_task = held_out(store, run_id)
    with bootstrap_store.kept_in(store):
        findings = evaluate(series, points, per_task, t)
    with store.db() as s:
        stored = {(r.rule, r.subject): r for r in s.scalars(select(RunAlarmRow).where(RunAlarmRow.run_id == run_id))}
    holding = {(f.rule, f.subject) for f in findings}
    for finding in findings:
        if (finding.rule, finding.subject) in stored:
            continue
        shown, tasks = find_examples(store, run_id, finding)
        detail = {"message": finding.message, "steps": finding.steps, "tasks": tasks,
                  "examples": [e.model_dump(mode="json") for e in shown], "figures": finding.figures}
        row = RunAlarmRow(run_id=run_id, rule=finding.rule, subject=finding.subject, step=finding.step, detail=detail)
        try:
            with store.db() as s, s.begin():
                s.add(row)
        except IntegrityError:
            # Another replica (or the monitor) raised it this instant: it announced it; show theirs.
            with store.db() as s:
                stored[(finding.rule, finding.subject)] = s.scalars(select(RunAlarmRow).where(
                    RunAlarmRow.run_id == run_id, RunAlarmRow.rule == finding.rule,
                    RunAlarmRow.subject == finding.subject)).one()
            continue
        stored[(finding.rule, finding.subject)] = row
        if sink is not None:
            sink.raised(run_id, _alarm_out(row, True))
    alarms = sorted((_alarm_out(r, key in holding) for key, r in stored.items()), key=lambda a: (a.step, a.rule))
    return RunOut(id=run_id, records=n, first_step=first, last_step=last, steps=series, held_out=points,
                  thresholds=t, alarms=alarms)


class AlarmMonitor:
    """Checks the runs that new records name, in one background thread, at most once per run
    every `alarm_check_interval_s` (so a busy run costs a few queries a second, not per request).
    On start it first takes the runs whose step figures are not stored for their records
    (`runs_to_compute`: loaded in bulk, written while no monitor ran, or an older figures
    version), so that a viewer's first read of such a run finds them stored instead of
    computing a whole run's steps (~8 s for 1,100 steps of 870,000 records at 10M)."""

    def __init__(self, store: AuditStore, sink: AlarmSink, interval_s: float) -> None:
        self.store, self.sink, self.interval_s = store, sink, interval_s
        self._dirty: dict[str, float] = {}  # run -> when it became dirty
        self._checked: dict[str, float] = {}
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="assay-alarms", daemon=True)
        self._thread.start()

    def observe(self, rows: list[RecordRow]) -> None:
        runs = {r.run_id for r in rows if r.run_id is not None}
        if not runs:
            return
        with self._wake:
            for run in runs:
                self._dirty.setdefault(run, time.monotonic())
            self._wake.notify()

    def _due(self) -> tuple[list[str], float | None]:
        now = time.monotonic()
        due = [r for r in self._dirty if now - self._checked.get(r, -1e18) >= self.interval_s]
        waits = [self.interval_s - (now - self._checked[r]) for r in self._dirty if r not in due]
        return due, min(waits) if waits else None

    def _catch_up(self) -> None:
        try:
            behind = runs_to_compute(self.store)
        except Exception:  # the monitor still checks the runs new records name
            log.exception("finding the runs whose step figures are not stored failed")
            return
        with self._wake:
            for run in behind:
                self._dirty.setdefault(run, time.monotonic())

    def _loop(self) -> None:
        self._catch_up()
        while True:
            with self._wake:
                due, wait = self._due()
                while not due and not self._stopped:
                    self._wake.wait(wait)
                    due, wait = self._due()
                if self._stopped:
                    return
                for run in due:
                    del self._dirty[run]
                    self._checked[run] = time.monotonic()
            for run in due:
                try:
                    check_run(self.store, run, self.sink)
                except Exception:  # a failed check must not stop the monitor; the next record retries
                    log.exception("alarm check of run %s failed", run)

    def close(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        self._thread.join(timeout=10)
