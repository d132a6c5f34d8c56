"""Human review of decisions: append-only labels, a stratified queue of unlabelled
records, and each verifier's error rates estimated from the labels."""

from __future__ import annotations

import math
import random
import uuid
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, and_, bindparam, case, func, literal_column, or_, select, true, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import aliased

from service import audit_partitions
from service.auth import Caller
from service.errors import LabelLimit, RecordNotFound
from service.inspection_schemas import (
    LabelIn,
    LabelOut,
    Rate,
    ReviewSummary,
    Stratum,
    VerifierReview,
)
from service.store import AuditStore
from service.tables import LabelledRecordRow, LabelRow, RecordRow, RollupHourRow

WILSON_Z = 1.959964  # two-sided 95%
STRATA: tuple[Stratum, ...] = ("flagged", "correct_unflagged", "incorrect")
ERROR_VERDICT = "error"


def wilson_interval(hits: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion (None without observations)."""
    if n <= 0:
        return None
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(hits: int, n: int) -> Rate:
    return Rate(labelled=n, hits=hits, rate=hits / n if n else None, interval=wilson_interval(hits, n))


def label_out(row: LabelRow) -> LabelOut:
    return LabelOut(id=row.id, record_id=row.record_id, created_at=row.created_at, author=row.author,
                    label=row.label, corrected_verdict=row.corrected_verdict, pattern=row.pattern, note=row.note)


MAX_LABELS_PER_RECORD = 100


def add_label(store: AuditStore, record_id: str, body: LabelIn, caller: Caller,
              max_labels: int = MAX_LABELS_PER_RECORD) -> LabelOut:
    if store.record(record_id) is None:
        raise RecordNotFound(f"record {record_id!r} not found")
    if len(store.labels([record_id])) >= max_labels:
        raise LabelLimit(f"record {record_id!r} already carries {max_labels} labels (max_labels_per_record)")
    row = LabelRow(id=uuid.uuid4().hex, record_id=record_id, author=caller.author, author_key_id=caller.key_id,
                   label=body.label, corrected_verdict=body.corrected_verdict, pattern=body.pattern, note=body.note)
    store.add_label(row)
    return label_out(row)


def record_labels(store: AuditStore, record_id: str) -> list[LabelOut]:
    if store.record(record_id) is None:
        raise RecordNotFound(f"record {record_id!r} not found")
    return [label_out(row) for row in store.labels([record_id])]


def stratum_of(row: RecordRow, flag: str | None) -> Stratum | None:
    return _stratum(row.verdict, row.flags, flag)


def _stratum(verdict: str, flags: list[str] | None, flag: str | None) -> Stratum | None:
    if verdict == ERROR_VERDICT:
        return None  # infrastructure failures are not decisions to review
    flags = flags or []
    if (flag in flags) if flag is not None else bool(flags):
        return "flagged"
    if flag is not None:
        return None
    return "correct_unflagged" if verdict == "correct" else "incorrect"


# A stratum with at most this many unlabelled records is sampled exactly (its ids read through
# the indexes, then sampled); a larger one by probes (`_probe_sample`).
SMALL_STRATUM = 2000


def review_queue(store: AuditStore, verifier: str | None, flag: str | None, n: int,
                 seed: int | None = None) -> tuple[list[tuple[Stratum, RecordRow]], dict[str, int]]:
    """A stratified sample of unlabelled records: each stratum gets an equal share of n
    (what one stratum lacks goes to the others), drawn at random. No scan of the records:
    the strata's sizes come from the hourly rollups less the labelled records; a stratum
    of up to SMALL_STRATUM records is sampled uniformly from its ids, a larger one by probes."""
    rng = random.Random(seed)
    strata = [s for s in STRATA if flag is None or s == "flagged"]
    per_hour = _stratum_hours(store, verifier, flag)
    labelled = _labelled_strata(store, verifier, flag)
    seen: dict[Stratum, int] = dict.fromkeys(STRATA, 0)
    for s in strata:
        seen[s] = max(0, sum(per_hour[s].values()) - labelled[s])
    quotas = _quotas(n, {s: min(n, seen[s]) for s in STRATA})
    picked: list[tuple[Stratum, RecordRow]] = []
    for s in STRATA:
        if quotas[s] == 0:
            continue
        condition = _stratum_condition(store, s, verifier, flag)
        if seen[s] <= SMALL_STRATUM:
            rows = _exact_sample(store, condition, quotas[s], rng)
        else:
            rows = _probe_sample(store, condition, per_hour[s], quotas[s], rng, flagged=s == "flagged",
                                 any_label=_stratum_condition(store, s, verifier, flag, unlabelled=False),
                                 labelled={v[3] for v in _labelled_records(store).values()})
        picked += [(s, row) for row in rows]
    return picked, dict(seen)


def _stratum_hours(store: AuditStore, verifier: str | None, flag: str | None) -> dict[Stratum, dict[int, int]]:
    """Per stratum, its records per hour (labelled ones included), from the rollups."""
    stmt = select(RollupHourRow.key, RollupHourRow.hour, func.sum(RollupHourRow.n))
    if flag is None:
        stmt = stmt.where(RollupHourRow.kind == "stratum")
    else:
        stmt = stmt.where(RollupHourRow.kind == "flag_review", RollupHourRow.key == flag)
    if verifier is not None:
        stmt = stmt.where(RollupHourRow.verifier == verifier)
    out: dict[Stratum, dict[int, int]] = {s: {} for s in STRATA}
    with store.db() as s:
        for key, hour, count in s.execute(stmt.group_by(RollupHourRow.key, RollupHourRow.hour)):
            out["flagged" if flag is not None else key][int(hour)] = int(count)
    return out


def _labelled_strata(store: AuditStore, verifier: str | None, flag: str | None) -> dict[Stratum, int]:
    """How many labelled records each stratum holds (labels are few: their records' verifier,
    verdict and flags are read once and kept, see `_labelled_records`)."""
    counts: dict[Stratum, int] = dict.fromkeys(STRATA, 0)
    for record_verifier, verdict, flags, _ in _labelled_records(store).values():
        if verifier is not None and record_verifier != verifier:
            continue
        stratum = _stratum(verdict, flags, flag)  # not through a RecordRow: ~20 us each, 5k labels
        if stratum is not None:
            counts[stratum] += 1
    return counts


# Per store: (labels counted, their highest seq, the records' extent, {record id: (verifier,
# verdict, flags, seq)}) of the labelled records. Labels are append-only and records immutable, so
# new labels are added to it; anything else (a label committed out of seq order, records
# archived) reads it again.
_LABELLED: weakref.WeakKeyDictionary[AuditStore, tuple[int, int, Any, dict[str, tuple]]] = \
    weakref.WeakKeyDictionary()


def _labelled_records(store: AuditStore) -> dict[str, tuple]:
    cached = _LABELLED.get(store)
    top = cached[1] if cached is not None else -1
    with store.db() as s:
        count, old, highest = s.execute(select(func.count(), func.count().filter(LabelRow.seq <= top),
                                               func.max(LabelRow.seq))).one()
        # Records archived since (service/audit_archive.py): partitions dropped or rows deleted.
        lowest = (tuple(audit_partitions.day_partitions(s.connection())) if audit_partitions.is_partitioned_store(store)
                  else s.scalar(select(func.min(RecordRow.seq))))
        if cached is not None and cached[0] == old and cached[2] == lowest:
            if count == old:
                return cached[3]
            rows, since = dict(cached[3]), top
        else:
            rows, since = {}, None
        rows.update(_records_of_labels(store, s, since))
    _LABELLED[store] = (count, highest if highest is not None else -1, lowest, rows)
    return rows


def _records_of_labels(store: AuditStore, s: Any, since: int | None) -> dict[str, tuple]:
    """The labelled records (those labelled after label seq `since`), from `labelled_records`
    (revision 0020: one small table, not a read of each record from its day's partition)."""
    stmt = select(LabelledRecordRow.record_id, LabelledRecordRow.verifier, LabelledRecordRow.verdict,
                  LabelledRecordRow.flags, LabelledRecordRow.seq)
    if since is not None:
        stmt = stmt.where(LabelledRecordRow.record_id.in_(select(LabelRow.record_id).where(LabelRow.seq > since)))
    return {record_id: (verifier, verdict, flags, seq) for record_id, verifier, verdict, flags, seq in s.execute(stmt)}


def _stratum_condition(store: AuditStore, stratum: Stratum, verifier: str | None, flag: str | None,
                       unlabelled: bool = True) -> Any:
    """The stratum's records; `unlabelled=False`: labelled ones too (the probes leave those out
    themselves, see `_probe_sample`)."""
    flagged = store.has_flag(flag) if flag is not None else _FLAGGED
    unflagged = func.json_array_length(RecordRow.flags) == 0
    by_stratum = {"flagged": flagged, "correct_unflagged": and_(RecordRow.verdict == "correct", unflagged),
                  "incorrect": and_(RecordRow.verdict != "correct", unflagged)}
    parts = [RecordRow.verdict != ERROR_VERDICT, by_stratum[stratum]]
    if unlabelled:
        # NOT IN (labels): one hashed set of the few labelled ids checked per record, so a
        # probe's index walk stops at its first unlabelled match (NOT EXISTS was planned
        # as an anti join that read the rest of the probe's hour first).
        parts.append(RecordRow.id.not_in(select(LabelRow.record_id)))
    if verifier is not None:
        parts.append(RecordRow.verifier == verifier)
    return and_(*parts)


# As written in the flagged records' partial index (revision 0014), not a parameter.
_FLAGGED = func.json_array_length(RecordRow.flags) > literal_column("0")


def _exact_sample(store: AuditStore, condition: Any, k: int, rng: random.Random) -> list[RecordRow]:
    with store.db() as s:
        seqs = sorted(s.scalars(select(RecordRow.seq).where(condition)))
        chosen = rng.sample(seqs, min(k, len(seqs)))
        found = {r.seq: r for r in s.scalars(select(RecordRow).where(RecordRow.seq.in_(chosen)))} if chosen else {}
    return [found[q] for q in chosen if q in found]


PROBE_ATTEMPTS = 2  # probes per wanted record, in one statement (a second round if too few hit)
# Matches a probe reads after its moment; the first unlabelled one is taken. The labels are not
# checked in SQL (a NOT IN over every label, rebuilt for each partition a probe touches, was most
# of a probe's time at 10M records: ~60-85 of ~90 ms a statement); labelled records are few, and
# the last round of a stratum still short of its quota checks them in SQL (`any_label` None).
PROBE_TAKE = 2


def _probe_sample(store: AuditStore, condition: Any, per_hour: dict[int, int], k: int,
                  rng: random.Random, flagged: bool = False, any_label: Any = None,
                  labelled: set[int] | None = None) -> list[RecordRow]:
    """k distinct records: an hour drawn in proportion to the stratum's records in it (exact,
    from the rollups), then the first unlabelled matching record after a uniform moment of that
    hour (a probe that finds none is drawn again, in a later round). Close to uniform: within an
    hour, a record after a longer quiet spell is a little likelier. All probes of a round go to
    the database as one statement of index lookups. `any_label`: the stratum's condition without
    the labels, with `labelled` the labelled records' seqs to leave out here (rounds but the last)."""
    hours = sorted(h for h, c in per_hour.items() if c > 0)
    if not hours:
        return []
    weights = [per_hour[h] for h in hours]
    picked: dict[int, datetime] = {}
    rounds = 4 if any_label is not None else 3
    for round_ in range(rounds):
        windows = []
        for _ in range((k - len(picked)) * PROBE_ATTEMPTS):
            hour = rng.choices(hours, weights)[0]
            start = datetime.fromtimestamp(hour * 3600, UTC)
            windows.append((start + timedelta(seconds=rng.random() * 3600), start + timedelta(hours=1)))
        if any_label is not None and round_ < rounds - 1:
            found = _probe(store, any_label, windows, flagged, take=PROBE_TAKE, skip=labelled or set())
        else:
            found = _probe(store, condition, windows, flagged)
        for seq, moment in found:
            if seq not in picked and len(picked) < k:
                picked[seq] = moment
        if len(picked) == k:
            break
    if not picked:
        return []
    stmt = select(RecordRow).where(RecordRow.seq.in_(list(picked)))
    if store.engine.dialect.name == "postgresql":  # only the partitions of those days
        stmt = stmt.where(RecordRow.created_at.in_(sorted(set(picked.values()))))
    with store.db() as s:
        rows = {r.seq: r for r in s.scalars(stmt)}
    return [rows[q] for q in picked if q in rows]


def _probe(store: AuditStore, condition: Any, windows: list[tuple[datetime, datetime]],
           flagged: bool = False, take: int = 1, skip: set[int] | None = None) -> list[tuple[int, datetime]]:
    """(seq, created_at) of the first record meeting `condition` in each window [lo, hi), if any, in
    window order: one statement of index lookups (Postgres: one lateral subquery over the windows,
    each pruned to its day's partition when run; SQLite: a UNION ALL of the probes).
    `flagged` (Postgres): the condition holds only for flagged records, which are few, so the
    probe walks the flagged records' partial index (by seq) from the window's first record on,
    rather than every record of the window by time until one matches (about 680 records a
    probe for a flag on 0.15% of the records). `take`: each probe reads up to that many
    matches and keeps the first whose seq is not in `skip` (by seq, not id: the flagged probe
    then reads the partial index alone, no heap fetch per walked entry)."""
    if not windows:
        return []
    if store.engine.dialect.name == "postgresql":
        moment = DateTime(timezone=True)
        w = func.unnest(bindparam("lo", [lo for lo, _ in windows], type_=ARRAY(moment)),
                        bindparam("hi", [hi for _, hi in windows], type_=ARRAY(moment))
                        ).table_valued("lo", "hi", with_ordinality="n").render_derived()
        in_window = and_(RecordRow.created_at >= w.c.lo, RecordRow.created_at < w.c.hi)
        if flagged:
            e = aliased(RecordRow)  # the window's first record, whatever its flags
            start = (select(e.seq).where(e.created_at >= w.c.lo, e.created_at < w.c.hi).order_by(e.created_at)
                     .limit(1).correlate_except(e).scalar_subquery())
            first = (select(RecordRow.seq, RecordRow.created_at)
                     .where(condition, _FLAGGED, in_window, RecordRow.seq >= start)
                     .order_by(RecordRow.seq).limit(take).lateral("first"))
        else:
            first = (select(RecordRow.seq, RecordRow.created_at)
                     .where(condition, in_window)
                     .order_by(RecordRow.created_at).limit(take).lateral("first"))
        within = (first.c.seq,) if flagged else (first.c.created_at, first.c.seq)  # the probe's own order
        stmt = (select(w.c.n, first.c.seq, first.c.created_at).select_from(w).join(first, true())
                .order_by(w.c.n, *within))
    else:
        stmt = union_all(*(select(literal_column(str(i)).label("n"), RecordRow.seq.label("seq"),
                                  RecordRow.created_at.label("created_at"))
                           .where(condition, RecordRow.created_at >= lo, RecordRow.created_at < hi)
                           .order_by(RecordRow.created_at).limit(take).subquery().select()
                           for i, (lo, hi) in enumerate(windows)))
    found: dict[Any, tuple[int, datetime]] = {}
    with store.db() as s:
        for row in s.execute(stmt):  # in window order, each window's matches in the probe's order
            if row.n not in found and (skip is None or row.seq not in skip):
                found[row.n] = (row.seq, row.created_at)
    return list(found.values())


def _quotas(n: int, available: dict[Stratum, int]) -> dict[Stratum, int]:
    quotas: dict[Stratum, int] = dict.fromkeys(available, 0)
    left = n
    while left > 0:
        open_strata = [s for s in available if quotas[s] < available[s]]
        if not open_strata:
            break
        for s in open_strata:
            if left == 0:
                break
            quotas[s] += 1
            left -= 1
    return quotas


def review_summary(store: AuditStore, verifier: str | None = None) -> ReviewSummary:
    """Per verifier, from each labelled record's latest label (`exploit`, or `disagree`
    with another verdict, says the verdict was wrong). One statement: the labels ranked per
    record, joined to `labelled_records` (revision 0020: each labelled record's verdict and
    flags in one small table, archived records left out as archiving removes them), tallied
    per verifier by the database. Not a read of each labelled record from its day's
    partition: at 10M records that first read took 0.2-1.6 s with the pages on disk."""
    ranked = select(LabelRow.record_id.label("record_id"), LabelRow.label.label("label"),
                    LabelRow.corrected_verdict.label("corrected"),
                    func.row_number().over(partition_by=LabelRow.record_id, order_by=LabelRow.seq.desc()).label("rn"),
                    func.count().over(partition_by=LabelRow.record_id).label("labels")).subquery()
    latest = select(ranked).where(ranked.c.rn == 1).subquery()
    record = LabelledRecordRow
    joined = latest.join(record, record.record_id == latest.c.record_id)
    wrong = or_(latest.c.label == "exploit",
                and_(latest.c.label == "disagree", latest.c.corrected.is_distinct_from(record.verdict)))
    flagged = func.json_array_length(record.flags) > 0

    def count(*conditions: Any) -> Any:
        return func.sum(case((and_(*conditions), 1), else_=0))

    stmt = (select(record.verifier, func.sum(latest.c.labels),
                   count(record.verdict == "correct", wrong), count(record.verdict == "correct"),
                   count(record.verdict == "incorrect", wrong), count(record.verdict == "incorrect"),
                   count(flagged, latest.c.label == "exploit"), count(flagged))
            .select_from(joined).group_by(record.verifier).order_by(record.verifier))
    if verifier is not None:
        stmt = stmt.where(record.verifier == verifier)
    with store.db() as s:
        rows = s.execute(stmt).all()
    return ReviewSummary(verifiers={
        name: VerifierReview(labels=int(labels), correct_false_positive=rate(int(cw), int(cn)),
                             incorrect_false_negative=rate(int(iw), int(i_n)),
                             flagged_exploit_share=rate(int(fe), int(fn)))
        for name, labels, cw, cn, iw, i_n, fe, fn in rows
    })
