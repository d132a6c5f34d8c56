"""Curriculum signals per task, from the audit records: attempts, pass rate of the raw
correctness, share of zero-variance groups, mean tokens and a difficulty band.

Raw correctness is the `correctness` component as the verifier judged it, before flag
policies and shaping; errors (infrastructure) are left out. Bands by pass rate:
`too_hard` <= 0.05 < `hard` < 0.3 <= `medium` <= 0.7 < `easy` < 0.95 <= `too_easy`;
`unseen` without a judged attempt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import DateTime, bindparam, select, text

from assay_rules.variance import ZERO_VARIANCE_SPAN, is_zero_variance
from service.audit_rollups import dialect_sql
from service.inspection_schemas import Band, TaskStats
from service.store import AuditStore
from service.tables import RecordRow, RollupTaskRow

BANDS: tuple[tuple[float, Band], ...] = ((0.05, "too_hard"), (0.3, "hard"), (0.7, "medium"), (0.95, "easy"))


def band_of(pass_rate: float | None) -> Band:
    if pass_rate is None:
        return "unseen"
    if pass_rate <= BANDS[0][0]:
        return "too_hard"
    if pass_rate < BANDS[1][0]:
        return "hard"
    if pass_rate <= BANDS[2][0]:
        return "medium"
    if pass_rate < BANDS[3][0]:
        return "easy"
    return "too_easy"


def raw_correctness(row: RecordRow) -> float | None:
    if row.verdict == "error":
        return None
    component = (row.components or {}).get("correctness") or {}
    return float(component.get("value", 0.0))


@dataclass
class _Tally:
    task_id: str | None
    task_hash: str
    verifier: str
    attempts: int = 0
    correctness: list[float] = field(default_factory=list)
    # Per group, by (caller key, group id): the same id from two keys is two groups.
    groups: dict[tuple[str | None, str], list[float | None]] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)

    def add(self, row: RecordRow) -> None:
        self.attempts += 1
        value = raw_correctness(row)
        if value is not None:
            self.correctness.append(value)
        if row.group_id is not None:
            self.groups.setdefault((row.caller_key_id, row.group_id), []).append(value)
        if row.tokens is not None:
            self.tokens.append(row.tokens)

    def stats(self) -> TaskStats:
        pass_rate = sum(self.correctness) / len(self.correctness) if self.correctness else None
        zero = [is_zero_variance(values) for values in self.groups.values()]
        return TaskStats(task_id=self.task_id, task_hash=self.task_hash, verifier=self.verifier,
                         attempts=self.attempts, pass_rate=pass_rate, groups=len(zero),
                         zero_variance_share=sum(zero) / len(zero) if zero else None,
                         mean_tokens=sum(self.tokens) / len(self.tokens) if self.tokens else None,
                         band=band_of(pass_rate))


def task_stats(store: AuditStore, *, task_id: str | None = None, task_hash: str | None = None,
               verifier: str | None = None, since: datetime | None = None, until: datetime | None = None,
               limit: int = 1000) -> list[TaskStats]:
    """Per task (registered id, else content hash), in order of first attempt. By SQL: from the
    per-task rollups (service/audit_rollups.py) without a time window; with one, from the per-hour
    task rollups for the whole hours inside it and the records of the partial hours at its edges
    (aggregated by the database: per group, then per task)."""
    if since is None and until is None:
        return _from_rollups(store, task_id, task_hash, verifier, limit)
    return _in_window(store, task_id, task_hash, verifier, since, until, limit)


HOUR = 3600
WORK_MEM = "64MB"
# Tallies in the order of `_stats`'s arguments after task_id, task_hash, verifier; then first_seq.
_SUMS = ("attempts", "judged", "correct_sum", "tokens_n", "tokens_sum", "groups", "zv_groups")


def _in_window(store: AuditStore, task_id: str | None, task_hash: str | None, verifier: str | None,
               since: datetime | None, until: datetime | None, limit: int) -> list[TaskStats]:
    """The whole hours inside the window from `rollup_task_hours`, the partial hours at its edges
    from the records (at most an hour's records each), added up per task by the database in one
    statement (one aggregation, ordered by first attempt, limited there). A group whose records
    in the window lie in more than one part (hours, edges) counts once: `_split_sql` corrects the
    parts' group tallies from `rollup_split_groups` and the edges' records (revision 0019)."""
    first = math.ceil(since.timestamp() / HOUR) if since is not None else None
    end = math.floor(until.timestamp() / HOUR) if until is not None else None
    if first is not None and end is not None and first >= end:  # no whole hour inside: the records
        return _from_records(store, task_id, task_hash, verifier, since, until, limit)
    edges = []
    if since is not None and first is not None and first * HOUR > since.timestamp():
        edges.append((since, datetime.fromtimestamp(first * HOUR, UTC)))
    if until is not None and end is not None and end * HOUR < until.timestamp():
        edges.append((datetime.fromtimestamp(end * HOUR, UTC), until))
    params: dict[str, object] = {"limit": limit}
    hours = ["true"]
    for column, value in (("task_id", task_id), ("task_hash", task_hash), ("verifier", verifier)):
        if value is not None:
            hours.append(f"h.{column} = :{column}")
            params[column] = value
    if first is not None:
        hours.append("h.hour >= :first_hour")
        params["first_hour"] = first
    if end is not None:
        hours.append("h.hour < :end_hour")
        params["end_hour"] = end
    parts = [f"SELECT h.task_hash, h.task_id AS tid, h.verifier, {', '.join(f'h.{c}' for c in _SUMS)}, h.first_seq "
             f"FROM rollup_task_hours h WHERE {' AND '.join(hours)}"]
    times = []
    edge_groups = []
    for i, (lo, hi) in enumerate(edges):
        where = _record_conditions(params, task_id, task_hash, verifier)
        where += [f"r.created_at >= :lo{i}", f"r.created_at < :hi{i}"]
        params[f"lo{i}"], params[f"hi{i}"] = lo, hi
        times += [f"lo{i}", f"hi{i}"]
        edge_groups.append(_per_group_sql(store, where))
    with_edges = ""
    if edge_groups:  # the edges' records read once, per group and edge; summed per task and corrected
        with_edges = "WITH edge_groups AS (\n" + "\nUNION ALL\n".join(edge_groups) + "\n)\n"
        parts.append(_per_task_outer("edge_groups"))
    parts.append(_split_sql(store, [c.replace("h.", "s.") for c in hours], bool(edge_groups)))
    sums = ", ".join(f"sum({c})" for c in _SUMS)
    sql = (f"{with_edges}SELECT task_hash, tid, min(verifier), {sums}, min(first_seq) AS first_seq FROM (\n"
           + "\nUNION ALL\n".join(parts) + "\n) x GROUP BY task_hash, tid ORDER BY first_seq LIMIT :limit")
    stmt = text(sql).bindparams(*(bindparam(name, type_=DateTime(timezone=True)) for name in times))
    with store.db() as s:
        if store.engine.dialect.name == "postgresql":
            # A day's window is ~50k task-hours at 10M records: hashed in memory, not sorted on disk.
            s.execute(text(f"SET LOCAL work_mem = '{WORK_MEM}'"))
        rows = s.execute(stmt, params).all()
    return [_stats(tid or None, th, ver, int(a), int(j), float(cs or 0.0), int(tn), int(ts or 0), int(g), int(zv))
            for th, tid, ver, a, j, cs, tn, ts, g, zv, _ in rows]


def _split_sql(store: AuditStore, split_hours: list[str], edges: bool) -> str:
    """Per task, the correction for groups whose rows in the window lie in more than one of its
    parts (whole hours from `rollup_split_groups`, edges from `edge_groups`): each part counted the
    group once, with its zero variance over the part's rows; the window counts it once, with its
    zero variance over all of its rows in the window. Rows in `_SUMS` order (groups, zv_groups
    only; first_seq NULL)."""
    span = ZERO_VARIANCE_SPAN
    pieces = [f"SELECT s.group_id AS group_id, s.caller_key_id AS caller, s.task_hash AS task_hash, s.task_id AS tid, "
              f"s.judged AS judged, s.cor_min AS cmin, s.cor_max AS cmax FROM rollup_split_groups s "
              f"WHERE {' AND '.join(split_hours)}"]
    if edges:
        pieces.append("SELECT e.group_id, coalesce(e.caller_key_id, ''), e.task_hash, e.tid, e.judged, e.cmin, e.cmax "
                      "FROM edge_groups e WHERE e.group_id IS NOT NULL")
    zero = f"CASE WHEN judged < 2 OR cmax - cmin <= {span} THEN 1 ELSE 0 END"
    return f"""
SELECT task_hash, tid, NULL AS verifier, 0, 0, 0.0, 0, 0, {_bigint("sum(1 - parts)")},
       {_bigint("sum(zv_all - zv_parts)")}, NULL AS first_seq
FROM (
  SELECT task_hash, tid, count(*) AS parts, sum({zero}) AS zv_parts,
         CASE WHEN {_bigint("sum(judged)")} < 2 OR max(cmax) - min(cmin) <= {span} THEN 1 ELSE 0 END AS zv_all
  FROM ({" UNION ALL ".join(pieces)}) p
  GROUP BY group_id, caller, task_hash, tid HAVING count(*) > 1
) c GROUP BY task_hash, tid"""


def _stats(task_id: str | None, task_hash: str, verifier: str, attempts: int, judged: int, correct_sum: float,
           tokens_n: int, tokens_sum: int, groups: int, zv_groups: int) -> TaskStats:
    pass_rate = correct_sum / judged if judged else None
    return TaskStats(task_id=task_id or None, task_hash=task_hash, verifier=verifier, attempts=attempts,
                     pass_rate=pass_rate, groups=groups, zero_variance_share=zv_groups / groups if groups else None,
                     mean_tokens=tokens_sum / tokens_n if tokens_n else None, band=band_of(pass_rate))


def _from_rollups(store: AuditStore, task_id: str | None, task_hash: str | None, verifier: str | None,
                  limit: int) -> list[TaskStats]:
    t = RollupTaskRow
    stmt = select(t)
    for column, value in ((t.task_id, task_id), (t.task_hash, task_hash), (t.verifier, verifier)):
        if value is not None:
            stmt = stmt.where(column == value)
    with store.db() as s:
        rows = list(s.scalars(stmt.order_by(t.first_seq).limit(limit)))
    return [_stats(r.task_id, r.task_hash, r.verifier, r.attempts, r.judged, r.correct_sum, r.tokens_n,
                   r.tokens_sum, r.groups, r.zv_groups) for r in rows]


def _from_records(store: AuditStore, task_id: str | None, task_hash: str | None, verifier: str | None,
                  since: datetime | None, until: datetime | None, limit: int) -> list[TaskStats]:
    """Per task of the window's records (aggregated by the database: per group, then per task)."""
    params: dict[str, object] = {"limit": limit}
    where = _record_conditions(params, task_id, task_hash, verifier)
    times = []
    for name, value, op in (("since", since, ">="), ("until", until, "<")):
        if value is not None:
            where.append(f"r.created_at {op} :{name}")
            params[name] = value
            times.append(name)
    stmt = text(_per_task_sql(store, where, limit=True)).bindparams(
        *(bindparam(name, type_=DateTime(timezone=True)) for name in times))
    with store.db() as s:
        rows = s.execute(stmt, params).all()
    return [_stats(tid or None, th, ver, int(a), int(j), float(cs or 0.0), int(tn), int(ts or 0), int(g), int(zv))
            for th, tid, ver, a, j, cs, tn, ts, g, zv, _ in rows]


def _record_conditions(params: dict[str, object], task_id: str | None, task_hash: str | None,
                       verifier: str | None) -> list[str]:
    where = ["true"]
    for column, value in (("task_id", task_id), ("task_hash", task_hash), ("verifier", verifier)):
        if value is not None:
            where.append(f"r.{column} = :{column}")
            params[column] = value
    return where


def _per_task_sql(store: AuditStore, where: list[str], limit: bool) -> str:
    """(task_hash, tid, verifier, *sums, first_seq) per task of the records matching `where`.
    A task's records without a group form one row of the inner query (group_id NULL), not a group."""
    return _per_task_outer(f"(\n{_per_group_sql(store, where)}\n)", limit)


def _per_task_outer(groups: str, limit: bool = False) -> str:
    """Per task, the sums of `groups` (rows of `_per_group_sql`)."""
    # The counts cast back to BIGINT: Postgres sums a BIGINT into a NUMERIC, and a NUMERIC part made
    # every count of the window's UNION ALL a NUMERIC, summed per task with a NUMERIC state per task
    # and count (~300 of a 1-day window's ~400 ms at 10M records; BIGINT sums take ~50 ms).
    return f"""
SELECT task_hash, tid, min(verifier) AS verifier, {_bigint("sum(attempts)")} AS attempts,
       {_bigint("sum(judged)")} AS judged, sum(correct_sum) AS correct_sum, {_bigint("sum(tokens_n)")} AS tokens_n,
       {_bigint("sum(tokens_sum)")} AS tokens_sum,
       {_bigint("sum(CASE WHEN group_id IS NOT NULL THEN 1 ELSE 0 END)")} AS groups,
       {_bigint(f"sum(CASE WHEN group_id IS NOT NULL AND (judged < 2 OR cmax - cmin <= {ZERO_VARIANCE_SPAN}) "
                "THEN 1 ELSE 0 END)")} AS zv_groups,
       min(first_seq) AS first_seq
FROM {groups} g GROUP BY task_hash, tid{" ORDER BY first_seq LIMIT :limit" if limit else ""}"""


def _bigint(sql: str) -> str:
    return f"CAST({sql} AS BIGINT)"


def _per_group_sql(store: AuditStore, where: list[str]) -> str:
    """Per group (task, caller key, group id; a task's records without a group: one row, group_id
    NULL) of the records matching `where`, its tallies."""
    d = dialect_sql(store.engine.dialect.name)
    return f"""
  SELECT r.task_hash AS task_hash, coalesce(r.task_id, '') AS tid, min(r.verifier) AS verifier,
         r.caller_key_id AS caller_key_id, r.group_id AS group_id, count(*) AS attempts, count(r.c) AS judged,
         coalesce(sum(r.c), 0.0) AS correct_sum, max(r.c) AS cmax, min(r.c) AS cmin,
         count(r.tokens) AS tokens_n, coalesce(sum(r.tokens), 0) AS tokens_sum, min(r.seq) AS first_seq
  FROM (SELECT r.*, {d["corr"]} AS c FROM records r WHERE {" AND ".join(where)}) r
  GROUP BY r.task_hash, coalesce(r.task_id, ''), r.caller_key_id, r.group_id"""
