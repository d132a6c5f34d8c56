"""What a fresh process pays once per database connection, paid at start instead (issue 27).

A Postgres backend loads the catalog entries of every table and index a statement's plan
considers the first time it plans one, and the records table is partitioned by day: about
30 partitions with a dozen indexes each at a month's retention. A new connection's first
statement over `records` paid that (60-100 ms at 1M records, more with cold catalog pages),
and a fresh server opens its pool's connections one request at a time, so the first reads
after a start were the slowest (a run page's worst first read, the review page's). The
service opens its pool at start, before it says ready, and plans one statement over
`records` (and the small tables the viewer joins) on each connection: the plans are not
kept, the catalog caches they fill are.

SQLite has no per-connection catalog to load: nothing is done there.
"""

from __future__ import annotations

import logging
import time

from service.store import AuditStore

log = logging.getLogger("assay.warm_up")

# EXPLAIN (plan only, nothing read): each names the tables a viewer or API read joins, with a
# filter no partition key prunes, so every partition and each of its indexes is considered.
_PLANS = (
    "EXPLAIN SELECT r.seq FROM records r JOIN record_keys k ON k.record_id = r.id AND k.created_at = r.created_at "
    "JOIN labels l ON l.record_id = r.id WHERE r.verifier = '' AND r.verdict = '' ORDER BY r.reward DESC LIMIT 1",
)


def warm_connections(store: AuditStore) -> float:
    """Open the store's pool (all its pooled connections at once, so the pool keeps them all)
    and plan the viewer's statements on each; the seconds it took."""
    engine = store.engine
    if engine.dialect.name != "postgresql":
        return 0.0
    started = time.perf_counter()
    size = getattr(engine.pool, "size", lambda: 1)()
    connections = []
    try:
        for _ in range(size):
            connections.append(engine.connect())
        for connection in connections:
            for statement in _PLANS:
                connection.exec_driver_sql(statement).all()
            connection.rollback()
    finally:
        for connection in connections:
            connection.close()
    took = time.perf_counter() - started
    log.info("opened %d database connections and planned the viewer's reads on each in %.2f s", size, took)
    return took
