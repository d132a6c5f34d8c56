"""Human review of decisions: append-only labels, a stratified queue of unlabelled
records, and each verifier's error rates estimated from the labels."""

from __future__ import annotations

import math
import random
import uuid

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
from service.store import AuditStore, LabelRow, RecordRow

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
    if row.verdict == ERROR_VERDICT:
        return None  # infrastructure failures are not decisions to review
    flags = row.flags or []
    if (flag in flags) if flag is not None else bool(flags):
        return "flagged"
    if flag is not None:
        return None
    return "correct_unflagged" if row.verdict == "correct" else "incorrect"


def review_queue(store: AuditStore, verifier: str | None, flag: str | None, n: int,
                 seed: int | None = None) -> tuple[list[tuple[Stratum, RecordRow]], dict[str, int]]:
    """A stratified sample of unlabelled records: each stratum gets an equal share of n
    (what one stratum lacks goes to the others), sampled uniformly by reservoir."""
    labelled = store.labelled_record_ids()
    rng = random.Random(seed)
    reservoirs: dict[Stratum, list[RecordRow]] = {s: [] for s in STRATA}
    seen: dict[Stratum, int] = dict.fromkeys(STRATA, 0)
    for row in store.iter_all(verifier=verifier):
        if row.id in labelled:
            continue
        stratum = stratum_of(row, flag)
        if stratum is None:
            continue
        seen[stratum] += 1
        pool = reservoirs[stratum]
        if len(pool) < n:
            pool.append(row)
        else:
            j = rng.randrange(seen[stratum])
            if j < n:
                pool[j] = row
    quotas = _quotas(n, {s: len(reservoirs[s]) for s in STRATA})
    return [(s, row) for s in STRATA for row in reservoirs[s][:quotas[s]]], dict(seen)


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
    with another verdict, says the verdict was wrong)."""
    labels = store.labels(verifier=verifier)
    latest = {row.record_id: row for row in labels}  # write order: the last label stands
    records = store.records_by_ids(list(latest))
    label_counts: dict[str, int] = {}
    for row in labels:
        if row.record_id in records:
            name = records[row.record_id].verifier
            label_counts[name] = label_counts.get(name, 0) + 1
    tallies: dict[str, dict[str, list[int]]] = {}
    for record_id, label in latest.items():
        record = records.get(record_id)
        if record is None:
            continue
        t = tallies.setdefault(record.verifier, {"correct": [0, 0], "incorrect": [0, 0], "flagged": [0, 0]})
        wrong = label.label == "exploit" or (label.label == "disagree" and label.corrected_verdict != record.verdict)
        if record.verdict in ("correct", "incorrect"):
            t[record.verdict][0] += wrong
            t[record.verdict][1] += 1
        if record.flags:
            t["flagged"][0] += label.label == "exploit"
            t["flagged"][1] += 1
    return ReviewSummary(verifiers={
        name: VerifierReview(labels=label_counts[name], correct_false_positive=rate(*t["correct"]),
                             incorrect_false_negative=rate(*t["incorrect"]),
                             flagged_exploit_share=rate(*t["flagged"]))
        for name, t in sorted(tallies.items())
    })
