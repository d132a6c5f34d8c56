"""Read-only queries behind the viewer's pages: filtered keyset pages, groups, overview figures.

Every list is a keyset page over an index (a sort column, then `seq`), so a page costs the
same at record 10 and at record 1,000,000. Aggregates are computed by the database.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import Select, and_, case, cast, distinct, exists, func, literal, select, true, tuple_, union_all
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import aliased
from sqlalchemy.sql.util import ClauseAdapter

from service import audit_partitions
from service.advantages import group_advantages
from service.audit_rollups import HOUR, LATENCY_BINS_PER_E, LATENCY_FLOOR_MS, QUARTER, latency_bin_value
from service.schemas import Verdict
from service.store import AuditStore, in_hours
from service.tables import LabelledRecordRow, LabelRow, RecordKeyRow, RecordRow, RollupHourRow, RollupQuarterRow
from verifiers import registry

PAGE_SIZE = 50
PREVIEW_CHARS = 160
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
LabelFilter = Literal["agree", "disagree", "exploit", "any", "none"]
Sort = Literal["newest", "oldest", "reward_desc", "reward_asc", "slowest", "fastest"]
# sort name -> (column, descending)
SORTS: dict[str, tuple[Any, bool]] = {
    "newest": (RecordRow.seq, True), "oldest": (RecordRow.seq, False),
    "reward_desc": (RecordRow.reward, True), "reward_asc": (RecordRow.reward, False),
    "slowest": (RecordRow.duration_ms, True), "fastest": (RecordRow.duration_ms, False),
}
_HASH = re.compile(r"^[0-9a-f]{64}$")


class QueryForm(BaseModel):
    """A page's query string: every field is optional; blank means 'any'; times are UTC unless marked."""

    model_config = ConfigDict(extra="ignore")

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("since", "until", check_fields=False)
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class RecordFilter(QueryForm):
    """The records page's filter and sort."""

    verifier: str | None = Field(None, max_length=64)
    verdict: Verdict | None = None
    flag: str | None = Field(None, max_length=100)
    task: str | None = Field(None, max_length=200, description="A task id, or a task hash (64 hex digits).")
    group: str | None = Field(None, max_length=64)
    key: str | None = Field(None, max_length=64, description="The caller's API key id.")
    label: LabelFilter | None = Field(None, description="The record's latest label; `none`: not labelled yet.")
    eval: str | None = Field(None, max_length=32, description="Records of this evaluation run.")
    run: str | None = Field(None, max_length=200, description="Records of this training run.")
    step: int | None = Field(None, ge=0, description="With `run`: records of this step.")
    since: datetime | None = None
    until: datetime | None = None
    sort: Sort = "newest"

    def query_items(self, **overrides: Any) -> list[tuple[str, str]]:
        """The filter as query parameters (for links that keep it)."""
        values = {**self.model_dump(exclude_none=True), **overrides}
        out = []
        for name, value in values.items():
            if value is None or (name == "sort" and value == "newest"):
                continue
            out.append((name, value.isoformat() if isinstance(value, datetime) else str(value)))
        return out


def apply_filter(store: AuditStore, stmt: Select, f: RecordFilter) -> Select:
    for column, value in ((RecordRow.verifier, f.verifier), (RecordRow.verdict, f.verdict),
                          (RecordRow.group_id, f.group), (RecordRow.caller_key_id, f.key),
                          (RecordRow.eval_id, f.eval), (RecordRow.run_id, f.run), (RecordRow.run_step, f.step)):
        if value is not None:
            stmt = stmt.where(column == value)
    if f.task is not None:
        stmt = stmt.where(RecordRow.task_hash == f.task if _HASH.match(f.task) else RecordRow.task_id == f.task)
    if f.flag is not None:
        stmt = stmt.where(store.has_flag(f.flag))
    if f.label is not None:
        stmt = stmt.where(_label_condition(f.label, audit_partitions.is_partitioned_store(store)))
    if f.since is not None:
        stmt = stmt.where(RecordRow.created_at >= f.since)
    if f.until is not None:
        stmt = stmt.where(RecordRow.created_at < f.until)
    return stmt


def _label_condition(label: str, partitioned: bool = False) -> Any:
    """Records by their latest label (a later label supersedes; the history stays).

    Partitioned Postgres: labels are few, so the labelled records are looked up from the
    labels (each in its own day's partition: its time from record_keys) rather than the
    labels looked up per record, which walked millions of records for a rare label."""
    if label == "none":
        return ~exists(select(LabelRow.seq).where(LabelRow.record_id == RecordRow.id))
    latest = _latest_labels(label)
    if partitioned:
        keyed = select(RecordKeyRow.record_id, RecordKeyRow.created_at).where(RecordKeyRow.record_id.in_(latest))
        return tuple_(RecordRow.id, RecordRow.created_at).in_(keyed)
    return exists(latest.where(LabelRow.record_id == RecordRow.id))


def _latest_labels(label: str) -> Select:
    """The ids of the records whose latest label is `label` (`any`: every labelled record)."""
    later = aliased(LabelRow)
    latest = select(LabelRow.record_id).where(
        ~exists(select(later.seq).where(later.record_id == LabelRow.record_id, later.seq > LabelRow.seq)))
    return latest if label == "any" else latest.where(LabelRow.label == label)


@dataclass
class RecordPage:
    rows: list[dict[str, Any]]
    next_cursor: str | None


def cursor_value(sort: str, row: dict[str, Any]) -> str:
    column, _ = SORTS[sort]
    return str(row["seq"]) if column is RecordRow.seq else f"{row[column.key]!r}:{row['seq']}"


def after_condition(sort: str, cursor: str) -> Any:
    """WHERE for the keyset page after `cursor` in this sort (ValueError: not such a cursor)."""
    column, descending = SORTS[sort]
    if column is RecordRow.seq:
        seq = _seq(cursor)
        return RecordRow.seq < seq if descending else RecordRow.seq > seq
    value, seq = cursor.rsplit(":", 1)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("the value must be a finite number")
    key = tuple_(column, RecordRow.seq)
    bound = tuple_(number, _seq(seq))
    return key < bound if descending else key > bound


def _seq(text: str) -> int:
    seq = int(text)
    if not 0 <= seq < 2**63:  # a 64-bit integer in both databases
        raise ValueError("the position is out of range")
    return seq


class BadCursor(ValueError):
    pass


def ordering(sort: str) -> list[Any]:
    """ORDER BY for a sort: its column, then seq as the tie-breaker that makes the keyset total."""
    column, descending = SORTS[sort]
    if column is RecordRow.seq:
        return [column.desc() if descending else column.asc()]
    return [column.desc(), RecordRow.seq.desc()] if descending else [column.asc(), RecordRow.seq.asc()]


def record_page(store: AuditStore, f: RecordFilter, after: str | None, limit: int = PAGE_SIZE) -> RecordPage:
    stmt = select(
        RecordRow.seq, RecordRow.id, RecordRow.created_at, RecordRow.verifier, RecordRow.verdict,
        RecordRow.reward, RecordRow.flags, RecordRow.task_id, RecordRow.task_hash, RecordRow.group_id,
        RecordRow.group_index, RecordRow.caller_key_id, RecordRow.duration_ms,
        func.substr(RecordRow.response, 1, PREVIEW_CHARS).label("preview"),
    )
    if f.flag is not None and store.flag_absent(f.flag, verifier=f.verifier, since=f.since, until=f.until):
        return RecordPage([], None)
    if f.label not in (None, "none") and audit_partitions.is_partitioned_store(store) and _few_labels(store):
        return _labelled_page(store, stmt, f, after, limit)
    late = (f.flag is not None or f.eval is not None or (f.run is not None and SORTS[f.sort][0] is RecordRow.reward)) \
        and f.label in (None, "none") and _postgres(store)
    keys = select(RecordRow.seq, RecordRow.created_at) if late else stmt
    keys = _keyset(apply_filter(store, keys, f), f.sort, after, limit)
    with store.db() as s:
        if late:
            # A flag or eval filter on Postgres: the page's keys from the flagged (or evaluation)
            # records' index alone (revision 0014), then only the page's rows read. A run by reward
            # alike, from the run's reward index (revision 0022), however far its filters send it.
            rows = _rows_by_key(s, stmt, f.sort, s.execute(keys).all())
        else:
            rows = [dict(r._mapping) for r in s.execute(keys)]
    return _page(rows, f.sort, limit)


def _keyset(stmt: Select, sort: str, after: str | None, limit: int) -> Select:
    """`stmt` after the cursor, in the sort's order, one row more than the page."""
    if after:
        try:
            stmt = stmt.where(after_condition(sort, after))
        except ValueError as exc:
            raise BadCursor(f"after: not a cursor of this sort ({exc})") from exc
    return stmt.order_by(*ordering(sort)).limit(limit + 1)


def _rows_by_key(s: Any, stmt: Select, sort: str, keys: list[Any]) -> list[dict[str, Any]]:
    """The page's rows by their keys (seq, time). A second statement, not a join with the keys'
    query: the times are constants there, so only their day partitions are planned (a join was
    planned over every partition: ~50-120 ms of planning for ~3 ms of work at 1M records)."""
    if not keys:
        return []
    wanted = {(seq, at) for seq, at in keys}
    found = s.execute(stmt.where(RecordRow.created_at.in_(sorted({at for _, at in wanted})),
                                 RecordRow.seq.in_(sorted({seq for seq, _ in wanted})))
                      .order_by(*ordering(sort))).all()
    return [dict(r._mapping) for r in found if (r.seq, r.created_at) in wanted]


def _page(rows: list[dict[str, Any]], sort: str, limit: int) -> RecordPage:
    more = len(rows) > limit
    rows = rows[:limit]
    return RecordPage(rows, cursor_value(sort, rows[-1]) if more else None)


def _labelled_page(store: AuditStore, stmt: Select, f: RecordFilter, after: str | None, limit: int) -> RecordPage:
    """A label filter on partitioned Postgres, driven from the labels: the page's keys come from
    `labelled_records` (revision 0020: each labelled record's filter and sort fields, one small
    table), filtered, sorted and cut to the page there; then only the page's rows are read.
    Labels are few (a person writes each), so this reads a few thousand small rows where reading
    each labelled record from its day's partition took ~1 s from disk, and a walk down a sort's
    index checked every record against the labels."""
    keys = select(RecordRow.seq, RecordRow.created_at)
    keys = _keyset(apply_filter(store, keys, f.model_copy(update={"label": None})), f.sort, after, limit)
    # The same statement over labelled_records: its columns have the records' names.
    keys = ClauseAdapter(LabelledRecordRow.__table__, adapt_on_names=True).traverse(keys)
    keys = keys.where(LabelledRecordRow.record_id.in_(_latest_labels(f.label)))
    with store.db() as s:
        rows = _rows_by_key(s, stmt, f.sort, s.execute(keys).all())
    return _page(rows, f.sort, limit)


# Up to this many labels, a label page reads each labelled record (~30-50 us apiece when cached);
# beyond, it walks the sort's index and checks each record against the labels instead.
LABEL_DRIVEN_MAX = 50_000


def _few_labels(store: AuditStore) -> bool:
    with store.db() as s:
        capped = select(LabelRow.seq).limit(LABEL_DRIVEN_MAX + 1).subquery()
        return int(s.execute(select(func.count()).select_from(capped)).scalar_one()) <= LABEL_DRIVEN_MAX


def _postgres(store: AuditStore) -> bool:
    return store.engine.dialect.name == "postgresql"


def filter_choices() -> dict[str, list[str]]:
    """Values for the filter drop-downs: the registered verifiers (no scan of the records)."""
    return {"verifiers": registry.names(), "verdicts": list(VERDICTS)}


# ---------------------------------------------------------------------- groups

@dataclass
class GroupView:
    group_id: str
    rows: list[RecordRow]
    advantages: list[float | None]
    mean: float | None
    std: float | None
    zero_variance: bool
    errors: int
    stored: bool = field(default=True)


def group_keys(store: AuditStore, group_id: str, limit: int = 20) -> list[str | None]:
    """The API keys that sent a group with this id (group ids live in their sender's namespace)."""
    with store.db() as s:
        return list(s.scalars(select(RecordRow.caller_key_id).where(RecordRow.group_id == group_id)
                              .distinct().limit(limit)))


def group_view(store: AuditStore, group_id: str, key_id: str | None) -> GroupView | None:
    """The group `group_id` sent by the key `key_id`."""
    with store.db() as s:
        rows = list(s.scalars(select(RecordRow).where(RecordRow.group_id == group_id,
                                                      RecordRow.caller_key_id == key_id)
                              .order_by(RecordRow.group_index, RecordRow.seq)))
    if not rows:
        return None
    errors = sum(r.verdict == "error" or bool(r.masked) for r in rows)
    if all(r.group_zero_variance is not None for r in rows):
        first = rows[0]
        return GroupView(group_id, rows, [r.advantage for r in rows], first.group_mean, first.group_std,
                         bool(first.group_zero_variance), errors)
    # Records written before groups kept their statistics: recompute with the default options.
    stats = group_advantages([r.reward for r in rows], [r.verdict != "error" and not r.masked for r in rows])
    return GroupView(group_id, rows, stats.advantages, stats.mean, stats.std, stats.zero_variance, errors,
                     stored=False)


# -------------------------------------------------------------------- overview

BUCKET_WIDTHS_S = (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400)
MAX_BUCKETS = 48
LENGTH_EDGES = (0, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)
PERCENTILES = (0.5, 0.9, 0.99)


OVERVIEW_DEFAULT_WINDOW = timedelta(days=7)


class OverviewFilter(QueryForm):
    """The overview's window: the last 7 days unless `since` or `until` is given."""

    verifier: str | None = Field(None, max_length=64)
    since: datetime | None = None
    until: datetime | None = None

    @model_validator(mode="after")
    def _default_window(self) -> OverviewFilter:
        if self.since is None and self.until is None:
            self.since = datetime.now(UTC).replace(second=0, microsecond=0) - OVERVIEW_DEFAULT_WINDOW
        return self


def _epoch(store: AuditStore) -> Any:
    if store.engine.dialect.name == "postgresql":
        return func.extract("epoch", RecordRow.created_at)
    return cast(func.strftime("%s", RecordRow.created_at), RecordRow.seq.type)


def _flag_elements(store: AuditStore) -> Any:
    if store.engine.dialect.name == "postgresql":
        return func.jsonb_array_elements_text(cast(RecordRow.flags, JSONB)).table_valued("value").lateral()
    return func.json_each(RecordRow.flags).table_valued("value")


def _bucket_width(lo: datetime | None, hi: datetime | None) -> int:
    if lo is None or hi is None:
        return BUCKET_WIDTHS_S[0]
    span = max((hi - lo).total_seconds(), 1.0)
    return next((w for w in BUCKET_WIDTHS_S if span / w <= MAX_BUCKETS), BUCKET_WIDTHS_S[-1])


def _length_bucket() -> Any:
    length = func.length(RecordRow.response)
    whens = [(length < hi, lo) for lo, hi in zip(LENGTH_EDGES, LENGTH_EDGES[1:], strict=False)]
    return case(*whens, else_=LENGTH_EDGES[-1])


def _percentile(sorted_values: list[float], q: float) -> float:
    position = (len(sorted_values) - 1) * q
    lo, hi = math.floor(position), math.ceil(position)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


# Windows with at most this many records are computed exactly from the records; larger ones
# from the hourly rollups (service/audit_rollups.py), with the partial hours at the edges of
# the window from the records (one statement each); a larger window with sub-hour buckets from
# its records in one statement, counted as the rollups count them. Latency percentiles from
# rollups are read off log-spaced bins (within 5.1%); every count is exact.
OVERVIEW_EXACT_LIMIT = 2_000


def overview(store: AuditStore, f: OverviewFilter, exact_limit: int = OVERVIEW_EXACT_LIMIT) -> dict[str, Any]:
    """Per verifier and time bucket: verdict counts, flag counts, zero-variance groups, latency."""
    cond = _window(f)
    with store.db() as s:
        lo, hi = _first_and_last(s, f, cond)
        width = _bucket_width(lo, hi)
        if lo is not None and _more_than(s, cond, exact_limit):
            if width >= HOUR:
                return _overview_from_rollups(store, s, f, width, RollupHourRow, HOUR)
            if width % QUARTER == 0:  # 15-minute buckets (a window of 4-12 hours): revision 0015
                return _overview_from_rollups(store, s, f, width, RollupQuarterRow, QUARTER)
            # 1- and 5-minute buckets (a window of up to 4 hours): the window's records read once,
            # counted as the rollups count them (latency percentiles from the same bins).
            counts: dict[tuple, int] = {}
            _add_counts(counts, s.execute(_edge_counts(store, cond, width)))
            return _shape(width, *_rollup_rows(counts))
        bucket = func.floor(_epoch(store) / width).label("bucket")
        verdicts, flags, groups, lengths = _raw_counts(store, s, cond, bucket)
        latency = _latency(store, s, cond, bucket)
    return _shape(width, verdicts, flags, groups, lengths, latency)


def _in_window(stmt: Any, f: OverviewFilter) -> Any:
    """The rollup rows of the filter's verifier in the hours its window touches."""
    return in_hours(stmt, f.verifier, f.since, f.until)


def _first_and_last(s: Any, f: OverviewFilter, cond: Any) -> tuple[datetime | None, datetime | None]:
    """The window's first and last record: the rollups name their hours, the records (one
    partition each on Postgres) the moments within them."""
    stmt = select(func.min(RollupHourRow.hour), func.max(RollupHourRow.hour)).where(RollupHourRow.kind == "verdict")
    stmt = _in_window(stmt, f)
    first, last = s.execute(stmt).one()
    if first is None:  # rollups empty: a store written before them? ask the records
        return s.execute(select(func.min(RecordRow.created_at), func.max(RecordRow.created_at)).where(cond)).one()

    def hour_of(h: int) -> Any:
        return and_(RecordRow.created_at >= datetime.fromtimestamp(h * HOUR, UTC),
                    RecordRow.created_at < datetime.fromtimestamp((h + 1) * HOUR, UTC))
    lo = s.scalar(select(func.min(RecordRow.created_at)).where(cond, hour_of(first)))
    hi = s.scalar(select(func.max(RecordRow.created_at)).where(cond, hour_of(last)))
    if lo is None or hi is None:  # the edge hours' records lie outside the window (or were archived)
        return s.execute(select(func.min(RecordRow.created_at), func.max(RecordRow.created_at)).where(cond)).one()
    return lo, hi


def _window(f: OverviewFilter) -> Any:
    where = []
    if f.verifier:
        where.append(RecordRow.verifier == f.verifier)
    if f.since:
        where.append(RecordRow.created_at >= f.since)
    if f.until:
        where.append(RecordRow.created_at < f.until)
    return and_(true(), *where)


def _raw_counts(store: AuditStore, s: Any, cond: Any, bucket: Any) -> tuple[list, list, list, list]:
    verdicts = s.execute(select(RecordRow.verifier, bucket, RecordRow.verdict, func.count())
                         .where(cond).group_by(RecordRow.verifier, bucket, RecordRow.verdict)).all()
    flag = _flag_elements(store)
    flags = s.execute(select(RecordRow.verifier, bucket, flag.c.value, func.count())
                      .select_from(RecordRow).join(flag, true()).where(cond)
                      .group_by(RecordRow.verifier, bucket, flag.c.value)).all()
    # A group is (sender's key, group id): the same id from two keys is two groups.
    group = func.coalesce(RecordRow.caller_key_id, "") + ":" + RecordRow.group_id
    zero_case = case((RecordRow.group_zero_variance.is_(True), group))
    groups = s.execute(select(RecordRow.verifier, bucket, func.count(distinct(group)),
                              func.count(distinct(zero_case)))
                       .where(cond, RecordRow.group_zero_variance.is_not(None))
                       .group_by(RecordRow.verifier, bucket)).all()
    length = _length_bucket().label("length")
    lengths = s.execute(select(RecordRow.verifier, length, func.count(),
                               func.sum(case((RecordRow.verdict == "correct", 1), else_=0)))
                        .where(cond, RecordRow.response.is_not(None), RecordRow.verdict != "error")
                        .group_by(RecordRow.verifier, length)).all()
    return verdicts, flags, groups, lengths


def _hour_range(f: OverviewFilter, unit: int = HOUR) -> tuple[int | None, int | None]:
    """The whole units (hours) inside the window: [first, end) in epoch units (None: unbounded)."""
    first = math.ceil(f.since.timestamp() / unit) if f.since else None
    end = math.floor(f.until.timestamp() / unit) if f.until else None
    return first, end


def _more_than(s: Any, cond: Any, limit: int) -> bool:
    """Whether the window holds more than `limit` records (reads at most limit + 1 index entries)."""
    capped = select(RecordRow.seq).where(cond).limit(limit + 1).subquery()
    return int(s.execute(select(func.count()).select_from(capped)).scalar_one()) > limit


def _overview_from_rollups(store: AuditStore, s: Any, f: OverviewFilter, width: int, table: Any,
                           unit: int) -> dict[str, Any]:
    """From `table` (rollup_hours, unit 3600 s; rollup_quarters, unit 900 s): the whole units
    inside the window added up per bucket, the partial units at its edges from the records."""
    first, end = _hour_range(f, unit)
    at = table.hour if table is RollupHourRow else table.quarter
    bucket = at // (width // unit)
    stmt = select(table.verifier, bucket.label("bucket"), table.kind, table.key, func.sum(table.n))
    if f.verifier:
        stmt = stmt.where(table.verifier == f.verifier)
    if first is not None:
        stmt = stmt.where(at >= first)
    if end is not None:
        stmt = stmt.where(at < end)
    rows = s.execute(stmt.group_by(table.verifier, "bucket", table.kind, table.key)).all()
    counts: dict[tuple, int] = {}
    for verifier, b, kind, key, n in rows:
        k = (kind, verifier, int(b), key)
        counts[k] = counts.get(k, 0) + int(n)
    # The partial units at the window's edges, from the records.
    edges = []
    if f.since is not None and first is not None and first * unit > f.since.timestamp():
        edges.append((f.since, datetime.fromtimestamp(first * unit, UTC)))
    if f.until is not None and end is not None and end * unit < f.until.timestamp():
        edges.append((max(datetime.fromtimestamp(end * unit, UTC), f.since or f.until), f.until))
    for edge_lo, edge_hi in edges:
        cond = and_(true(), RecordRow.created_at >= edge_lo, RecordRow.created_at < edge_hi,
                    *([RecordRow.verifier == f.verifier] if f.verifier else []))
        _add_counts(counts, s.execute(_edge_counts(store, cond, width)))
    return _shape(width, *_rollup_rows(counts))


def _add_counts(counts: dict[tuple, int], rows: Any) -> None:
    for kind, verifier, bb, key, n in rows:
        k = (kind, verifier, int(bb), str(key) if kind != "latency" else str(int(float(key))))
        counts[k] = counts.get(k, 0) + int(n)


def _edge_counts(store: AuditStore, cond: Any, width: int) -> Any:
    """The rollups' counts of the records of a partial hour at the window's edge, in one statement
    that reads those records once: (kind, verifier, bucket, key, n) rows; lengths in bucket 0."""
    bucket = func.floor(_epoch(store) / width)
    group = func.coalesce(RecordRow.caller_key_id, "") + ":" + RecordRow.group_id
    bin_ = func.floor(func.ln(_greatest(store, RecordRow.duration_ms, LATENCY_FLOOR_MS)) * LATENCY_BINS_PER_E)
    judged = and_(RecordRow.response.is_not(None), RecordRow.verdict != "error")
    edge = select(RecordRow.verifier.label("verifier"), bucket.label("bucket"), RecordRow.verdict.label("verdict"),
                  RecordRow.flags.label("flags"), group.label("grp"),
                  RecordRow.group_zero_variance.label("zv"), bin_.label("bin"),
                  case((judged, _length_bucket())).label("band")).where(cond).cte("edge")
    if store.engine.dialect.name == "postgresql":
        edge = edge.prefix_with("MATERIALIZED")
        flag = func.jsonb_array_elements_text(cast(edge.c.flags, JSONB)).table_valued("value").lateral()
    else:
        flag = func.json_each(edge.c.flags).table_valued("value")
    c, text_ = edge.c, RecordRow.verdict.type

    def kind(name: str) -> Any:
        return literal(name, text_).label("kind")
    with_groups = c.zv.is_not(None)
    zero_group = case((and_(with_groups, c.zv.is_(True)), c.grp))
    parts = [
        select(kind("verdict"), c.verifier, c.bucket, cast(c.verdict, text_).label("key"), func.count())
        .group_by(c.verifier, c.bucket, c.verdict),
        select(kind("flag"), c.verifier, c.bucket, cast(flag.c.value, text_), func.count())
        .select_from(edge).join(flag, true()).group_by(c.verifier, c.bucket, flag.c.value),
        select(kind("groups"), c.verifier, c.bucket, literal("", text_), func.count(distinct(c.grp)))
        .where(with_groups).group_by(c.verifier, c.bucket),
        select(kind("zv_groups"), c.verifier, c.bucket, literal("", text_), func.count(distinct(zero_group)))
        .where(with_groups).group_by(c.verifier, c.bucket),
        select(kind("length"), c.verifier, literal(0), cast(c.band, text_), func.count())
        .where(c.band.is_not(None)).group_by(c.verifier, c.band),
        select(kind("length_correct"), c.verifier, literal(0), cast(c.band, text_), func.count())
        .where(c.band.is_not(None), c.verdict == "correct").group_by(c.verifier, c.band),
        select(kind("latency"), c.verifier, c.bucket, cast(c.bin, text_), func.count())
        .group_by(c.verifier, c.bucket, c.bin),
    ]
    return union_all(*parts)


def _greatest(store: AuditStore, column: Any, floor: float) -> Any:
    return func.max(column, floor) if store.engine.dialect.name == "sqlite" else func.greatest(column, floor)


def _rollup_rows(counts: dict[tuple, int]) -> tuple[list, list, list, list, list]:
    verdicts, flags, latency = [], [], []
    groups: dict[tuple[str, int], list[int]] = {}
    length: dict[tuple[str, int], list[int]] = {}
    bins: dict[tuple[str, int | None], dict[int, int]] = {}
    for (kind, verifier, b, key), n in counts.items():
        if kind == "verdict":
            verdicts.append((verifier, b, key, n))
        elif kind == "flag":
            flags.append((verifier, b, key, n))
        elif kind in ("groups", "zv_groups"):
            groups.setdefault((verifier, b), [0, 0])[kind == "zv_groups"] += n
        elif kind in ("length", "length_correct"):
            length.setdefault((verifier, int(key)), [0, 0])[kind == "length_correct"] += n
        elif kind == "latency":
            for where in ((verifier, b), (verifier, None)):
                cell = bins.setdefault(where, {})
                cell[int(key)] = cell.get(int(key), 0) + n
    group_rows = [(verifier, b, n, zero) for (verifier, b), (n, zero) in groups.items()]
    length_rows = [(verifier, lo, n, correct) for (verifier, lo), (n, correct) in length.items() if n]
    for (verifier, b), cell in bins.items():
        latency.append((verifier, b, _binned_percentiles(cell)))
    return verdicts, flags, group_rows, length_rows, latency


def _binned_percentiles(cell: dict[int, int]) -> list[float]:
    """percentile_cont over the histogram: the order statistics around the rank, each read off
    as its bin's middle value (within 5.1%), interpolated as percentile_cont does."""
    ordered = sorted(cell.items())
    total = sum(n for _, n in ordered)

    def order_statistic(k: int) -> float:
        seen = 0
        for b, n in ordered:
            seen += n
            if seen > k:
                return latency_bin_value(b)
        return latency_bin_value(ordered[-1][0])

    out = []
    for q in PERCENTILES:
        position = (total - 1) * q
        lo, hi = math.floor(position), math.ceil(position)
        a, b = order_statistic(lo), order_statistic(hi)
        out.append(a + (b - a) * (position - lo))
    return out


def _latency(store: AuditStore, s: Any, cond: Any, bucket: Any) -> list[tuple[str, float | None, list[float]]]:
    """(verifier, bucket or None for the whole window, [p50, p90, p99]) rows."""
    out: list[tuple[str, float | None, list[float]]] = []
    if store.engine.dialect.name == "postgresql":
        pct = func.percentile_cont(list(PERCENTILES)).within_group(RecordRow.duration_ms)
        for verifier, b, values in s.execute(select(RecordRow.verifier, bucket, pct).where(cond)
                                             .group_by(RecordRow.verifier, bucket)):
            out.append((verifier, b, list(values)))
        for verifier, values in s.execute(select(RecordRow.verifier, pct).where(cond).group_by(RecordRow.verifier)):
            out.append((verifier, None, list(values)))
        return out
    # SQLite has no percentile function: sort in Python (a laptop-sized store).
    per: dict[tuple[str, float | None], list[float]] = {}
    for verifier, b, duration in s.execute(select(RecordRow.verifier, bucket, RecordRow.duration_ms).where(cond)):
        per.setdefault((verifier, b), []).append(duration)
        per.setdefault((verifier, None), []).append(duration)
    for (verifier, b), values in per.items():
        values.sort()
        out.append((verifier, b, [_percentile(values, q) for q in PERCENTILES]))
    return out


def _shape(width: int, verdicts: Any, flags: Any, groups: Any, lengths: Any, latency: Any) -> dict[str, Any]:
    per: dict[str, dict[str, Any]] = {}

    def entry(verifier: str) -> dict[str, Any]:
        return per.setdefault(verifier, {"buckets": {}, "flags": {}, "total": {v: 0 for v in VERDICTS},
                                         "groups": 0, "zero_variance_groups": 0, "latency": None, "lengths": []})

    def slot(verifier: str, b: float) -> dict[str, Any]:
        return entry(verifier)["buckets"].setdefault(int(b), {
            "verdicts": {v: 0 for v in VERDICTS}, "flags": {}, "groups": 0, "zero_variance_groups": 0,
            "latency": None})

    for verifier, b, verdict, n in verdicts:
        slot(verifier, b)["verdicts"][verdict] = n
        entry(verifier)["total"][verdict] = entry(verifier)["total"].get(verdict, 0) + n
    for verifier, b, name, n in flags:
        slot(verifier, b)["flags"][name] = n
        entry(verifier)["flags"][name] = entry(verifier)["flags"].get(name, 0) + n
    for verifier, b, n_groups, n_zero in groups:
        slot(verifier, b).update(groups=n_groups, zero_variance_groups=n_zero)
        entry(verifier)["groups"] += n_groups
        entry(verifier)["zero_variance_groups"] += n_zero
    for verifier, b, values in latency:
        if b is None:
            entry(verifier)["latency"] = values
        else:
            slot(verifier, b)["latency"] = values
    for verifier, lo, n, correct in sorted(lengths, key=lambda r: (r[0], r[1])):
        entry(verifier)["lengths"].append({"min_chars": int(lo), "n": n, "accuracy": (correct or 0) / n})
    verifiers = []
    for name in sorted(per):
        data = per[name]
        n = sum(data["total"].values())
        buckets = []
        for b in sorted(data["buckets"]):
            cell = data["buckets"][b]
            count = sum(cell["verdicts"].values())
            buckets.append({
                "start": datetime.fromtimestamp(b * width, UTC).isoformat(timespec="minutes"),
                "n": count,
                "rates": {v: (cell["verdicts"][v] / count if count else 0.0) for v in VERDICTS},
                "flag_rates": {k: v / count for k, v in sorted(cell["flags"].items())} if count else {},
                "zero_variance_share": (cell["zero_variance_groups"] / cell["groups"]) if cell["groups"] else None,
                "latency_ms": cell["latency"],
            })
        verifiers.append({
            "name": name, "n": n,
            "rates": {v: (data["total"][v] / n if n else 0.0) for v in VERDICTS},
            "flag_rates": {k: v / n for k, v in sorted(data["flags"].items(), key=lambda kv: -kv[1])} if n else {},
            "groups": data["groups"],
            "zero_variance_share": data["zero_variance_groups"] / data["groups"] if data["groups"] else None,
            "latency_ms": data["latency"], "lengths": data["lengths"], "buckets": buckets,
        })
    return {"bucket_seconds": width, "percentiles": list(PERCENTILES), "verdicts": list(VERDICTS),
            "verifiers": verifiers}

