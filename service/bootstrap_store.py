"""The bootstrap intervals of the `reward_up_heldout_down` alarm rule, kept for every process
(revision 0019, table `bootstrap_intervals`).

`bootstrap_difference` is seeded, so an interval is a pure function of its inputs (the two
evaluations' per-task pass rates, whether they are paired, the resample count and the seed). A
run page's first read in a fresh process computed it again (2 x 1,000 resamples of ~590 tasks:
0.35-0.5 s at 10M records on the loaded 2-core machine); it is now read by the digest of those
inputs. Two readers storing the same digest at once store the same interval (insert, or nothing
on conflict), so whichever wins, every reader sees the interval the inputs give.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from service.eval_metrics import BOOTSTRAP_SAMPLES, SEED, bootstrap_difference
from service.store import AuditStore
from service.tables import BootstrapIntervalRow

LOG = logging.getLogger(__name__)
_STORE: ContextVar[AuditStore | None] = ContextVar("bootstrap_store", default=None)
_MEMO: OrderedDict[str, tuple[float, float] | None] = OrderedDict()
_LOCK = threading.Lock()
MEMO_SIZE = 256


@contextmanager
def kept_in(store: AuditStore) -> Iterator[None]:
    """Intervals asked for inside this block are read from (and stored in) `store`."""
    token = _STORE.set(store)
    try:
        yield
    finally:
        _STORE.reset(token)


# The version of how `bootstrap_difference` resamples: raise it when that changes, so that
# intervals stored by the old code are computed again (their digests no longer match).
INTERVAL_VERSION = 1


def digest(a: tuple[float, ...], b: tuple[float, ...], paired: bool) -> str:
    """The inputs' identity: every float by its exact repr, the resample count, the seed and
    the resampling's version."""
    return hashlib.sha256(repr((a, b, paired, BOOTSTRAP_SAMPLES, SEED, INTERVAL_VERSION)).encode()).hexdigest()


def interval(a: tuple[float, ...], b: tuple[float, ...], paired: bool) -> tuple[float, float] | None:
    """`bootstrap_difference(a, b, paired)`: from this process's memo, else the store's table
    (inside `kept_in`), else computed (and stored)."""
    key = digest(a, b, paired)
    with _LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    store = _STORE.get()
    found = _read(store, key) if store is not None else None
    value = found if found is not None else bootstrap_difference(a, b, paired)
    if store is not None and found is None and value is not None:
        _write(store, key, value)
    with _LOCK:
        _MEMO[key] = value
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


def _read(store: AuditStore, key: str) -> tuple[float, float] | None:
    t = BootstrapIntervalRow
    try:
        with store.db() as s:
            row = s.execute(select(t.lo, t.hi).where(t.digest == key)).one_or_none()
    except SQLAlchemyError as exc:
        LOG.warning("bootstrap interval not read: %s", exc)
        return None
    return None if row is None else (float(row[0]), float(row[1]))


def _write(store: AuditStore, key: str, value: tuple[float, float]) -> None:
    insert = postgresql_insert if store.engine.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(BootstrapIntervalRow).values([{"digest": key, "lo": value[0], "hi": value[1]}])
    try:
        with store.db() as s:
            s.execute(stmt.on_conflict_do_nothing(index_elements=["digest"]))
            s.commit()
    except SQLAlchemyError as exc:  # read only, or busy: the next process computes it again
        LOG.warning("bootstrap interval not stored: %s", exc)
