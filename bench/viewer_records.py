"""The viewer's records page with 1,000,000 records in Postgres: time to render each page.

    python bench/viewer_records.py [--rows 1000000] [--repeat 7] [--keep]

Makes a throwaway database on the Postgres cluster of scripts/postgres.sh (ASSAY_TEST_POSTGRES_URL),
creates the schema through the audit store, and bulk-inserts `rows` synthetic records with one
INSERT ... SELECT FROM generate_series (4 verifiers, 6 verdicts, groups of 8, 2% flagged, 30 days).
A real server (`assay serve`) then renders /ui/records pages for a signed-in auditor: the first
page, filters (verdict, verifier, flag, task, group, key, time window), sorts, and keyset pages
deep in the set. Each is fetched `repeat` times over HTTP; the median and the worst are printed.

Baseline, in the same run against the same database: the same deep page by OFFSET (what a
naive pager does), timed as the bare SQL query; the ratio says what keyset pagination saves.
The HTTP floor (GET /readyz) is printed too. Read ratios: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.store import AuditStore
from service.tables import RecordRow  # noqa: E402
from service.testing.live import LiveServer  # noqa: E402

FILL = """
INSERT INTO records (id, created_at, request_id, caller_key_id, task_id, task_hash, task_public, verifier,
    verifier_version, response_hash, response, components, reward, verdict, evidence, flags, sandbox_backend,
    usage, duration_ms, group_id, group_index, advantage, group_mean, group_std, group_zero_variance, masked)
SELECT md5('r' || g), now() - ((:rows - g) * interval '2.6 seconds'), NULL, 'key' || (g % 5),
    'task-' || (g / 64), md5('t' || (g / 64)) || md5('u' || (g / 64)),
    json_build_object('answer', (g / 64)::text), (ARRAY['math', 'code', 'sql', 'tool_state'])[1 + (g / 8) % 4], '1',
    md5('h' || g) || md5('i' || g), 'Working: ' || repeat('step ', g % 97) || ' so \\boxed{' || (g % 13) || '}',
    json_build_object('correctness', json_build_object('value', (g % 10 < 5)::int, 'hard', true)),
    CASE WHEN g % 10 < 5 THEN 1.0 - (g % 7) / 100.0 ELSE 0.0 END,
    CASE WHEN g % 10 < 5 THEN 'correct' WHEN g % 10 < 8 THEN 'incorrect' WHEN g % 10 = 8 THEN 'invalid_format'
         WHEN g % 50 = 9 THEN 'error' WHEN g % 50 = 19 THEN 'timeout' ELSE 'violation' END,
    json_build_object('extracted', (g % 13)::text),
    CASE WHEN g % 50 = 7 THEN '["answer_only"]'::json WHEN g % 97 = 3 THEN '["false_step"]'::json ELSE '[]'::json END,
    'process', NULL, 5 + (g % 200) * 1.5, md5('g' || (g / 8)), g % 8, 0.0, 0.5, 0.5, (g / 8) % 9 = 0, false
FROM generate_series(1, :rows) AS g
"""


def timed(client: httpx.Client, url: str, repeat: int) -> tuple[float, float, float, str]:
    """Median and worst wall time over HTTP, the server's median own time (Server-Timing), the body."""
    times, app, body = [], [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        reply = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert reply.status_code == 200, (url, reply.status_code, reply.text[:300])
        match = re.search(r"dur=([0-9.]+)", reply.headers.get("server-timing", ""))
        app.append(float(match.group(1)) if match else float("nan"))
        body = reply.text
    return statistics.median(times), max(times), statistics.median(app), body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the database (named in the output)")
    args = parser.parse_args()
    admin_url = os.environ.get("ASSAY_TEST_POSTGRES_URL") or subprocess.run(
        ["scripts/postgres.sh", "start"], capture_output=True, text=True, check=True).stdout.strip()
    name = f"assay_viewer_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    server = None
    try:
        store = AuditStore(url)
        started = time.perf_counter()
        indexes = list(RecordRow.__table__.indexes)
        with store.engine.begin() as conn:
            for index in indexes:  # a bulk load is faster into a bare table; the indexes come back after
                index.drop(conn)
            conn.execute(text(FILL), {"rows": args.rows})
            for index in indexes:
                index.create(conn)
            conn.execute(text("ANALYZE records"))
        print(f"inserted {args.rows:,} records and built the indexes in {time.perf_counter() - started:.1f} s "
              f"(database {name})")
        with store.engine.connect() as conn:
            mid = conn.execute(text("SELECT seq FROM records ORDER BY seq DESC OFFSET :n LIMIT 1"),
                               {"n": args.rows // 2}).scalar()
        store.engine.dispose()
        workdir = Path(f"/tmp/{name}")
        workdir.mkdir(exist_ok=True)
        server = LiveServer(workdir, env={"ASSAY_DATABASE_URL": url})
        client = httpx.Client(base_url=server.url, timeout=60)
        form = client.get("/ui/").text
        token = re.search(r'name="csrf_token" value="([^"]*)"', form).group(1)
        assert client.post("/ui/sign-in", data={"api_key": server.create_key("audit"), "csrf_token": token}
                           ).status_code == 303
        floor, _, _, _ = timed(client, "/readyz", args.repeat)
        print(f"HTTP floor (GET /readyz): {floor:.1f} ms median")
        since = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 86400))
        cases = [
            ("first page, newest", "/ui/records"),
            ("verdict=error", "/ui/records?verdict=error"),
            ("verifier=sql", "/ui/records?verifier=sql"),
            ("flag=answer_only (2%)", "/ui/records?flag=answer_only"),
            ("flag=absent (0 rows)", "/ui/records?flag=absent"),
            ("task=task-777", "/ui/records?task=task-777"),
            ("group", "/ui/records?group=" + "md5-placeholder"),
            ("key=key3, verdict=timeout", "/ui/records?key=key3&verdict=timeout"),
            ("last 24 h, verifier=code", f"/ui/records?since={since}&verifier=code"),
            ("sort=reward_desc", "/ui/records?sort=reward_desc"),
            ("sort=slowest, verifier=math", "/ui/records?sort=slowest&verifier=math"),
            ("keyset page at record 500,000", f"/ui/records?after={mid}"),
        ]
        with server.client() as api:
            group = api.get("/v1/records", params={"limit": 1}).json()["records"][0]["group_id"]
        cases = [(label, u.replace("md5-placeholder", group)) for label, u in cases]
        print(f"{'page':34} {'median ms':>10} {'worst ms':>10} {'server ms':>10} {'rows':>5}")
        worst_median = 0.0
        for label, page_url in cases:
            median, worst, app, body = timed(client, page_url, args.repeat)
            rows = body.count('data-href="/ui/records/')
            worst_median = max(worst_median, median)
            print(f"{label:34} {median:10.1f} {worst:10.1f} {app:10.1f} {rows:5d}")
        # Deep page: keyset (as the viewer pages) against OFFSET (the naive pager), bare SQL, same depth.
        engine = create_engine(url)
        with engine.connect() as conn:
            def sql_ms(query: str, **params: int) -> float:
                times = []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    conn.execute(text(query), params).all()
                    times.append((time.perf_counter() - started) * 1000)
                return statistics.median(times)
            keyset = sql_ms("SELECT seq, id FROM records WHERE seq < :after ORDER BY seq DESC LIMIT 51", after=mid)
            offset = sql_ms("SELECT seq, id FROM records ORDER BY seq DESC OFFSET :n LIMIT 51", n=args.rows // 2)
        engine.dispose()
        print(f"page at record 500,000, bare SQL: keyset {keyset:.2f} ms, OFFSET {offset:.2f} ms "
              f"(OFFSET / keyset = {offset / max(keyset, 1e-3):.0f}x)")
        overview, _, _, _ = timed(client, "/ui/", 3)
        print(f"overview (/ui/, default window: the last 7 days of {args.rows:,} records): {overview:.0f} ms median")
        whole, _, _, _ = timed(client, "/ui/?since=2000-01-01", 1)
        print(f"overview over all {args.rows:,} records: {whole:.0f} ms")
        print(f"slowest records page median: {worst_median:.1f} ms (target < 300 ms)")
        client.close()
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


if __name__ == "__main__":
    main()
