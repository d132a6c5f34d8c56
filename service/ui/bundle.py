"""Export a filtered set of records as a static bundle: a zip that opens from disk, no server.

index.html loads data.js (the records as one JS assignment: browsers refuse fetch() on file://),
bundle.js renders them with textContent only, and viewer.css styles them.
"""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime

from sqlalchemy import select

from service.routes.records import record_out
from service.store import AuditStore, RecordRow
from service.ui.queries import RecordFilter, apply_filter, ordering
from service.ui.render import STATIC, render_text


def _rows(store: AuditStore, f: RecordFilter, limit: int) -> list[RecordRow]:
    stmt = apply_filter(store, select(RecordRow), f).order_by(*ordering(f.sort)).limit(limit)
    with store.db() as s:
        return list(s.scalars(stmt))


def build(store: AuditStore, f: RecordFilter, limit: int) -> tuple[bytes, str]:
    """The zip's bytes and its file name."""
    rows = _rows(store, f, limit + 1)
    truncated = len(rows) > limit
    records = [record_out(r).model_dump(mode="json") for r in rows[:limit]]
    made = datetime.now(UTC)
    meta = {"exported_at": made.isoformat(timespec="seconds"), "filter": dict(f.query_items()),
            "count": len(records), "truncated": truncated, "limit": limit}
    folder = f"assay-records-{made:%Y%m%dT%H%M%SZ}"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{folder}/index.html", render_text("bundle.html", meta=meta))
        z.writestr(f"{folder}/data.js", "window.ASSAY_BUNDLE = " + json.dumps({"meta": meta, "records": records})
                   + ";\n")
        z.writestr(f"{folder}/records.jsonl", "".join(json.dumps(r) + "\n" for r in records))
        for name in ("bundle.js", "viewer.css"):
            z.write(STATIC / name, f"{folder}/{name}")
    return buffer.getvalue(), f"{folder}.zip"
