"""A run's `reward_up_heldout_down` bootstrap interval kept in the database (revision 0019,
service/bootstrap_store.py): exactly `bootstrap_difference` of the same inputs, read back by a
fresh process (the process memo emptied) from the table, computed once when two readers ask at
once, never stored outside a store's block or when there is no interval."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from service import bootstrap_store
from service.eval_metrics import bootstrap_difference
from service.store import AuditStore
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'boot.db'}"
    return request.getfixturevalue("database")


def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bootstrap_store, "_MEMO", type(bootstrap_store._MEMO)())


def _rows(store: AuditStore) -> list[tuple]:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql("SELECT digest, lo, hi FROM bootstrap_intervals ORDER BY digest").all()


def test_stored_intervals_are_the_bootstrap_of_their_inputs(url: str, monkeypatch: pytest.MonkeyPatch):
    store = AuditStore(url)
    rng = random.Random(12)
    cases = []
    for n, paired in ((1, False), (7, True), (64, False), (333, True), (590, False)):
        a = tuple(rng.choice([0.0, 0.25, 0.5, 1.0, 1 / 3]) for _ in range(n))
        b = tuple(rng.random() for _ in range(n if paired else n + 5))
        cases.append((a, b, paired))
    _fresh_process(monkeypatch)
    with bootstrap_store.kept_in(store):
        first = [bootstrap_store.interval(*c) for c in cases]
    assert first == [bootstrap_difference(*c) for c in cases]
    assert len(_rows(store)) == len(cases)
    # A fresh process reads them: the same floats, and from the table (a changed row is what it reads).
    _fresh_process(monkeypatch)
    with bootstrap_store.kept_in(store):
        assert [bootstrap_store.interval(*c) for c in cases] == first
    key = bootstrap_store.digest(*cases[2])
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE bootstrap_intervals SET lo = -7.5 WHERE digest = :d"), {"d": key})
    _fresh_process(monkeypatch)
    with bootstrap_store.kept_in(store):
        assert bootstrap_store.interval(*cases[2]) == (-7.5, first[2][1])
    # A different input (one float changed in its last bit) is another digest: computed, not read.
    changed = (cases[2][0][:-1] + (cases[2][0][-1] + 2**-50,), cases[2][1], cases[2][2])
    with bootstrap_store.kept_in(store):
        assert bootstrap_store.interval(*changed) == bootstrap_difference(*changed)
    # No interval (an empty side, or pairs of unequal length): nothing stored; outside a block: nothing.
    before = _rows(store)
    with bootstrap_store.kept_in(store):
        assert bootstrap_store.interval((), (1.0,), False) is None
        assert bootstrap_store.interval((1.0,), (1.0, 0.0), True) is None
    _fresh_process(monkeypatch)
    assert bootstrap_store.interval(*cases[0]) == first[0]
    assert _rows(store) == before
    store.close()


def test_two_readers_at_once_store_one_interval(url: str, monkeypatch: pytest.MonkeyPatch):
    store = AuditStore(url)
    rng = random.Random(5)
    a = tuple(rng.random() for _ in range(400))
    b = tuple(rng.random() for _ in range(400))
    _fresh_process(monkeypatch)
    start = threading.Barrier(2)
    got: list[tuple[float, float] | None] = []

    def read() -> None:
        start.wait()
        with bootstrap_store.kept_in(store):
            got.append(bootstrap_store.interval(a, b, True))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [bootstrap_difference(a, b, True)] * 2
    assert [tuple(r[1:]) for r in _rows(store)] == [got[0]]
    store.close()
