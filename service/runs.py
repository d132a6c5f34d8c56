"""Training runs: per-run, per-step series computed by the database from the records.

A record belongs to a run when its request carried `run: {id, step}`. Training records are
the run's records outside held-out evaluations (`eval_id` null); held-out points are the
evaluation runs whose records carry the run. Every figure is a GROUP BY over the index
(run_id, run_step) — a handful of queries per run, whatever its size; Python only turns
sums into means and per-task counts into pass@k / maj@k.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict, defaultdict
from typing import Any

from sqlalchemy import String, and_, case, cast, distinct, func, literal, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from service.eval_metrics import Vote, maj_at_k, pass_at_k
from service.run_schemas import HeldOut, LengthBucket, RunStep, RunSummary
from service.store import AuditStore
from service.tables import (
    EvalRow,
    RecordRow,
    RollupRunStepRow,
    RunAlarmRow,
    RunHeldOutFiguresRow,
    RunStepFiguresRow,
)

LOG = logging.getLogger(__name__)
NO_ANSWER = "(no answer)"
QUARTERS = 4
KS = (1, 2, 4, 8, 16, 32, 64)


def _flag_elements(dialect: str) -> Any:
    if dialect == "postgresql":
        return func.jsonb_array_elements_text(cast(RecordRow.flags, JSONB)).table_valued("value").lateral()
    return func.json_each(RecordRow.flags).table_valued("value")


def answer_key() -> Any:
    """A response's answer for diversity and maj@k, per family, from what evidence holds:
    math's normalised (else extracted) answer; code's test outcome (verdict and tests passed);
    otherwise the response's hash. A response with no answer (`invalid_format`) is one answer."""
    evidence = RecordRow.evidence
    code = RecordRow.verdict + literal(":") + func.coalesce(evidence["passed"].as_string(), literal(""))
    return case(
        (RecordRow.verdict == "invalid_format", literal(NO_ANSWER)),
        else_=func.coalesce(evidence["answer_normalised"].as_string(), evidence["extracted"].as_string(),
                            case((RecordRow.verifier == "code", code), else_=cast(RecordRow.response_hash, String))),
    )


def length_of() -> Any:
    """A response's length: tokens where the trainer sent them, else characters."""
    return func.coalesce(RecordRow.tokens, func.length(RecordRow.response))


def _training(run_id: str) -> Any:
    return and_(RecordRow.run_id == run_id, RecordRow.eval_id.is_(None))


def _count_if(condition: Any) -> Any:
    return func.sum(case((condition, 1), else_=0))


def _rolled_up(store: AuditStore) -> bool:
    """Postgres keeps per-run-step figures as records are written (`rollup_run_steps`, revision
    0016); on SQLite they are a GROUP BY over the index (run_id, run_step, seq) at read time."""
    return store.engine.dialect.name == "postgresql"


def list_runs(store: AuditStore, limit: int = 200) -> list[RunSummary]:
    """Runs by name, with their record counts and step range (Postgres: from the per-run-step
    rollup; SQLite: an index scan of the records)."""
    if _rolled_up(store):
        r = RollupRunStepRow
        stmt = select(r.run_id, func.sum(r.records), func.min(r.step), func.max(r.step)).group_by(r.run_id)
        stmt = stmt.order_by(r.run_id).limit(limit)
    else:
        stmt = (select(RecordRow.run_id, func.count(), func.min(RecordRow.run_step), func.max(RecordRow.run_step))
                .where(RecordRow.run_id.is_not(None)).group_by(RecordRow.run_id)
                .order_by(RecordRow.run_id).limit(limit))
    with store.db() as s:
        rows = s.execute(stmt).all()
        alarms = dict(s.execute(select(RunAlarmRow.run_id, func.count()).group_by(RunAlarmRow.run_id)).all())
    return [RunSummary(id=run, records=int(n), first_step=lo, last_step=hi, alarms=alarms.get(run, 0))
            for run, n, lo, hi in rows]


def _all_marks(dialect: str, run_id: str | None = None) -> Any:
    """(run, step, its records, the highest seq written there) of every run's steps (of `run_id`'s)."""
    if dialect == "postgresql":
        r = RollupRunStepRow
        stmt = select(r.run_id.label("run_id"), r.step.label("step"), r.records.label("records"),
                      r.last_seq.label("last_seq")).where(r.records > 0)
        return stmt if run_id is None else stmt.where(r.run_id == run_id)
    stmt = (select(RecordRow.run_id.label("run_id"), RecordRow.run_step.label("step"),
                   func.count().label("records"), func.max(RecordRow.seq).label("last_seq"))
            .where(RecordRow.run_id.is_not(None), RecordRow.run_step.is_not(None))
            .group_by(RecordRow.run_id, RecordRow.run_step))
    return stmt if run_id is None else stmt.where(RecordRow.run_id == run_id)


def _marks(s: Any, dialect: str, run_id: str) -> dict[int, tuple[int, int]]:
    return {st: (int(n), int(last)) for _, st, n, last in s.execute(_all_marks(dialect, run_id)).all()}


def runs_to_compute(store: AuditStore) -> list[str]:
    """The runs with a step whose figures this version has not stored for its current records:
    records loaded in bulk, written while no monitor ran, or figures of an older version."""
    marks = _all_marks(store.engine.dialect.name).subquery()
    f = RunStepFiguresRow
    stored = and_(f.run_id == marks.c.run_id, f.step == marks.c.step, f.version == FIGURES_VERSION,
                  f.records == marks.c.records, f.last_seq == marks.c.last_seq)
    stmt = (select(marks.c.run_id).select_from(marks.outerjoin(f, stored)).where(f.run_id.is_(None))
            .group_by(marks.c.run_id).order_by(marks.c.run_id))
    with store.db() as s:
        return [run for (run,) in s.execute(stmt)]


def step_marks(store: AuditStore, run_id: str) -> dict[int, tuple[int, int]]:
    """Per step of the run: (its records, held-out ones included; the highest seq written there).
    Records are append-only, so a changed mark means records were added (or archived)."""
    with store.db() as s:
        return _marks(s, store.engine.dialect.name, run_id)


def run_records(store: AuditStore, run_id: str,
                marks: dict[int, tuple[int, int]] | None = None) -> tuple[int, int | None, int | None]:
    marks = step_marks(store, run_id) if marks is None else marks
    return sum(n for n, _ in marks.values()), min(marks, default=None), max(marks, default=None)


class StepCache:
    """Computed steps, kept while their records are unchanged. Records are append-only, so a
    step's (record count, last seq) — read from the index (run_id, run_step, seq) — says
    whether anything was added to it; only such steps are computed again (normally the
    step the trainer is at). Per process, for the `max_runs` runs read last."""

    def __init__(self, max_runs: int = 64) -> None:
        self.max_runs = max_runs
        self._runs: OrderedDict[tuple[str, str], dict[int, tuple[tuple[int, int], RunStep]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> dict[int, tuple[tuple[int, int], RunStep]]:
        with self._lock:
            found = self._runs.get(key, {})
            if key in self._runs:
                self._runs.move_to_end(key)
            return dict(found)

    def put(self, key: tuple[str, str], value: dict[int, tuple[tuple[int, int], RunStep]]) -> None:
        with self._lock:
            self._runs[key] = value
            self._runs.move_to_end(key)
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)


CACHE = StepCache()
# Past this many changed steps, one query over the whole run is cheaper than an IN list.
MAX_STALE_LISTED = 200
# The version of what compute_steps computes: raise it when a figure's definition changes, so
# that figures stored in run_step_figures by an older version are computed again.
FIGURES_VERSION = 1

Entry = tuple[tuple[int, int], RunStep | None]


def steps(store: AuditStore, run_id: str, cache: StepCache | None = CACHE,
          marks: dict[int, tuple[int, int]] | None = None) -> list[RunStep]:
    """The run's training series, one entry per step. A step's figures are computed from its
    records once per change of its mark: steps unchanged since this process read them come
    from the per-process cache, else from `run_step_figures` (stored by whichever process
    computed them, revision 0018); the rest are computed and stored (`marks`: `step_marks` of
    the run, when already read). A step with held-out records only has no entry."""
    if cache is None:
        return compute_steps(store, run_id)
    marks = step_marks(store, run_id) if marks is None else marks
    key = (str(store.engine.url), run_id)
    known: dict[int, Entry] = {st: entry for st, entry in cache.get(key).items() if st in marks}
    stale = sorted(st for st, mark in marks.items() if st not in known or known[st][0] != mark)
    if stale:
        listed = stale if len(stale) <= MAX_STALE_LISTED else None
        with store.db() as s:
            saved = stored_figures(s, run_id, listed)
        known.update({st: saved[st] for st in stale if st in saved and saved[st][0] == marks[st]})
        stale = [st for st in stale if st not in known or known[st][0] != marks[st]]
    if stale:
        fresh = {x.step: x for x in compute_steps(store, run_id, stale if len(stale) <= MAX_STALE_LISTED else None)}
        computed = {st: (marks[st], fresh.get(st)) for st in stale}
        known.update(computed)
        store_figures(store, run_id, computed)
    cache.put(key, known)
    return [entry for _, (_, entry) in sorted(known.items()) if entry is not None]


def stored_figures(s: Any, run_id: str, only: list[int] | None = None) -> dict[int, Entry]:
    """The run's steps stored in run_step_figures by this version (of the steps in `only`)."""
    f = RunStepFiguresRow
    stmt = select(f.step, f.records, f.last_seq, f.figures).where(f.run_id == run_id, f.version == FIGURES_VERSION)
    if only is not None:
        stmt = stmt.where(f.step.in_(only))
    return {st: ((int(n), int(last)), None if figures is None else RunStep.model_validate_json(figures))
            for st, n, last, figures in s.execute(stmt).all()}


def _figures_upsert(dialect: str, run_id: str, entries: dict[int, Entry]) -> Any:
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    stmt = insert(RunStepFiguresRow).values([
        {"run_id": run_id, "step": st, "records": mark[0], "last_seq": mark[1], "version": FIGURES_VERSION,
         "figures": None if figures is None else figures.model_dump_json()}
        for st, (mark, figures) in sorted(entries.items())])  # in key order: no deadlock between two writers
    return stmt.on_conflict_do_update(index_elements=["run_id", "step"], set_={
        name: stmt.excluded[name] for name in ("records", "last_seq", "version", "figures")})


def store_figures(store: AuditStore, run_id: str, entries: dict[int, Entry]) -> None:
    """Keep computed steps for every process. A failure to store them (the database busy or read
    only) costs only their computation next time: it is logged, the read answers."""
    if not entries:
        return
    try:
        with store.db() as s:
            s.execute(_figures_upsert(store.engine.dialect.name, run_id, entries))
            s.commit()
    except SQLAlchemyError as exc:
        LOG.warning("run %s: computed step figures not stored: %s", run_id, exc)


def compute_steps(store: AuditStore, run_id: str, only: list[int] | None = None) -> list[RunStep]:
    """The training series of the run (of the steps in `only`, when given), from the database."""
    with store.db() as s:
        return _compute_steps(s, store.engine.dialect.name, run_id, only)


def _compute_steps(s: Any, dialect: str, run_id: str, only: list[int] | None) -> list[RunStep]:
    cond = _training(run_id)
    if only is not None:
        cond = and_(cond, RecordRow.run_step.in_(only))
    judged = and_(RecordRow.verdict != "error", RecordRow.masked.is_(False))
    judged_reward = case((judged, RecordRow.reward))
    step = RecordRow.run_step
    base = s.execute(select(
        step, func.count(), func.count(judged_reward), func.sum(judged_reward),
        func.sum(judged_reward * judged_reward),
        _count_if(RecordRow.verdict == "correct"), _count_if(RecordRow.verdict == "error"),
        _count_if(RecordRow.verdict == "timeout"), _count_if(RecordRow.finish_reason == "length"),
        func.count(RecordRow.tokens), func.sum(RecordRow.tokens), func.avg(func.length(RecordRow.response)),
    ).where(cond).group_by(step)).all()
    # Per group: zero variance, distinct answers (`error` left out); then per step.
    per_group = (select(step.label("step"),
                        func.count(distinct(case((RecordRow.verdict != "error", answer_key())))).label("answers"),
                        func.max(case((RecordRow.group_zero_variance.is_(True), 1), else_=0)).label("zero"))
                 .where(cond, RecordRow.group_id.is_not(None))
                 .group_by(step, RecordRow.group_id).subquery())
    groups = {st: (n, zero, answers) for st, n, zero, answers in s.execute(
        select(per_group.c.step, func.count(), func.sum(per_group.c.zero),
               func.avg(case((per_group.c.answers > 0, per_group.c.answers))))
        .group_by(per_group.c.step)).all()}
    flag = _flag_elements(dialect)
    # Most records carry no flag: skip them before their JSON is expanded.
    flagged = cast(RecordRow.flags, String) != "[]"
    flags = s.execute(select(step, flag.c.value, func.count()).select_from(RecordRow).join(flag, true())
                      .where(cond, flagged).group_by(step, flag.c.value)).all()
    by_length = _length_quarters(s, cond)
    flag_counts: dict[int, dict[str, int]] = defaultdict(dict)
    for st, name, count in flags:
        flag_counts[st][str(name)] = count
    out = []
    for (st, n, n_judged, r_sum, r_sq, correct, errors, timeouts, truncated, n_tokens, tok_sum,
         mean_chars) in base:
        n_groups, zero_groups, distinct_answers = groups.get(st, (0, 0, None))
        mean = r_sum / n_judged if n_judged else None
        std = None
        if n_judged and n_judged > 1:
            std = math.sqrt(max(0.0, (r_sq - n_judged * mean * mean) / (n_judged - 1)))
        out.append(RunStep(
            step=st, n=n, groups=n_groups, reward_mean=mean, reward_std=std,
            correct_rate=correct / (n - errors) if n > errors else None,
            zero_variance_share=zero_groups / n_groups if n_groups else None,
            distinct_answers=float(distinct_answers) if distinct_answers is not None else None,
            flag_rates={name: c / n for name, c in sorted(flag_counts.get(st, {}).items())},
            mean_tokens=tok_sum / n_tokens if n_tokens else None,
            mean_chars=float(mean_chars) if mean_chars is not None else None,
            tokens_per_correct=tok_sum / correct if n_tokens and correct else None,
            truncation_rate=truncated / n, error_rate=errors / n, timeout_rate=timeouts / n,
            by_length=by_length.get(st, []),
        ))
    return sorted(out, key=lambda x: x.step)


def _length_quarters(s: Any, cond: Any) -> dict[int, list[LengthBucket]]:
    """Per step, its responses in quarters by length (a window function), with error and timeout rates."""
    length = length_of()
    ranked = (select(RecordRow.run_step.label("step"), RecordRow.verdict.label("verdict"), length.label("length"),
                     func.ntile(QUARTERS).over(partition_by=RecordRow.run_step, order_by=length).label("quarter"))
              .where(cond, length.is_not(None)).subquery())
    rows = s.execute(select(ranked.c.step, ranked.c.quarter, func.count(), func.min(ranked.c.length),
                            func.max(ranked.c.length), _count_if(ranked.c.verdict == "error"),
                            _count_if(ranked.c.verdict == "timeout"))
                     .group_by(ranked.c.step, ranked.c.quarter)).all()
    out: dict[int, list[LengthBucket]] = defaultdict(list)
    for st, quarter, n, lo, hi, errors, timeouts in sorted(rows, key=lambda r: (r[0], r[1])):
        out[st].append(LengthBucket(quarter=quarter, n=n, min_length=lo, max_length=hi, error_rate=errors / n,
                                    timeout_rate=timeouts / n))
    return out


class HeldOutTasks:
    """One held-out evaluation's per-task counts: {task: (judged, correct)} and answer votes."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.votes: dict[str, list[Vote]] = defaultdict(list)

    def pass1(self) -> dict[str, float]:
        return {task: c / n for task, (n, c) in self.counts.items() if n}


# Per process, the held-out figures of the runs read last, with the (count, highest seq) of the
# run's held-out records they were computed from (read from ix_records_run_eval alone).
HELD_OUT = StepCache()


def held_out(store: AuditStore, run_id: str,
             cache: StepCache | None = HELD_OUT) -> tuple[list[HeldOut], dict[str, HeldOutTasks]]:
    """The evaluations tagged with the run, by step, and each one's per-task counts (for intervals).
    A task answered by several groups of one evaluation pools their responses. Computed again
    only when the run's held-out records changed (records are append-only: a new one changes
    their count and highest seq; an archived one their count); the evaluations' names are read
    each time."""
    cond = and_(RecordRow.run_id == run_id, RecordRow.eval_id.is_not(None))
    with store.db() as s:
        mark = tuple(s.execute(select(func.count(), func.max(RecordRow.seq)).where(cond)).one())
    key = (str(store.engine.url), run_id)
    found = cache.get(key).get(mark) if cache is not None else None
    if found is None:
        found = _stored_held_out(store, run_id, mark) if cache is not None and mark[0] else None
        if found is None:
            found = _held_out_figures(*_held_out_rows(store, cond))
            if cache is not None and mark[0]:
                _store_held_out(store, run_id, mark, found)
        if cache is not None:
            cache.put(key, {mark: found})
    points, tasks = found
    with store.db() as s:
        ids = [p.eval_id for p in points]
        meta = {r.id: r for r in s.scalars(select(EvalRow).where(EvalRow.id.in_(ids)))} if ids else {}
    return [p.model_copy(update={"name": meta[p.eval_id].name, "checkpoint": meta[p.eval_id].checkpoint})
            if p.eval_id in meta else p for p in points], tasks


# The version of what `_store_held_out` stores in run_held_out_figures (revision 0019): raise it
# when its definition changes, so that what an older version stored is computed again.
# 1: the rows of `_held_out_rows`. 2: the figures those rows give (`_held_out_figures`: the points
# and each evaluation's per-task counts), so that a fresh process does not compute maj@k again
# (~0.3-0.9 s of Python a run at 10M records under load; audit10, round 10).
HELD_OUT_VERSION = 2
HeldOutRows = tuple[list[tuple], dict[str, int]]
HeldOutFigures = tuple[list[HeldOut], dict[str, HeldOutTasks]]


def _stored_held_out(store: AuditStore, run_id: str, mark: tuple) -> HeldOutFigures | None:
    """The run's held-out figures as stored by whichever process computed them at this mark (the
    run's held-out records and their highest seq), else None. Their tasks carry the counts only:
    the votes went into the stored maj@k."""
    h = RunHeldOutFiguresRow
    with store.db() as s:
        row = s.execute(select(h.figures).where(h.run_id == run_id, h.records == mark[0], h.last_seq == mark[1],
                                                h.version == HELD_OUT_VERSION)).scalar_one_or_none()
    if row is None:
        return None
    saved = json.loads(row)  # JSON keeps the dicts' order and each float's exact value
    tasks: dict[str, HeldOutTasks] = {}
    for eval_id, counts in saved["counts"].items():
        tasks[eval_id] = HeldOutTasks()
        tasks[eval_id].counts = counts
    return [HeldOut.model_validate(p) for p in saved["points"]], tasks


def _store_held_out(store: AuditStore, run_id: str, mark: tuple, figures: HeldOutFigures) -> None:
    """Keep the run's held-out figures for every process (an upsert: two readers storing at once
    store the same figures, or figures of two marks of which a reader takes only its own). A
    failure is logged; the read answers."""
    insert = postgresql_insert if store.engine.dialect.name == "postgresql" else sqlite_insert
    points, tasks = figures
    saved = {"points": [p.model_dump(mode="json") for p in points],
             "counts": {eval_id: entry.counts for eval_id, entry in tasks.items()}}
    values = {"run_id": run_id, "records": int(mark[0]), "last_seq": int(mark[1]), "version": HELD_OUT_VERSION,
              "figures": json.dumps(saved)}
    stmt = insert(RunHeldOutFiguresRow).values([values])
    stmt = stmt.on_conflict_do_update(index_elements=["run_id"], set_={
        name: stmt.excluded[name] for name in ("records", "last_seq", "version", "figures")})
    try:
        with store.db() as s:
            s.execute(stmt)
            s.commit()
    except SQLAlchemyError as exc:
        LOG.warning("run %s: computed held-out figures not stored: %s", run_id, exc)


def _held_out(store: AuditStore, cond: Any) -> tuple[list[HeldOut], dict[str, HeldOutTasks]]:
    return _held_out_figures(*_held_out_rows(store, cond))


def _held_out_rows(store: AuditStore, cond: Any) -> HeldOutRows:
    """Per (evaluation, task, answer) of the held-out records: (eval_id, first step, task, answer,
    judged, correct, reward sum); and each evaluation's records (errors included)."""
    task = func.coalesce(RecordRow.task_id, RecordRow.task_hash)
    # The answer is computed in a subquery: Postgres cannot match a GROUP BY expression with bound parameters.
    each = (select(RecordRow.eval_id.label("eval_id"), RecordRow.run_step.label("step"), task.label("task"),
                   answer_key().label("answer"), RecordRow.verdict.label("verdict"), RecordRow.reward.label("reward"))
            .where(cond, RecordRow.verdict != "error").subquery())
    with store.db() as s:
        rows = s.execute(select(each.c.eval_id, func.min(each.c.step), each.c.task, each.c.answer, func.count(),
                                _count_if(each.c.verdict == "correct"), func.sum(each.c.reward))
                         .group_by(each.c.eval_id, each.c.task, each.c.answer)).all()
        totals = dict(s.execute(select(RecordRow.eval_id, func.count()).where(cond)
                                .group_by(RecordRow.eval_id)).all())
    return [(e, int(st), t, a, int(n), int(c), None if r is None else float(r)) for e, st, t, a, n, c, r in rows], \
        {e: int(n) for e, n in totals.items()}


def _held_out_figures(rows: list[tuple], totals: dict[str, int]) -> tuple[list[HeldOut], dict[str, HeldOutTasks]]:
    tasks: dict[str, HeldOutTasks] = defaultdict(HeldOutTasks)
    step_of: dict[str, int] = {}
    rewards: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for eval_id, st, task_key, answer, n, correct, reward_sum in rows:
        step_of[eval_id] = min(st, step_of.get(eval_id, st))
        entry = tasks[eval_id]
        counts = entry.counts.setdefault(str(task_key), [0, 0])
        counts[0] += n
        counts[1] += correct
        # One vote per response; an answer class is as correct as its members were judged.
        vote = None if answer == NO_ANSWER else str(answer)
        entry.votes[str(task_key)] += [Vote(vote, i < correct) for i in range(n)]
        rewards[eval_id][0] += reward_sum or 0.0
        rewards[eval_id][1] += n
    points = []
    for eval_id, entry in tasks.items():
        counted = [(key, n, c) for key, (n, c) in entry.counts.items() if n]
        ks = [k for k in KS if counted and k <= min(n for _, n, _ in counted)]
        points.append(HeldOut(
            step=step_of[eval_id], eval_id=eval_id, name=None, checkpoint=None,  # names: see held_out
            n_tasks=len(entry.counts), n_responses=totals.get(eval_id, 0),
            pass_at_k={str(k): sum(pass_at_k(n, c, k) for _, n, c in counted) / len(counted) for k in ks},
            maj_at_k={str(k): sum(maj_at_k(entry.votes[key], k) for key, _, _ in counted) / len(counted) for k in ks},
            mean_reward=rewards[eval_id][0] / rewards[eval_id][1] if rewards[eval_id][1] else None,
        ))
    return sorted(points, key=lambda p: (p.step, p.eval_id)), dict(tasks)


def examples(store: AuditStore, run_id: str, where: list[Any], order: Any = None,
             limit: int = 5) -> tuple[list[dict[str, Any]], list[str]]:
    """Records to read behind an alarm — the first by `order` (else the earliest step) of as many
    different tasks as there are, `limit` of them — and the tasks with the most such records."""
    task = func.coalesce(RecordRow.task_id, RecordRow.task_hash)
    cond = and_(RecordRow.run_id == run_id, *where)
    ordering = [*([order] if order is not None else []), RecordRow.run_step, RecordRow.seq]
    ranked = (select(RecordRow.id.label("id"), RecordRow.run_step.label("step"), task.label("task"),
                     RecordRow.verdict.label("verdict"), RecordRow.reward.label("reward"),
                     RecordRow.group_id.label("group_id"),
                     func.row_number().over(order_by=ordering).label("at"),
                     func.row_number().over(partition_by=task, order_by=ordering).label("in_task"))
              .where(cond).subquery())
    with store.db() as s:
        rows = s.execute(select(ranked.c.id, ranked.c.step, ranked.c.task, ranked.c.verdict, ranked.c.reward,
                                ranked.c.group_id)
                         .order_by(ranked.c.in_task, ranked.c.at).limit(limit)).all()
        tasks = s.execute(select(task, func.count()).where(cond).group_by(task)
                          .order_by(func.count().desc(), task).limit(limit)).all()
    found = [{"record_id": r[0], "step": r[1], "task": r[2], "verdict": r[3], "reward": r[4], "group_id": r[5]}
             for r in rows]
    return found, [str(t) for t, _ in tasks]
