"""The audit at ten million records (issue 27): fill Postgres by COPY, then time every viewer
page kind and every API read over HTTP against a real `assay serve`.

    python bench/audit_scale.py [--rows 10000000] [--days 30] [--repeat 5] [--keep] [--reuse DB]

Makes its own database on the cluster of scripts/postgres.sh (ASSAY_TEST_POSTGRES_URL), creates
the schema through the audit store (revision 0012: records partitioned by day, rollups kept by
the insert trigger), makes the day partitions of the window, and COPYs `rows` synthetic but
realistic records through the partitioned parent (so the trigger keeps record_keys and the
rollups, as it does for the service's own writes), in batches of --batch rows:
five verifiers (math, code, sql, tool_state, proof) with their own verdict mixes, latencies
and flags; groups of 8 (code: 4) and single requests; six API keys; eight training runs with
steps; 1% evaluation records; ~0.05% records labelled; responses of 40-3,000 characters;
modest evidence; spread over `days` days up to now. Chain fields are left empty (the bench
does not sign); the fill time is printed.

Then each case is fetched `repeat` times over HTTP by a signed-in auditor (pages) or an
audit+review key (API); the median and the worst are printed beside the issue's target.
Baseline in the same run: the pre-0012 way of computing the overview, review queue and task
statistics (recomputed over the records), timed on the same database where it finishes
within --baseline-timeout seconds (printed as such otherwise). The machine's load average is
printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service import audit_partitions  # noqa: E402
from service.store import AuditStore  # noqa: E402
from service.testing.live import LiveServer  # noqa: E402

COLUMNS = ("id", "created_at", "request_id", "caller_key_id", "task_id", "task_hash", "task_public", "verifier",
           "verifier_version", "response_hash", "response", "components", "reward", "verdict", "evidence", "flags",
           "sandbox_backend", "usage", "duration_ms", "group_id", "group_index", "submission_id", "submission_index",
           "advantage", "group_mean", "group_std", "group_zero_variance", "flag_evidence", "tokens", "finish_reason",
           "masked", "eval_id", "run_id", "run_step", "task_digest")
# verifier: (share, group size, tasks, verdict weights, flags with their chance, latency median ms, sigma)
VERIFIERS = {
    "math": (0.40, 8, 20_000, {"correct": 45, "incorrect": 40, "invalid_format": 12, "error": 0.3, "timeout": 0.5,
                               "violation": 0.2}, {"multiple_answers": 0.02, "false_step": 0.01}, 4.0, 0.8),
    "code": (0.25, 4, 5_000, {"correct": 35, "incorrect": 45, "invalid_format": 5, "error": 0.8, "timeout": 4,
                              "violation": 1.5}, {"exits_process": 0.01, "overrides_equality": 0.003,
                                                  "reads_tests": 0.002}, 180.0, 0.9),
    "sql": (0.15, 8, 3_000, {"correct": 50, "incorrect": 38, "invalid_format": 8, "error": 0.4, "timeout": 1,
                             "violation": 2}, {"write_in_read_only": 0.01}, 25.0, 0.7),
    "tool_state": (0.12, 8, 2_000, {"correct": 40, "incorrect": 48, "invalid_format": 6, "error": 0.5, "timeout": 1,
                                    "violation": 4}, {"forbidden_tool": 0.03}, 12.0, 0.6),
    "proof": (0.08, 8, 1_000, {"correct": 30, "incorrect": 55, "invalid_format": 10, "error": 0.2, "timeout": 2,
                               "violation": 0.5}, {"uses_axiom": 0.01}, 6.0, 1.0),
}
KEYS = [f"{i:016x}" for i in range(6)]
RUNS = [f"grpo-run-{i}" for i in range(8)]
EVALS = [uuid.UUID(int=i).hex for i in range(1, 6)]
TARGETS = {"overview": 500, "records": 300, "review": 300, "task_stats": 500}


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _pools(rng: random.Random) -> dict[str, list[str]]:
    words = ("so", "the", "answer", "is", "let", "x", "=", "we", "get", "therefore", "step", "check", "sum", "def",
             "return", "SELECT", "FROM", "WHERE", "call", "tool", "state", "proof", "by", "lemma")
    responses = []
    for _ in range(400):
        n = int(min(3000, max(40, rng.lognormvariate(math.log(260), 0.8))))
        body = " ".join(rng.choice(words) for _ in range(n // 4))[:n]
        responses.append(_esc(f"{body} \\boxed{{{rng.randint(0, 999)}}}"))
    evidence = [_esc(json.dumps({"parsed": str(rng.randint(0, 999)), "expected_kind": "number",
                                 "stderr": "" if rng.random() < 0.8 else "Traceback: AssertionError " * 3,
                                 "tests": {"passed": rng.randint(0, 10), "total": 10}})) for _ in range(200)]
    return {"responses": responses, "evidence": evidence}


def generate(rows: int, days: float, seed: int, batch: int):
    """Yield COPY text for `batch` rows at a time (tab-separated, \\N for NULL)."""
    rng = random.Random(seed)
    pools = _pools(rng)
    end = time.time()
    start = end - days * 86400
    names = list(VERIFIERS)
    shares = [VERIFIERS[v][0] for v in names]
    task_hashes = {v: [f"{v[:2]}{i:062x}" for i in range(VERIFIERS[v][2])] for v in names}
    components = {ok: _esc(json.dumps({"correctness": {"value": float(ok), "hard": True},
                                       "format": {"value": 1.0, "hard": True},
                                       "compliance": {"value": 1.0, "hard": True}})) for ok in (0, 1)}
    out, written, n_in_batch = io.StringIO(), 0, 0
    step_of = {r: 0 for r in RUNS}
    while written < rows:
        v = rng.choices(names, shares)[0]
        _, group_size, n_tasks, verdict_weights, flag_chances, median, sigma = VERIFIERS[v]
        size = group_size if rng.random() < 0.8 else 1
        size = min(size, rows - written)
        task = rng.randrange(n_tasks)
        task_hash = task_hashes[v][task]
        task_id = f"{v}/{task}" if task % 2 == 0 else None
        key = KEYS[rng.randrange(len(KEYS))]
        submission = uuid.UUID(int=rng.getrandbits(128)).hex
        group = uuid.UUID(int=rng.getrandbits(128)).hex if size > 1 else None
        run = rng.choice(RUNS) if rng.random() < 0.7 else None
        if run is not None and rng.random() < 0.01:
            step_of[run] += 1
        eval_id = rng.choice(EVALS) if rng.random() < 0.01 else None
        moment = start + (end - start) * written / rows
        verdicts = rng.choices(list(verdict_weights), list(verdict_weights.values()), k=size)
        rewards = [round(1.0 - rng.random() * 0.05, 6) if vd == "correct" else 0.0 for vd in verdicts]
        counted = [r for r, vd in zip(rewards, verdicts, strict=True) if vd != "error"]
        mean = sum(counted) / len(counted) if counted else 0.0
        std = math.sqrt(sum((r - mean) ** 2 for r in counted) / len(counted)) if counted else 0.0
        zero = len(counted) < 2 or max(counted) - min(counted) <= 5e-7
        stamp = datetime.fromtimestamp(moment, UTC).isoformat(sep=" ")
        for index in range(size):
            verdict = verdicts[index]
            flags = [f for f, p in flag_chances.items() if rng.random() < p]
            tokens = rng.randint(30, 4000)
            fields = [
                uuid.UUID(int=rng.getrandbits(128)).hex, stamp, "\\N", key, task_id or "\\N", task_hash,
                '{"answer_kind": "number"}', v, "1", f"{rng.getrandbits(256):064x}",
                pools["responses"][rng.randrange(400)], components[verdict == "correct"], repr(rewards[index]),
                verdict, pools["evidence"][rng.randrange(200)], json.dumps(flags),
                "process" if v != "code" else "docker", '{"cpu_ms": 3}',
                f"{rng.lognormvariate(math.log(median), sigma):.3f}",
                group or "\\N", str(index) if group else "\\N", submission, str(index),
                f"{(rewards[index] - mean) / (std + 1e-6):.6f}" if group else "\\N",
                f"{mean:.6f}" if group else "\\N", f"{std:.6f}" if group else "\\N",
                ("t" if zero else "f") if group else "\\N",
                _esc(json.dumps({f: {"hint": "pattern seen"} for f in flags})) if flags else "\\N",
                str(tokens), "length" if tokens > 3900 else "stop", "f", eval_id or "\\N",
                run or "\\N", str(step_of[run]) if run else "\\N", "\\N",
            ]
            out.write("\t".join(fields))
            out.write("\n")
        written += size
        n_in_batch += size
        if n_in_batch >= batch or written >= rows:
            yield out.getvalue(), n_in_batch
            out, n_in_batch = io.StringIO(), 0


def _copy(conn: psycopg.Connection, chunk: str) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY records ({', '.join(COLUMNS)}) FROM STDIN") as copy:
        for offset in range(0, len(chunk), 1 << 20):
            copy.write(chunk[offset:offset + (1 << 20)])


# Verdicts in a fixed order for the SQL generator's cumulative weights.
_VERDICT_ORDER = ("correct", "incorrect", "invalid_format", "error", "timeout", "violation")
# Training steps per run over the whole window (the Python generator's ~1% chance a group).
_STEPS = 1100


def _verifier_values() -> str:
    """VALUES rows of the verifiers' parameters for the SQL generator: number, name, cumulative
    share (upper edge), group size, tasks, cumulative verdict edges, flags and their chances,
    latency median and sigma."""
    rows, edge = [], 0.0
    for number, (name, (share, size, tasks, weights, flags, median, sigma)) in enumerate(VERIFIERS.items()):
        edge += share
        total = sum(weights.values())
        cumulative, acc = [], 0.0
        for verdict in _VERDICT_ORDER:
            acc += weights.get(verdict, 0) / total
            cumulative.append(acc)
        names = ", ".join(f"'{f}'" for f in flags)
        chances = ", ".join(repr(p) for p in flags.values())
        rows.append(f"({number}, '{name}', {edge if number < len(VERIFIERS) - 1 else 1.0}, {size}, {tasks}, "
                    f"ARRAY[{', '.join(repr(c) for c in cumulative)}]::float8[], ARRAY[{names}]::text[], "
                    f"ARRAY[{chances}]::float8[], {median}, {sigma})")
    return ",\n".join(rows)


def _fill_statement(days: float) -> str:
    """One batch: the groups numbered [:lo, :hi) of :n_groups (an estimate), each a request of one
    verifier's task by one key, spread evenly over the window in group order, with its members."""
    verdicts = "ARRAY[" + ", ".join(f"'{v}'" for v in _VERDICT_ORDER) + "]"
    keys = "ARRAY[" + ", ".join(f"'{k}'" for k in KEYS) + "]"
    runs = "ARRAY[" + ", ".join(f"'{r}'" for r in RUNS) + "]"
    evals = "ARRAY[" + ", ".join(f"'{e}'" for e in EVALS) + "]"
    components = {ok: json.dumps({"correctness": {"value": float(ok), "hard": True}, "format": {"value": 1.0, "hard": True},
                                  "compliance": {"value": 1.0, "hard": True}}) for ok in (0, 1)}
    return f"""
WITH v (num, name, edge, gsize, tasks, cum, flags, chances, median, sigma) AS (VALUES {_verifier_values()}),
g AS MATERIALIZED (
  SELECT s.g, v.name AS verifier, v.cum, v.flags, v.chances, v.median, v.sigma,
         CASE WHEN s.u_size < 0.8 THEN v.gsize ELSE 1 END AS size,
         floor(s.u_task * v.tasks)::int AS task, s.u_key, s.u_run, s.u_eval,
         md5(s.g::text || 'submission' || s.u_key) AS submission,
         :start + (:end - :start) * least(1.0, s.g::float8 / :n_groups) AS moment,
         floor(least(1.0, s.g::float8 / :n_groups) * {_STEPS})::int AS step
  FROM (SELECT g, random() AS u_v, random() AS u_size, random() AS u_task, random() AS u_key,
               random() AS u_run, random() AS u_eval FROM generate_series(:lo, :hi - 1) AS g) s
  JOIN v ON v.num = (SELECT min(w.num) FROM v w WHERE s.u_v < w.edge)
  ORDER BY s.g
)
INSERT INTO records ({", ".join(c for c in COLUMNS if c != "task_digest")})
SELECT md5(g.g::text || ':' || m.i || ':' || random()), to_timestamp(g.moment), NULL, ({keys})[1 + floor(g.u_key * 6)::int],
       CASE WHEN mod(g.task, 2) = 0 THEN g.verifier || '/' || g.task END,
       substr(g.verifier, 1, 2) || lpad(to_hex(g.task), 62, '0'), '{{"answer_kind": "number"}}', g.verifier, '1',
       md5(random()::text) || md5(random()::text), (SELECT body FROM bench_responses WHERE i = m.r_resp),
       CASE WHEN m.verdict = 'correct' THEN '{components[1]}'::json ELSE '{components[0]}'::json END,
       m.reward, m.verdict, (SELECT body FROM bench_evidence WHERE i = m.r_ev)::json, m.flags, CASE WHEN g.verifier = 'code' THEN 'docker' ELSE 'process' END,
       '{{"cpu_ms": 3}}', round((g.median * exp(g.sigma * m.normal))::numeric, 3)::float8,
       CASE WHEN g.size > 1 THEN md5(g.g::text || 'group') END, CASE WHEN g.size > 1 THEN m.i END,
       g.submission, m.i,
       CASE WHEN g.size > 1 THEN round(((m.reward - coalesce(m.mean, 0)) / (coalesce(m.std, 0) + 1e-6))::numeric, 6)::float8 END,
       CASE WHEN g.size > 1 THEN round(coalesce(m.mean, 0)::numeric, 6)::float8 END,
       CASE WHEN g.size > 1 THEN round(coalesce(m.std, 0)::numeric, 6)::float8 END,
       CASE WHEN g.size > 1 THEN coalesce(m.nc < 2 OR m.cmax - m.cmin <= 5e-7, true) END,
       CASE WHEN json_array_length(m.flags) > 0 THEN
         (SELECT json_object_agg(f, json_build_object('hint', 'pattern seen')) FROM json_array_elements_text(m.flags) f)
       END,
       m.tokens, CASE WHEN m.tokens > 3900 THEN 'length' ELSE 'stop' END, false,
       CASE WHEN g.u_eval < 0.01 THEN ({evals})[1 + floor(g.u_eval * 500)::int] END,
       CASE WHEN g.u_run < 0.7 THEN ({runs})[1 + floor(g.u_run / 0.7 * 8)::int] END,
       CASE WHEN g.u_run < 0.7 THEN g.step END
FROM g CROSS JOIN LATERAL (
  SELECT a.*, avg(a.reward) FILTER (WHERE a.verdict <> 'error') OVER () AS mean,
         stddev_pop(a.reward) FILTER (WHERE a.verdict <> 'error') OVER () AS std,
         count(*) FILTER (WHERE a.verdict <> 'error') OVER () AS nc,
         max(a.reward) FILTER (WHERE a.verdict <> 'error') OVER () AS cmax,
         min(a.reward) FILTER (WHERE a.verdict <> 'error') OVER () AS cmin
  FROM (SELECT b.i, b.verdict, b.flags, b.tokens, b.normal, b.r_resp, b.r_ev,
               CASE WHEN b.verdict = 'correct' THEN round((1.0 - b.u_reward * 0.05)::numeric, 6)::float8 ELSE 0.0 END
                 AS reward
        FROM (SELECT i, ({verdicts})[least(6, (SELECT count(*) FROM unnest(g.cum) c WHERE c <= u.u_verdict) + 1)] AS verdict,
                     (SELECT coalesce(json_agg(f.name), '[]'::json) FROM unnest(g.flags, g.chances) f(name, p)
                      WHERE random() < f.p AND u.i >= 0) AS flags,
                     30 + floor(u.u_tokens * 3971)::int AS tokens, u.u_reward,
                     sqrt(-2 * ln(1.0 - u.u_n1)) * cos(2 * pi() * u.u_n2) AS normal,
                     floor(u.u_resp * 400)::int AS r_resp, floor(u.u_ev * 200)::int AS r_ev
              FROM (SELECT i, random() AS u_verdict, random() AS u_tokens, random() AS u_reward, random() AS u_n1,
                           random() AS u_n2, random() AS u_resp, random() AS u_ev
                    FROM generate_series(0, g.size - 1) AS i) u) b) a
) m"""


def _sql_pools(conn: psycopg.Connection, seed: int) -> None:
    """The response and evidence texts the generator draws from (temporary tables)."""
    rng = random.Random(seed)
    words = ("so", "the", "answer", "is", "let", "x", "=", "we", "get", "therefore", "step", "check", "sum", "def",
             "return", "SELECT", "FROM", "WHERE", "call", "tool", "state", "proof", "by", "lemma")
    conn.execute("CREATE TEMP TABLE bench_responses (i int PRIMARY KEY, body text)")
    conn.execute("CREATE TEMP TABLE bench_evidence (i int PRIMARY KEY, body text)")
    with conn.cursor() as cur:
        responses = []
        for i in range(400):
            n = int(min(3000, max(40, rng.lognormvariate(math.log(260), 0.8))))
            body = " ".join(rng.choice(words) for _ in range(n // 4))[:n]
            responses.append((i, f"{body} \\boxed{{{rng.randint(0, 999)}}}"))
        cur.executemany("INSERT INTO bench_responses VALUES (%s, %s)", responses)
        cur.executemany("INSERT INTO bench_evidence VALUES (%s, %s)", [
            (i, json.dumps({"parsed": str(rng.randint(0, 999)), "expected_kind": "number",
                            "stderr": "" if rng.random() < 0.8 else "Traceback: AssertionError " * 3,
                            "tests": {"passed": rng.randint(0, 10), "total": 10}})) for i in range(200)])


def _generate_in_sql(conn: psycopg.Connection, rows: int, days: float, batch: int, seed: int,
                     started: float) -> None:
    """Generate the records in the database (INSERT ... SELECT over generate_series), in batches
    of about `batch` records, each committed."""
    _sql_pools(conn, seed)
    conn.execute("SELECT setseed(%s)", [(seed % 1000) / 1000])
    mean_size = sum(share * (0.8 * size + 0.2) for share, size, *_ in VERIFIERS.values())
    n_groups = max(1, round(rows / mean_size))
    per_batch = max(1, round(batch / mean_size))
    end = time.time()
    start = end - days * 86400
    statement = _fill_statement(days).replace(":start", "%(start)s").replace(":end", "%(end)s") \
        .replace(":n_groups", "%(n_groups)s").replace(":lo", "%(lo)s").replace(":hi", "%(hi)s")
    done, lo = 0, 0
    while done < rows:
        hi = lo + per_batch
        cur = conn.execute(statement + " LIMIT %(left)s", {"start": start, "end": end, "n_groups": n_groups,
                                                            "lo": lo, "hi": hi, "left": rows - done})
        done += cur.rowcount
        lo = hi
        conn.commit()
        print(f"  {done:,} records, {time.perf_counter() - started:.0f} s", flush=True)


def fill(url: str, rows: int, days: float, batch: int, seed: int, bulk: bool, in_sql: bool = True) -> float:
    """Fill the records. `in_sql` (the default): generated by the database itself (INSERT ... SELECT
    over generate_series: the same mixes as `generate`), else COPY of Python-generated text.
    `bulk`: as a schema owner loading history would (the migration does the same for an
    existing deployment): the insert trigger and the indexes off during the load, then the
    indexes built, record_keys and the rollups computed by the trigger's own statements over
    all records in one pass. Otherwise every batch goes through the trigger."""
    from service import audit_rollups

    started = time.perf_counter()
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    today = datetime.now(UTC).date()
    engine = create_engine(url)
    with engine.begin() as conn:
        audit_partitions.create_partitions(conn, (today - timedelta(days=i) for i in range(int(days) + 2)))
    engine.dispose()
    done = 0
    with psycopg.connect(plain, autocommit=False) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET jit = off")
        indexes = []
        if bulk:
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute("ALTER TABLE records DISABLE TRIGGER records_after_insert")
            indexes = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                                   "('records', 'record_keys') AND indexname NOT IN "
                                   "('records_pkey', 'record_keys_pkey')").fetchall()
            for name, _ in indexes:
                conn.execute(f'DROP INDEX "{name}"' if not name.startswith("uq_record_keys_request")
                             else f'ALTER TABLE record_keys DROP CONSTRAINT "{name}"')
            conn.commit()
        if in_sql:
            _generate_in_sql(conn, rows, days, batch, seed, started)
        else:
            for chunk, n in generate(rows, days, seed, batch):
                _copy(conn, chunk)
                conn.commit()
                done += n
                print(f"  {done:,} records, {time.perf_counter() - started:.0f} s", flush=True)
        if bulk:
            for name, definition in indexes:
                # pg_indexes names a partitioned index "ON ONLY records": build it on every partition.
                recursive = definition.replace(" ON ONLY ", " ON ")
                conn.execute(recursive if not name.startswith("uq_record_keys_request") else
                             f'ALTER TABLE record_keys ADD CONSTRAINT "{name}" UNIQUE (caller_key_id, request_id)')
                conn.commit()
                print(f"  index {name} built, {time.perf_counter() - started:.0f} s", flush=True)
            conn.execute(audit_rollups.RECORD_KEYS.replace("FROM new_rows", "FROM records"))
            conn.commit()
            print(f"  record_keys filled, {time.perf_counter() - started:.0f} s", flush=True)
            for statement in audit_rollups.backfill_statements("postgresql"):
                conn.execute(statement)
            conn.execute("ALTER TABLE records ENABLE TRIGGER records_after_insert")
            conn.commit()
            print(f"  rollups computed, {time.perf_counter() - started:.0f} s", flush=True)
        conn.execute("""INSERT INTO labels (id, record_id, created_at, author, author_key_id, label)
                        SELECT md5(id || 'label'), id, created_at + interval '1 hour', 'bench', 'key0',
                               (ARRAY['agree', 'disagree', 'exploit'])[1 + abs(hashtext(id)) % 3]
                        FROM records TABLESAMPLE SYSTEM (0.05)""")
        conn.commit()
        conn.autocommit = True
        # As autovacuum would soon: statistics, and the visibility map index-only scans read.
        conn.execute("VACUUM (ANALYZE) records")
        conn.execute("ANALYZE")
    return time.perf_counter() - started


def trigger_cost(url: str, rows: int, seed: int) -> None:
    """The write path with the store full: `rows` more records (in the last hour) through the trigger."""
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=False) as conn:
        for chunk, n in generate(rows, 1 / 24, seed + 1, rows):
            started = time.perf_counter()
            _copy(conn, chunk)
            conn.commit()
            took = time.perf_counter() - started
            print(f"{'write path':12} {n:,} more records by COPY through the insert trigger (keys, rollups): "
                  f"{took:.1f} s, {took / n * 1e6:.0f} us a record", flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Timer:
    def __init__(self, client: httpx.Client, api: httpx.Client, repeat: int) -> None:
        self.client, self.api, self.repeat = client, api, repeat
        self.results: list[tuple[str, str, float, float, float | None]] = []

    def time(self, kind: str, label: str, url: str, api: bool = False, target: float | None = None,
             expect: int = 200) -> tuple[float, httpx.Response]:
        client = self.api if api else self.client
        times, reply = [], None
        for _ in range(self.repeat):
            started = time.perf_counter()
            reply = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert reply.status_code == expect, (url, reply.status_code, reply.text[:300])
        median = statistics.median(times)
        self.results.append((kind, label, median, max(times), target))
        mark = "" if target is None else ("  ok" if median <= target else "  OVER")
        print(f"{kind:12} {label:58} {median:9.1f} {max(times):9.1f} {'' if target is None else target:>7}{mark}",
              flush=True)
        return median, reply


def record_filter_combinations(timer: Timer, sample: dict, since: str) -> None:
    """/v1/records: every combination of its filters, values from one stored record (so the full
    combination finds it), and the same with a value nobody has (empty pages)."""
    values = {"verifier": sample["verifier"], "verdict": sample["verdict"], "task_id": sample["task_id"],
              "task_hash": sample["task_hash"], "caller_key_id": sample["caller_key_id"],
              "group_id": sample["group_id"], "flag": (sample["flags"] or ["multiple_answers"])[0], "since": since}
    names = list(values)
    worst: list[tuple[float, str]] = []
    all_times = []
    for r in range(0, len(names) + 1):
        for combo in itertools.combinations(names, r):
            params = {k: values[k] for k in combo if values[k] is not None}
            for label, extra in (("", {}), ("empty", {"verifier": "no_such_verifier"})):
                query = httpx.QueryParams({**params, **extra, "limit": 50})
                started = time.perf_counter()
                reply = timer.api.get("/v1/records", params=query)
                ms = (time.perf_counter() - started) * 1000
                assert reply.status_code == 200, reply.text[:300]
                all_times.append(ms)
                worst.append((ms, f"{'+'.join(combo) or 'none'} {label}".strip()))
    worst.sort(reverse=True)
    over = sum(ms > TARGETS["records"] for ms, _ in worst)
    median = statistics.median(all_times)
    print(f"{'api records':12} {len(all_times)} filter combinations (each once): median {median:.1f}"
          f" ms, p95 {sorted(all_times)[int(len(all_times) * 0.95)]:.1f} ms, max {worst[0][0]:.1f} ms; "
          f"{over} over {TARGETS['records']} ms")
    for ms, label in worst[:5]:
        print(f"{'':12}   slowest: {label:60} {ms:8.1f} ms")
    # The slowest ones again, `repeat` times (the first pass may have paid a cold cache).
    for _, label in worst[:5]:
        combo, _, tag = label.partition(" ")
        params = {k: values[k] for k in combo.split("+") if k in values and values[k] is not None}
        if tag == "empty":
            params["verifier"] = "no_such_verifier"
        timer.time("api records", f"again: {label}", "/v1/records?" + str(httpx.QueryParams({**params, "limit": 50})),
                   api=True, target=TARGETS["records"])


def viewer_filter_pairs(timer: Timer, sample: dict, since: str) -> None:
    values = {"verifier": sample["verifier"], "verdict": sample["verdict"], "flag": "forbidden_tool",
              "task": sample["task_id"] or sample["task_hash"], "group": sample["group_id"],
              "key": sample["caller_key_id"], "label": "exploit", "eval": EVALS[0], "run": RUNS[0], "since": since}
    values = {k: v for k, v in values.items() if v is not None}
    times = []
    worst: list[tuple[float, str]] = []
    cases = [()] + [(k,) for k in values] + list(itertools.combinations(values, 2))
    for combo in cases:
        for sort in ("newest", "reward_desc", "slowest"):
            params = {**{k: values[k] for k in combo}, "sort": sort}
            started = time.perf_counter()
            reply = timer.client.get("/ui/records", params=params)
            ms = (time.perf_counter() - started) * 1000
            assert reply.status_code == 200, (params, reply.text[:300])
            times.append(ms)
            worst.append((ms, f"{'+'.join(combo) or 'none'} sort={sort}"))
    worst.sort(reverse=True)
    over = sum(ms > TARGETS["records"] for ms, _ in worst)
    print(f"{'ui records':12} {len(times)} filter pairs x sorts (each once): median {statistics.median(times):.1f} ms, "
          f"p95 {sorted(times)[int(len(times) * 0.95)]:.1f} ms, max {worst[0][0]:.1f} ms; "
          f"{over} over {TARGETS['records']} ms")
    for ms, label in worst[:5]:
        print(f"{'':12}   slowest: {label:60} {ms:8.1f} ms")


def export_rate(server: LiveServer, api: httpx.Client, params: dict) -> None:
    pid = server.proc.pid
    def rss() -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1])
        return 0
    before, peak, lines, size = rss(), 0, 0, 0
    started = time.perf_counter()
    with api.stream("GET", "/v1/records/export", params=params) as reply:
        assert reply.status_code == 200
        for chunk in reply.iter_bytes():
            lines += chunk.count(b"\n")
            size += len(chunk)
            if lines % 20 == 0:
                peak = max(peak, rss())
    elapsed = time.perf_counter() - started
    peak = max(peak, rss())
    rate = lines / elapsed
    print(f"{'api export':12} {str(params):58} {lines:,} records, {size / 1e6:.0f} MB in {elapsed:.1f} s: "
          f"{rate:,.0f} records/s (target >= 50,000) {'ok' if rate >= 50_000 else 'UNDER'}; server RSS "
          f"{before / 1024:.0f} MB before, peak {peak / 1024:.0f} MB", flush=True)


def _old_review_scan(store, deadline: float) -> int:
    """The pre-0012 review queue: every record through Python (reservoir per stratum)."""
    from service.review import stratum_of
    labelled = store.labelled_record_ids()
    seen = 0
    for row in store.iter_all():
        if row.id not in labelled:
            stratum_of(row, None)
        seen += 1
        if time.perf_counter() > deadline:
            break
    return seen


def _old_task_scan(store, deadline: float) -> int:
    """The pre-0012 task statistics: every record through Python (a tally per task)."""
    from service.task_stats import raw_correctness
    seen, tallies = 0, {}
    for row in store.iter_all():
        tallies.setdefault((row.task_id, row.task_hash), []).append(raw_correctness(row))
        seen += 1
        if time.perf_counter() > deadline:
            break
    return seen


def baselines(url: str, timeout_s: int, total: int) -> None:
    """The pre-0012 computations on the same database: the overview recomputed from the records
    (the code path small windows still take), the review queue and task statistics scanning
    every record in Python (stopped after `timeout_s`, the rate extrapolated to all records)."""
    from sqlalchemy import event

    from service.store import AuditStore as Store
    from service.ui import queries

    store = Store(url)
    event.listen(store.engine, "connect",
                 lambda conn, _: conn.execute(f"SET statement_timeout = {timeout_s * 1000}"))
    store.engine.dispose()
    try:
        started = time.perf_counter()
        try:
            queries.overview(store, queries.OverviewFilter(), exact_limit=10**12)
            print(f"{'baseline':12} {'overview, last 7 days, recomputed from the records':58} "
                  f"{(time.perf_counter() - started) * 1000:9.1f}", flush=True)
        except Exception as exc:  # the statement timeout
            print(f"{'baseline':12} overview recomputed from the records: stopped after "
                  f"{time.perf_counter() - started:.0f} s ({type(exc).__name__})", flush=True)
        for label, scan in (("review queue", _old_review_scan), ("task statistics", _old_task_scan)):
            started = time.perf_counter()
            seen = scan(store, started + timeout_s)
            took = time.perf_counter() - started
            whole = took * int(total) / max(seen, 1)
            print(f"{'baseline':12} {label + ' scanning records in Python (pre-0012)':58} "
                  f"{took * 1000 if seen >= total else whole * 1000:9.1f}"
                  f"{'' if seen >= total else f'  (extrapolated: {seen:,} records in {took:.0f} s)'}", flush=True)
    finally:
        store.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--batch", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--keep", action="store_true", help="keep the database (named in the output)")
    parser.add_argument("--reuse", help="time an existing database of an earlier --keep run (no fill)")
    parser.add_argument("--baseline-timeout", type=int, default=120)
    parser.add_argument("--name", help="fill a database of this name and keep it (e.g. assay_audit10m)")
    parser.add_argument("--fill-only", action="store_true", help="fill (and keep) the database, time nothing")
    parser.add_argument("--copy", action="store_true",
                        help="COPY records generated in Python instead of generating them in the database")
    parser.add_argument("--through-trigger", action="store_true",
                        help="COPY every batch through the insert trigger instead of the bulk load")
    args = parser.parse_args()
    admin_url = os.environ.get("ASSAY_TEST_POSTGRES_URL") or subprocess.run(
        ["scripts/postgres.sh", "start"], capture_output=True, text=True, check=True).stdout.strip()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = args.reuse or args.name or f"assay_scale_bench_{uuid.uuid4().hex[:8]}"
    if args.name or args.fill_only:
        args.keep = True
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    print(f"load average before: {load()} (a machine shared by 7 helpers); database {name}", flush=True)
    server = None
    try:
        if not args.reuse:
            with admin.connect() as conn:
                conn.execute(text(f"CREATE DATABASE {name}"))
            AuditStore(url).engine.dispose()
            took = fill(url, args.rows, args.days, args.batch, args.seed, not args.through_trigger, not args.copy)
            how = "through the trigger" if args.through_trigger else "in bulk (trigger and indexes off, then built)"
            source = "COPY of Python-generated rows" if args.copy else "INSERT ... SELECT generated in the database"
            print(f"filled {args.rows:,} records by {source} {how} in {took:.0f} s "
                  f"({args.rows / took:,.0f} records/s), load average {load()}", flush=True)
            trigger_cost(url, 20_000, args.seed)
            if args.fill_only:
                return
        else:
            from service import migrations
            engine = create_engine(url)
            before, after = migrations.upgrade(engine)  # a database kept by an earlier revision
            engine.dispose()
            if before != after:
                print(f"upgraded {name} from revision {before} to {after}", flush=True)
        engine = create_engine(url)
        with engine.connect() as conn:
            total = conn.execute(text("SELECT sum(n) FROM rollup_hours WHERE kind = 'verdict'")).scalar()
            size = conn.execute(text("SELECT pg_size_pretty(pg_database_size(current_database()))")).scalar()
            sample = dict(conn.execute(text(
                "SELECT * FROM records WHERE group_id IS NOT NULL AND task_id IS NOT NULL "
                "AND created_at > now() - interval '2 days' ORDER BY created_at DESC LIMIT 1")).one()._mapping)
            run_row = conn.execute(text("SELECT run_id FROM records WHERE run_id IS NOT NULL LIMIT 1")).scalar()
        engine.dispose()
        print(f"{total:,} records in the rollups; database size {size}")
        workdir = Path(f"/tmp/{name}")
        workdir.mkdir(exist_ok=True)
        server = LiveServer(workdir, env={"ASSAY_DATABASE_URL": url})
        client = httpx.Client(base_url=server.url, timeout=600)
        form = client.get("/ui/").text
        token = re.search(r'name="csrf_token" value="([^"]*)"', form).group(1)
        assert client.post("/ui/sign-in", data={"api_key": server.create_key("audit,review"), "csrf_token": token}
                           ).status_code == 303
        api = server.client(server.create_key("audit,review"), timeout=600)
        timer = Timer(client, api, args.repeat)
        since_1d = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
        since_6h = (datetime.now(UTC) - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M")
        print(f"{'kind':12} {'case':58} {'median ms':>9} {'worst ms':>9} {'target':>7}")
        timer.time("http floor", "GET /readyz", "/readyz", api=True)
        t = TARGETS["overview"]
        timer.time("ui overview", "/ui/ (default: last 7 days)", "/ui/", target=t)
        timer.time("ui overview", "/ui/?since=2000-01-01 (all records)", "/ui/?since=2000-01-01", target=t)
        timer.time("ui overview", "last day, verifier=code", f"/ui/?since={since_1d}&verifier=code", target=t)
        timer.time("ui overview", "last 6 hours (15-min buckets: from the records)", f"/ui/?since={since_6h}")
        t = TARGETS["records"]
        timer.time("ui records", "/ui/records (first page)", "/ui/records", target=t)
        viewer_filter_pairs(timer, sample, since_1d)
        timer.time("ui record", "/ui/records/{id}", f"/ui/records/{sample['id']}", target=t)
        timer.time("ui group", "/ui/groups/{id}",
                   f"/ui/groups/{sample['group_id']}?key={sample['caller_key_id']}", target=t)
        timer.time("ui task", "/ui/tasks/{hash}", f"/ui/tasks/{sample['task_hash']}", target=t)
        timer.time("ui review", "/ui/review", "/ui/review", target=TARGETS["review"])
        timer.time("ui review", "/ui/review?flag=forbidden_tool", "/ui/review?flag=forbidden_tool",
                   target=TARGETS["review"])
        timer.time("ui evals", "/ui/evals", "/ui/evals", target=t)
        timer.time("ui runs", "/ui/runs", "/ui/runs")
        timer.time("ui runs", "/ui/runs/{id}", f"/ui/runs/{run_row}")
        timer.time("ui verifiers", "/ui/verifiers", "/ui/verifiers")
        timer.time("api record", "/v1/records/{id}", f"/v1/records/{sample['id']}", api=True, target=t)
        record_filter_combinations(timer, sample, since_1d)
        mid = None
        with server.client(api.headers["authorization"].removeprefix("Bearer ")) as c:
            page = c.get("/v1/records", params={"limit": 1000, "after": total // 2}).json()
            mid = page["next_cursor"]
        timer.time("api records", f"keyset page after seq {mid}", f"/v1/records?after={mid}&limit=100", api=True,
                   target=t)
        t = TARGETS["review"]
        timer.time("api review", "/v1/review/queue?n=30", "/v1/review/queue?n=30", api=True, target=t)
        timer.time("api review", "/v1/review/queue?n=30&verifier=code", "/v1/review/queue?n=30&verifier=code",
                   api=True, target=t)
        timer.time("api review", "/v1/review/queue?flag=exits_process", "/v1/review/queue?n=30&flag=exits_process",
                   api=True, target=t)
        timer.time("api review", "/v1/review/summary", "/v1/review/summary", api=True)
        t = TARGETS["task_stats"]
        timer.time("api tasks", "/v1/tasks/stats (all tasks, first 1000)", "/v1/tasks/stats", api=True, target=t)
        timer.time("api tasks", "/v1/tasks/stats?verifier=proof", "/v1/tasks/stats?verifier=proof", api=True,
                   target=t)
        timer.time("api tasks", "/v1/tasks/stats?task_hash=...", f"/v1/tasks/stats?task_hash={sample['task_hash']}",
                   api=True, target=t)
        timer.time("api tasks", "/v1/tasks/stats?since=<1 day ago> (from the records)",
                   f"/v1/tasks/stats?since={since_1d}", api=True, target=t)
        timer.time("api runs", "/v1/runs", "/v1/runs", api=True)
        timer.time("api runs", "/v1/runs/{id}", f"/v1/runs/{run_row}", api=True)
        export_rate(server, api, {"verifier": "proof"})
        export_rate(server, api, {"since": since_1d})
        baselines(url, args.baseline_timeout, total)
        over = [r for r in timer.results if r[4] is not None and r[2] > r[4]]
        print(f"{len(over)} timed cases over their target; load average after: {load()}")
        client.close()
        api.close()
    finally:
        if server is not None:
            server.stop()
        if not args.keep and not args.reuse:
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


if __name__ == "__main__":
    main()
