"""Aggregates of the audit records kept as records are written (issue 27): the overview,
the review queue's strata and the task statistics read these instead of scanning records.

Two tables, filled by database triggers on `records` (service/migrations/versions/0012):

- `rollup_hours`: per UTC hour (epoch hours), verifier, kind and key, a count `n`. Kinds:
  `verdict` (key: the verdict), `flag` (key: a flag; every element of a record's flags),
  `flag_review` (the same, errors left out), `stratum` (the review queue's strata of
  non-error records: flagged / correct_unflagged / incorrect), `length` and
  `length_correct` (key: the lower edge of a response-length band; errors and records
  without a stored response left out), `latency` (key: a log-spaced duration bin, see
  `latency_bin`), `groups` and `zv_groups` (key ''): groups with stored group statistics
  whose first record of that hour this is, and how many of them had zero variance.
- `rollup_tasks`: per task (content hash, registered id or ''), the curriculum tallies of
  service/task_stats.py: attempts, judged attempts, sum of raw correctness, tokens, the
  first record's seq and time, groups and zero-variance groups (raw correctness).
- `rollup_task_hours` (revision 0013): the same tallies per UTC hour and task, which task
  statistics over a time window add up (whole hours; the partial hours at the window's
  edges from the records).
- `rollup_quarters` (revision 0015): the counts of `rollup_hours` per quarter hour (epoch
  seconds // 900), which the overview of a window of up to 12 hours (15-minute buckets)
  adds up (whole quarter hours; the partial quarter hours at the edges from the records).
- `rollup_run_steps` (revision 0016, Postgres only): per training run and step, its stored
  records (held-out ones included), how many of them are held-out, and the highest seq ever
  written there; the runs list, a run's record count and step range and the run page's
  per-step change marks read it (service/runs.py). Archiving subtracts the archived records
  (service/audit_archive.py), so it counts what is stored. On SQLite the same figures are a
  GROUP BY over the records' (run_id, run_step, seq) index at read time (SQLite stores are
  small), and the table stays empty.

A group counts in each hour it has records in (as the overview always counted it per bucket);
per task, a group's zero variance is kept exact however its rows arrive: each write compares
the group before it with the group after it. On Postgres the earlier rows of a group are
looked for within GROUP_LOOKBACK (one day) before the write, so that the lookup touches only
those days' partitions: rows of one group id written more than a day apart count as two
groups per task there.

Postgres runs the statements once per INSERT statement over its transition table (set at a
time, also for COPY), in a SECURITY DEFINER function owned by the schema owner, so the
service's role reads the rollups but can never write them. The trigger takes one
transaction-level advisory lock first: concurrent record writes then update the shared
rollup rows one transaction after the other, never in crossed order (no deadlock).
SQLite ran the same statements per inserted row (row triggers) until revision 0017; since
then the record writer runs them once per committed batch (service/batch_rollups.py).
"""

from __future__ import annotations

import math

from assay_rules.variance import ZERO_VARIANCE_SPAN

# Response-length bands of the overview (lower edges, chars); the last band is open.
LENGTH_EDGES = (0, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)
# Latency bins: floor(ln(ms) * LATENCY_BINS_PER_E); a bin spans a factor e^(1/10) = 1.105.
LATENCY_BINS_PER_E = 10
LATENCY_FLOOR_MS = 0.001
GROUP_LOOKBACK = "1 day"
QUARTER = 900  # seconds: the buckets of `rollup_quarters` (revision 0015)
HOUR = 3600  # seconds: the buckets of `rollup_hours` (epoch hours)
ROLLUP_LOCK_KEY = 0x61737361795F7275  # any 64-bit constant

RECORD_COLUMNS = ("seq", "id", "created_at", "verifier", "verdict", "flags", "response", "duration_ms",
                  "group_id", "caller_key_id", "group_zero_variance", "task_id", "task_hash", "components", "tokens")


def latency_bin(duration_ms: float) -> int:
    return math.floor(math.log(max(duration_ms, LATENCY_FLOOR_MS)) * LATENCY_BINS_PER_E)


def latency_bin_value(b: int) -> float:
    """The value a bin stands for: its geometric middle (error at most 5.1%)."""
    return math.exp((b + 0.5) / LATENCY_BINS_PER_E)


def dialect_sql(dialect: str) -> dict[str, str]:
    pg = dialect == "postgresql"
    return {
        "hour": ("floor(extract(epoch from r.created_at) / 3600)::bigint" if pg
                 else "(CAST(strftime('%s', r.created_at) AS INTEGER) / 3600)"),
        "hour_e": ("floor(extract(epoch from e.created_at) / 3600)::bigint" if pg
                   else "(CAST(strftime('%s', e.created_at) AS INTEGER) / 3600)"),
        # A bucket of {w} seconds of the row aliased {a} (str.format).
        "bucket": ("floor(extract(epoch from {a}.created_at) / {w})::bigint" if pg
                   else "(CAST(strftime('%s', {a}.created_at) AS INTEGER) / {w})"),
        # Postgres: the hour's own partition only.
        # Postgres: earlier rows of a group are looked for in the last GROUP_LOOKBACK only (the
        # partitions of those days), not in the whole history.
        "lookback": (f"AND e.created_at >= (SELECT min(n.created_at) FROM n) - interval '{GROUP_LOOKBACK}'"
                     if pg else ""),
        # SQLite's planner (no statistics) would look for a group's earlier rows through the
        # caller's (caller_key_id, seq) index, reading every earlier record of the caller for each
        # new row; the group index reads only the group's own rows.
        "records_by_group": "records e" if pg else "records e INDEXED BY ix_records_group",
        "hour_range": ("AND e.created_at >= to_timestamp(g.hour * 3600) "
                       "AND e.created_at < to_timestamp((g.hour + 1) * 3600)" if pg else ""),
        "bin": (f"CAST(floor(ln(greatest(r.duration_ms, {LATENCY_FLOOR_MS})) * {LATENCY_BINS_PER_E}) AS INTEGER)"
                if pg else
                f"CAST(floor(ln(max(r.duration_ms, {LATENCY_FLOOR_MS})) * {LATENCY_BINS_PER_E}) AS INTEGER)"),
        "flagjoin": ("CROSS JOIN LATERAL jsonb_array_elements_text(n.flags) AS f(value)" if pg
                     else "JOIN json_each(n.flags) AS f"),
        "flags": "r.flags::jsonb" if pg else "r.flags",
        # Raw correctness: the `correctness` component's value (0 without one), NULL for errors.
        "corr": ("CASE WHEN r.verdict = 'error' THEN NULL "
                 "WHEN json_typeof(r.components -> 'correctness' -> 'value') = 'number' "
                 "THEN (r.components -> 'correctness' ->> 'value')::float8 "
                 "WHEN json_typeof(r.components -> 'correctness' -> 'value') = 'boolean' "
                 "THEN CASE WHEN (r.components -> 'correctness' ->> 'value') = 'true' THEN 1.0 ELSE 0.0 END "
                 "ELSE 0.0 END" if pg else
                 "CASE WHEN r.verdict = 'error' THEN NULL "
                 "ELSE CAST(coalesce(json_extract(r.components, '$.correctness.value'), 0.0) AS REAL) END"),
        "least": "LEAST" if pg else "min",
        "greatest": "GREATEST" if pg else "max",
        "text": "text" if pg else "TEXT",
    }


def _length_band(d: dict[str, str]) -> str:
    whens = " ".join(f"WHEN length(r.response) < {hi} THEN '{lo}'"
                     for lo, hi in zip(LENGTH_EDGES, LENGTH_EDGES[1:], strict=False))
    return f"CASE {whens} ELSE '{LENGTH_EDGES[-1]}' END"


def _narrow(d: dict[str, str], src: str) -> str:
    """What the rollups need of each new row, computed once (Postgres: a materialized CTE)."""
    return (f"(SELECT r.seq AS seq, r.created_at AS created_at, {d['hour']} AS hour, r.verifier AS verifier, "
            f"r.verdict AS verdict, {d['flags']} AS flags, json_array_length(r.flags) AS nflags, {d['bin']} AS bin, "
            f"CASE WHEN r.response IS NULL THEN NULL ELSE {_length_band(d)} END AS band, r.group_id AS group_id, "
            f"r.caller_key_id AS caller_key_id, r.group_zero_variance AS group_zero_variance, "
            f"r.task_id AS task_id, r.task_hash AS task_hash, {d['corr']} AS c, r.tokens AS tokens FROM {src} r)")


_KINDS = ("SELECT 'verdict' AS kind UNION ALL SELECT 'latency' UNION ALL SELECT 'stratum' "
          "UNION ALL SELECT 'length' UNION ALL SELECT 'length_correct'")


def _hours_statement(d: dict[str, str], n: str, prior: bool = True, width: int = 3600) -> str:
    """`rollup_hours` (width 3600), or `rollup_quarters` (width 900, revision 0015): the same
    counts per time bucket of `width` seconds (epoch seconds // width)."""
    table, column = ("rollup_hours", "hour") if width == 3600 else ("rollup_quarters", "quarter")
    nb = "n.hour" if width == 3600 else d["bucket"].format(a="n", w=width)
    eb = d["hour_e"] if width == 3600 else d["bucket"].format(a="e", w=width)
    new_groups = f"""
SELECT g.* FROM (
  SELECT {nb} AS hour, n.verifier AS verifier, n.caller_key_id AS caller, n.group_id AS group_id,
         min(n.seq) AS first_seq, max(CASE WHEN n.group_zero_variance THEN 1 ELSE 0 END) AS zv
  FROM {n} n WHERE n.group_id IS NOT NULL AND n.group_zero_variance IS NOT NULL
  GROUP BY {nb}, n.verifier, n.caller_key_id, n.group_id) g
WHERE NOT EXISTS (SELECT 1 FROM {d['records_by_group']} WHERE e.group_id = g.group_id
  AND e.caller_key_id IS NOT DISTINCT FROM g.caller AND e.verifier = g.verifier
  AND e.group_zero_variance IS NOT NULL AND e.seq < g.first_seq AND {eb} = g.hour
  {d['hour_range'].replace('3600', str(width))})"""
    if not prior:
        new_groups = new_groups.split("WHERE NOT EXISTS")[0]
    return f"""
INSERT INTO {table} ({column}, verifier, kind, key, n)
SELECT hour, verifier, kind, key, count(*) FROM (
  SELECT {nb} AS hour, n.verifier AS verifier, k.kind AS kind,
         CASE k.kind WHEN 'verdict' THEN n.verdict
                     WHEN 'latency' THEN CAST(n.bin AS {d['text']})
                     WHEN 'stratum' THEN CASE WHEN n.verdict = 'error' THEN NULL WHEN n.nflags > 0 THEN 'flagged'
                                              WHEN n.verdict = 'correct' THEN 'correct_unflagged' ELSE 'incorrect' END
                     WHEN 'length' THEN CASE WHEN n.verdict <> 'error' THEN n.band END
                     ELSE CASE WHEN n.verdict = 'correct' THEN n.band END END AS key
  FROM {n} n CROSS JOIN ({_KINDS}) k
  UNION ALL SELECT {nb}, n.verifier, 'flag', f.value FROM {n} n {d['flagjoin']} WHERE n.nflags > 0
  UNION ALL SELECT {nb}, n.verifier, 'flag_review', f.value FROM {n} n {d['flagjoin']}
      WHERE n.nflags > 0 AND n.verdict <> 'error'
  UNION ALL SELECT g.hour, g.verifier, 'groups', '' FROM ({new_groups}) g
  UNION ALL SELECT g.hour, g.verifier, 'zv_groups', '' FROM ({new_groups}) g WHERE g.zv = 1
) x WHERE key IS NOT NULL GROUP BY hour, verifier, kind, key ORDER BY hour, verifier, kind, key
ON CONFLICT ({column}, verifier, kind, key) DO UPDATE SET n = {table}.n + excluded.n"""


def _tasks_statement(d: dict[str, str], n: str, prior: bool = True) -> str:
    # Groups per task, exact however a group's rows arrive: each write compares the group's
    # rows before it (count, raw correctness span) with the group after it, and adds the change
    # (a new group; a zero-variance group that stops being one, or becomes one).
    span, least, greatest = ZERO_VARIANCE_SPAN, d["least"], d["greatest"]
    corr_e = d["corr"].replace("r.", "e.")
    upsert = (f"ON CONFLICT (task_hash, task_id) DO UPDATE SET "
              f"first_seq = {least}(rollup_tasks.first_seq, excluded.first_seq), "
              f"first_at = {least}(rollup_tasks.first_at, excluded.first_at), "
              + ", ".join(f"{c} = rollup_tasks.{c} + excluded.{c}" for c in
                          ("attempts", "judged", "correct_sum", "tokens_n", "tokens_sum", "groups", "zv_groups")))
    deltas = f"""
SELECT g.task_hash AS task_hash, g.tid AS tid, sum(CASE WHEN p.pr IS NULL THEN 1 ELSE 0 END) AS groups,
       sum((CASE WHEN coalesce(p.pn, 0) + g.bn < 2 THEN 1
                 WHEN {greatest}(coalesce(p.pmax, g.bmax), coalesce(g.bmax, p.pmax))
                      - {least}(coalesce(p.pmin, g.bmin), coalesce(g.bmin, p.pmin)) <= {span} THEN 1 ELSE 0 END)
           - (CASE WHEN p.pr IS NULL THEN 0 WHEN p.pn < 2 OR p.pmax - p.pmin <= {span} THEN 1 ELSE 0 END)) AS zv
FROM (
  SELECT n.task_hash AS task_hash, coalesce(n.task_id, '') AS tid, n.caller_key_id AS caller, n.group_id AS group_id,
         count(n.c) AS bn, min(n.c) AS bmin, max(n.c) AS bmax
  FROM {n} n WHERE n.group_id IS NOT NULL
  GROUP BY n.task_hash, coalesce(n.task_id, ''), n.caller_key_id, n.group_id) g
LEFT JOIN (
  SELECT e.task_hash AS task_hash, coalesce(e.task_id, '') AS tid, e.caller_key_id AS caller, e.group_id AS group_id,
         count(*) AS pr, count(e.c) AS pn, min(e.c) AS pmin, max(e.c) AS pmax
  FROM (SELECT e.*, {corr_e} AS c FROM records e
        WHERE e.group_id IN (SELECT n.group_id FROM {n} n WHERE n.group_id IS NOT NULL)
          AND e.seq < (SELECT min(n.seq) FROM {n} n) {d['lookback']}) e
  GROUP BY e.task_hash, coalesce(e.task_id, ''), e.caller_key_id, e.group_id) p
ON p.task_hash = g.task_hash AND p.tid = g.tid AND p.caller IS NOT DISTINCT FROM g.caller AND p.group_id = g.group_id
GROUP BY g.task_hash, g.tid"""
    if not prior:
        deltas = f"{deltas.split('LEFT JOIN (')[0]}LEFT JOIN {_NOTHING_BEFORE}\nGROUP BY g.task_hash, g.tid"
    return f"""
INSERT INTO rollup_tasks (task_hash, task_id, verifier, first_seq, first_at, attempts, judged, correct_sum, tokens_n,
                          tokens_sum, groups, zv_groups)
SELECT t.task_hash, t.tid, t.verifier, t.first_seq, t.first_at, t.attempts, t.judged, t.correct_sum, t.tokens_n,
       t.tokens_sum, coalesce(gd.groups, 0), coalesce(gd.zv, 0)
FROM (
  SELECT n.task_hash AS task_hash, coalesce(n.task_id, '') AS tid, min(n.verifier) AS verifier,
         min(n.seq) AS first_seq, min(n.created_at) AS first_at, count(*) AS attempts, count(n.c) AS judged,
         coalesce(sum(n.c), 0.0) AS correct_sum,
         count(n.tokens) AS tokens_n, coalesce(sum(n.tokens), 0) AS tokens_sum
  FROM {n} n GROUP BY n.task_hash, coalesce(n.task_id, '')) t
LEFT JOIN ({deltas}) gd ON gd.task_hash = t.task_hash AND gd.tid = t.tid
WHERE true ORDER BY t.task_hash, t.tid
{upsert}"""


# No earlier rows of the new rows' groups (`prior=False`).
_NOTHING_BEFORE = "(SELECT 1 AS pr, 0 AS pn, 0.0 AS pmin, 0.0 AS pmax) p ON false"


def _task_hours_statement(d: dict[str, str], n: str, prior: bool = True) -> str:
    """`rollup_task_hours`: the tallies of `rollup_tasks` per UTC hour (revision 0013), so that
    task statistics over a time window add up whole hours. A group counts in each hour it has
    records in; its zero variance is kept exact within the hour as in `rollup_tasks`."""
    span, least, greatest = ZERO_VARIANCE_SPAN, d["least"], d["greatest"]
    corr_e = d["corr"].replace("r.", "e.")
    upsert = (f"ON CONFLICT (hour, task_hash, task_id) DO UPDATE SET "
              f"first_seq = {least}(rollup_task_hours.first_seq, excluded.first_seq), "
              + ", ".join(f"{c} = rollup_task_hours.{c} + excluded.{c}" for c in
                          ("attempts", "judged", "correct_sum", "tokens_n", "tokens_sum", "groups", "zv_groups")))
    deltas = f"""
SELECT g.hour AS hour, g.task_hash AS task_hash, g.tid AS tid, sum(CASE WHEN p.pr IS NULL THEN 1 ELSE 0 END) AS groups,
       sum((CASE WHEN coalesce(p.pn, 0) + g.bn < 2 THEN 1
                 WHEN {greatest}(coalesce(p.pmax, g.bmax), coalesce(g.bmax, p.pmax))
                      - {least}(coalesce(p.pmin, g.bmin), coalesce(g.bmin, p.pmin)) <= {span} THEN 1 ELSE 0 END)
           - (CASE WHEN p.pr IS NULL THEN 0 WHEN p.pn < 2 OR p.pmax - p.pmin <= {span} THEN 1 ELSE 0 END)) AS zv
FROM (
  SELECT n.hour AS hour, n.task_hash AS task_hash, coalesce(n.task_id, '') AS tid, n.caller_key_id AS caller,
         n.group_id AS group_id, count(n.c) AS bn, min(n.c) AS bmin, max(n.c) AS bmax
  FROM {n} n WHERE n.group_id IS NOT NULL
  GROUP BY n.hour, n.task_hash, coalesce(n.task_id, ''), n.caller_key_id, n.group_id) g
LEFT JOIN (
  SELECT e.hour AS hour, e.task_hash AS task_hash, coalesce(e.task_id, '') AS tid, e.caller_key_id AS caller,
         e.group_id AS group_id, count(*) AS pr, count(e.c) AS pn, min(e.c) AS pmin, max(e.c) AS pmax
  FROM (SELECT e.*, {corr_e} AS c, {d['hour_e']} AS hour FROM records e
        WHERE e.group_id IN (SELECT n.group_id FROM {n} n WHERE n.group_id IS NOT NULL)
          AND e.seq < (SELECT min(n.seq) FROM {n} n) {d['lookback']}) e
  GROUP BY e.hour, e.task_hash, coalesce(e.task_id, ''), e.caller_key_id, e.group_id) p
ON p.hour = g.hour AND p.task_hash = g.task_hash AND p.tid = g.tid AND p.caller IS NOT DISTINCT FROM g.caller
   AND p.group_id = g.group_id
GROUP BY g.hour, g.task_hash, g.tid"""
    if not prior:  # every row of each (hour, group) is among the new rows: no earlier rows to look up
        deltas = f"{deltas.split('LEFT JOIN (')[0]}LEFT JOIN {_NOTHING_BEFORE}\nGROUP BY g.hour, g.task_hash, g.tid"
    return f"""
INSERT INTO rollup_task_hours (hour, task_hash, task_id, verifier, first_seq, attempts, judged, correct_sum, tokens_n,
                               tokens_sum, groups, zv_groups)
SELECT t.hour, t.task_hash, t.tid, t.verifier, t.first_seq, t.attempts, t.judged, t.correct_sum, t.tokens_n,
       t.tokens_sum, coalesce(gd.groups, 0), coalesce(gd.zv, 0)
FROM (
  SELECT n.hour AS hour, n.task_hash AS task_hash, coalesce(n.task_id, '') AS tid, min(n.verifier) AS verifier,
         min(n.seq) AS first_seq, count(*) AS attempts, count(n.c) AS judged, coalesce(sum(n.c), 0.0) AS correct_sum,
         count(n.tokens) AS tokens_n, coalesce(sum(n.tokens), 0) AS tokens_sum
  FROM {n} n GROUP BY n.hour, n.task_hash, coalesce(n.task_id, '')) t
LEFT JOIN ({deltas}) gd ON gd.hour = t.hour AND gd.task_hash = t.task_hash AND gd.tid = t.tid
WHERE true ORDER BY t.hour, t.task_hash, t.tid
{upsert}"""


def _split_groups_statement(d: dict[str, str], n: str) -> str:
    """`rollup_split_groups` (revision 0019): per group whose rows lie in more than one UTC hour,
    its tallies per hour (judged rows, raw correctness min and max), computed again from the
    group's records each time it gets rows, so that task statistics over a window can count such
    a group once with its zero variance over the window's rows (service/task_stats.py). A group
    whose rows all lie in one hour has no row here."""
    corr_e = d["corr"].replace("r.", "e.")
    key = "e.group_id, coalesce(e.caller_key_id, ''), e.task_hash, coalesce(e.task_id, '')"
    return f"""
INSERT INTO rollup_split_groups (group_id, caller_key_id, task_hash, task_id, hour, verifier, judged, cor_min,
                                 cor_max)
SELECT group_id, caller, task_hash, tid, hour, verifier, judged, cmin, cmax FROM (
  SELECT e.group_id AS group_id, coalesce(e.caller_key_id, '') AS caller, e.task_hash AS task_hash,
         coalesce(e.task_id, '') AS tid, e.hour AS hour, min(e.verifier) AS verifier, count(e.c) AS judged,
         min(e.c) AS cmin, max(e.c) AS cmax, count(*) OVER (PARTITION BY {key}) AS hours
  FROM (SELECT e.*, {corr_e} AS c, {d['hour_e']} AS hour FROM {d['records_by_group']}
        WHERE e.group_id IN (SELECT n.group_id FROM {n} n WHERE n.group_id IS NOT NULL) {d['lookback']}) e
  GROUP BY {key}, e.hour) x
WHERE hours > 1 ORDER BY group_id, caller, task_hash, tid, hour
ON CONFLICT (group_id, caller_key_id, task_hash, task_id, hour) DO UPDATE SET verifier = excluded.verifier,
  judged = excluded.judged, cor_min = excluded.cor_min, cor_max = excluded.cor_max"""


def split_groups_backfill(dialect: str) -> str:
    """Every stored group whose rows lie in more than one hour, into `rollup_split_groups` (the
    back-fill of revision 0019; one pass over the grouped records, no look-back limit)."""
    d = dict(dialect_sql(dialect), lookback="", records_by_group="records e")
    return _split_groups_statement(d, "n").replace(
        "e.group_id IN (SELECT n.group_id FROM n n WHERE n.group_id IS NOT NULL)", "e.group_id IS NOT NULL")


def task_hours_statement(dialect: str, src: str) -> str:
    """The statement that adds the rows of relation `src` to `rollup_task_hours` alone (the
    backfill of revision 0013): `src` must hold whole hours (e.g. a day's partition), so that no
    earlier row of an hour's group is looked up."""
    d = dialect_sql(dialect)
    return _task_hours_statement(d, _narrow(d, src), prior=False)


def rollup_statements(dialect: str, src: str, task_hours: bool = True, prior: bool = True,
                      quarters: bool = True, split_groups: bool = True) -> list[str]:
    """The statements that add the rows of relation `src` (records' columns) to the rollups:
    on Postgres one statement (the new rows read once), on SQLite one per table.
    `task_hours=False`: without `rollup_task_hours` (the schema of revision 0012);
    `quarters=False`: without `rollup_quarters` (the schemas before revision 0015);
    `split_groups=False`: without `rollup_split_groups` (the schemas before revision 0019).
    `prior=False`: `src` holds every row of each of its groups (e.g. a loader's batch of whole
    requests), so no earlier row of a group is looked up in records."""
    d = dialect_sql(dialect)
    narrow = _narrow(d, src)
    if dialect == "postgresql":
        also = f",\ntask_hours AS ({_task_hours_statement(d, 'n', prior)} RETURNING 1)" if task_hours else ""
        if quarters:
            also += f",\nquarters AS ({_hours_statement(d, 'n', prior, QUARTER)} RETURNING 1)"
        if split_groups:
            also += f",\nsplit_groups AS ({_split_groups_statement(d, 'n')} RETURNING 1)"
        return [f"WITH n AS MATERIALIZED {narrow}, hours AS ({_hours_statement(d, 'n', prior)} RETURNING 1){also}\n"
                f"{_tasks_statement(d, 'n', prior)}"]
    return [_hours_statement(d, narrow, prior), _tasks_statement(d, narrow, prior),
            *([_task_hours_statement(d, narrow, prior)] if task_hours else []),
            *([_hours_statement(d, narrow, prior, QUARTER)] if quarters else []),
            *([_split_groups_statement(d, narrow)] if split_groups else [])]


def quarters_statement(dialect: str, src: str) -> str:
    """The statement that adds the rows of relation `src` to `rollup_quarters` alone (the backfill
    of revision 0015): `src` must hold whole quarter hours (e.g. a day's partition)."""
    d = dialect_sql(dialect)
    return _hours_statement(d, _narrow(d, src), prior=False, width=QUARTER)


RECORD_KEYS = """
INSERT INTO record_keys (record_id, created_at, caller_key_id, request_id, submission_id, submission_index,
                         chain_id, chain_index)
SELECT id, created_at, caller_key_id, request_id, submission_id, submission_index, chain_id, chain_index
FROM new_rows"""


def run_steps_statement(src: str) -> str:
    """Postgres: add the rows of relation `src` (records' columns) to `rollup_run_steps`
    (revision 0016). A record with a run but no step (the API never writes one) is left out."""
    return f"""
INSERT INTO rollup_run_steps (run_id, step, records, evals, last_seq)
SELECT r.run_id, r.run_step, count(*), count(r.eval_id), max(r.seq) FROM {src} r
WHERE r.run_id IS NOT NULL AND r.run_step IS NOT NULL
GROUP BY r.run_id, r.run_step ORDER BY r.run_id, r.run_step
ON CONFLICT (run_id, step) DO UPDATE SET records = rollup_run_steps.records + excluded.records,
  evals = rollup_run_steps.evals + excluded.evals, last_seq = GREATEST(rollup_run_steps.last_seq, excluded.last_seq)"""


def archived_run_steps_statement(partition: str) -> str:
    """Postgres: take the records of `partition` (about to be archived and dropped) out of
    `rollup_run_steps`; steps left without records are deleted (ARCHIVED_RUN_STEPS_EMPTY)."""
    return f"""
UPDATE rollup_run_steps s SET records = s.records - p.n, evals = s.evals - p.e
FROM (SELECT run_id, run_step, count(*) AS n, count(eval_id) AS e FROM {partition}
      WHERE run_id IS NOT NULL AND run_step IS NOT NULL GROUP BY run_id, run_step) p
WHERE s.run_id = p.run_id AND s.step = p.run_step"""


ARCHIVED_RUN_STEPS_EMPTY = "DELETE FROM rollup_run_steps WHERE records <= 0"


def postgres_trigger_statements(schema: str, task_hours: bool = True, quarters: bool = True,
                                runs: bool = True, split_groups: bool = True) -> list[str]:
    """The AFTER INSERT statement trigger on the partitioned `records`: unique keys, then rollups.
    `runs=False`: without `rollup_run_steps` (the schemas before revision 0016);
    `split_groups=False`: without `rollup_split_groups` (the schemas before revision 0019)."""
    body = ";\n".join([f"PERFORM pg_advisory_xact_lock({ROLLUP_LOCK_KEY})", RECORD_KEYS,
                       *rollup_statements("postgresql", "new_rows", task_hours, quarters=quarters,
                                          split_groups=split_groups),
                       *([run_steps_statement("new_rows")] if runs else [])])
    return [
        f"""CREATE OR REPLACE FUNCTION assay_records_after_insert() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = "{schema}", pg_temp SET jit = off AS $fn$
BEGIN
{body};
RETURN NULL;
END $fn$""",
        "REVOKE ALL ON FUNCTION assay_records_after_insert() FROM PUBLIC",
        "DROP TRIGGER IF EXISTS records_after_insert ON records",
        "CREATE TRIGGER records_after_insert AFTER INSERT ON records REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION assay_records_after_insert()",
    ]


SQLITE_TRIGGERS = ("records_rollups", "records_rollups_tasks", "records_rollups_task_hours",
                   "records_rollups_quarters")


def sqlite_trigger_statements(task_hours: bool = True, quarters: bool = True) -> list[str]:
    """Per-row AFTER INSERT triggers: the same statements over the one new row, one trigger
    each. (In one trigger together, SQLite ran them about three times slower per row, and
    slower as the table grew: 6-9 ms of CPU per 8 records against 2.3 ms as two triggers;
    docs/benchmarks.md, "The write path".) Every name is dropped first, so that re-running
    this (revision 0013 on a store of 0012's single trigger) leaves exactly one set."""
    src = "(SELECT " + ", ".join(f"NEW.{c} AS {c}" for c in RECORD_COLUMNS) + ")"
    statements = rollup_statements("sqlite", src, task_hours, quarters=quarters, split_groups=False)
    return ([f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS]
            + [f"CREATE TRIGGER {name} AFTER INSERT ON records BEGIN\n{statement};\nEND"
               for name, statement in zip(SQLITE_TRIGGERS, statements, strict=False)])


def backfill_statements(dialect: str, task_hours: bool = True, quarters: bool = True,
                        split_groups: bool = True) -> list[str]:
    """Rollups of the records already stored (the migration of an existing SQLite store)."""
    return rollup_statements(dialect, "(SELECT * FROM records)", task_hours, quarters=quarters,
                             split_groups=split_groups)
