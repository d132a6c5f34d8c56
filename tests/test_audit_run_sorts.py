"""A run's records by reward (revision 0022, issue 27 item 3).

At ten million records a records page filtered by a training run and sorted by reward walked the
reward's index over every record and tested each row against the run in the heap: 0.7-1.7 s with
the pages not cached, 5-11 s cached for a verdict against the reward's grain. Revision 0022's index
(run, reward, seq) over the records of runs lets such a page walk the run's own entries in order."""

from __future__ import annotations

import re

import pytest

from service.store import AuditStore
from service.ui.queries import SORTS, RecordFilter
from tests.test_audit_flagged_sorts import keys_plan
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import every_page, fill, pages_agree, stored, url  # noqa: F401  (url: fixture)

EXTRAS = ({}, {"key": "key0"}, {"verdict": "correct"}, {"verifier": "math"}, {"key": "key1", "verdict": "incorrect"})


def test_run_pages_in_every_sort_are_the_records_filtered_by_hand(url: str):  # noqa: F811
    store = AuditStore(url)
    fill(store, seed=41, n_groups=90)
    rows = stored(store)

    def wanted(f: RecordFilter) -> list[str]:
        keep = [r for r in rows if r.run_id == f.run and f.key in (None, r.caller_key_id)
                and f.verdict in (None, r.verdict) and f.verifier in (None, r.verifier)]
        column, descending = SORTS[f.sort]
        keep.sort(key=lambda r: (getattr(r, column.key), r.seq), reverse=descending)
        return [r.id for r in keep]

    assert pages_agree(store, wanted, "run", ("run-a", "no-such-run"), EXTRAS) > 20
    store.engine.dispose()


@pytest.mark.postgres
def test_a_run_page_by_reward_walks_the_runs_own_index(database: str):  # noqa: F811
    """The statement that picks the page's keys, planned with heap scans and sorts made dear (a test
    database is too small for the planner to prefer an index by itself): every partition's keys come
    from the run's reward index alone, in its order, with a verdict, verifier or key filter too (the
    verdict follows the reward: against its grain the walk is long, so it must not touch the heap).
    Before 0022 the only ordered indexes were the reward's own over every record (or every record
    of a verifier), walked with the run and the other filters tested row by row in the heap."""
    store = AuditStore(database)
    fill(store, seed=41, n_groups=40)
    try:
        for sort in ("reward_desc", "reward_asc"):
            for extra in EXTRAS:
                plan, scans = keys_plan(store, RecordFilter(run="run-a", sort=sort, **extra))
                assert scans and all(kind == "Index Only Scan" and "run_id_reward_seq" in index
                                     for kind, index in scans), (sort, extra, plan)
                assert not re.search(r"\bSort\s+\(cost", plan), (sort, extra, plan)
    finally:
        store.engine.dispose()
