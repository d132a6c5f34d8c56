"""Export a filtered set of records as a static bundle: a zip that opens from disk, no server.

index.html loads data.js (the records as one JS assignment: browsers refuse fetch() on file://),
bundle.js renders them with textContent only, and viewer.css styles them.

The zip is streamed: records are read a page at a time (keyset on the filter's sort, one
short unit of work per page), written into data.js as they come and spooled to a temporary
file for records.jsonl, so memory stays bounded whatever the record count. The count and
whether the limit cut the set are known at the end: data.js carries them after the
records, and index.html is written last.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

from sqlalchemy import select

from service.routes.records import record_out
from service.store import AuditStore
from service.tables import RecordRow
from service.ui.queries import SORTS, RecordFilter, after_condition, apply_filter, cursor_value, ordering
from service.ui.render import STATIC, render_text

PAGE_RECORDS = 200
COPY_BYTES = 1 << 20


class _Sink:
    """A write-only stream the zip writes into; `take()` hands over what was written so far."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts = []
        return out


def _pages(store: AuditStore, f: RecordFilter, limit: int) -> Iterator[tuple[list[RecordRow], str]]:
    """Up to `limit` records in the filter's order, a page at a time, each with the cursor after it."""
    column, _ = SORTS[f.sort]
    cursor: str | None = None
    left = limit
    while left > 0:
        stmt = apply_filter(store, select(RecordRow), f)
        if cursor is not None:
            stmt = stmt.where(after_condition(f.sort, cursor))
        with store.db() as s:
            rows = list(s.scalars(stmt.order_by(*ordering(f.sort)).limit(min(PAGE_RECORDS, left))))
        if not rows:
            return
        left -= len(rows)
        cursor = cursor_value(f.sort, {"seq": rows[-1].seq, column.key: getattr(rows[-1], column.key)})
        yield rows, cursor


def _more_after(store: AuditStore, f: RecordFilter, cursor: str | None) -> bool:
    stmt = apply_filter(store, select(RecordRow.seq), f)
    if cursor is not None:
        stmt = stmt.where(after_condition(f.sort, cursor))
    with store.db() as s:
        return s.scalar(stmt.order_by(*ordering(f.sort)).limit(1)) is not None


def stream(store: AuditStore, f: RecordFilter, limit: int) -> tuple[Iterator[bytes], str]:
    """The zip's bytes, as they are made, and its file name."""
    made = datetime.now(UTC)
    folder = f"assay-records-{made:%Y%m%dT%H%M%SZ}"
    return _zip(store, f, limit, made, folder), f"{folder}.zip"


def _zip(store: AuditStore, f: RecordFilter, limit: int, made: datetime, folder: str) -> Iterator[bytes]:
    sink = _Sink()
    count, cursor = 0, None
    with tempfile.TemporaryFile() as spool, zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as z:  # type: ignore[arg-type]
        with z.open(f"{folder}/data.js", "w") as data:
            data.write(b'window.ASSAY_BUNDLE = {"records": [')
            for page, after in _pages(store, f, limit):
                cursor = after
                for row in page:
                    line = json.dumps(record_out(row).model_dump(mode="json")).encode()
                    data.write((b"," if count else b"") + line)
                    spool.write(line + b"\n")
                    count += 1
                yield sink.take()
            meta = _meta(f, made, count, count >= limit and _more_after(store, f, cursor), limit)
            data.write(b'], "meta": ' + json.dumps(meta).encode() + b"};\n")
        _copy(spool, z, f"{folder}/records.jsonl")
        yield sink.take()
        z.writestr(f"{folder}/index.html", render_text("bundle.html", meta=meta))
        for name in ("bundle.js", "viewer.css"):
            z.write(STATIC / name, f"{folder}/{name}")
    yield sink.take()


def _copy(spool: IO[bytes], z: zipfile.ZipFile, name: str) -> None:
    spool.seek(0)
    with z.open(name, "w") as out:
        while chunk := spool.read(COPY_BYTES):
            out.write(chunk)


def _meta(f: RecordFilter, made: datetime, count: int, truncated: bool, limit: int) -> dict[str, Any]:
    return {"exported_at": made.isoformat(timespec="seconds"), "filter": dict(f.query_items()), "count": count,
            "truncated": truncated, "limit": limit}
