"""Peak memory of the viewer's export bundle: streamed (service/ui/bundle.py) against
building the whole zip in memory (the previous design, rebuilt here as the baseline).

    python bench/export_memory.py [--records 20000] [--kb 10]

Seeds a SQLite audit store with N records whose response is K KB, then exports every
record in a fresh process per mode and reports that process's peak RSS (VmHWM) above
its RSS just before the export. Prints both and their ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def seed(url: str, records: int, kb: int) -> None:
    from service.store import AuditStore
    from service.tables import RecordRow, TaskBlobRow, new_record_id

    store = AuditStore(url)
    blob = TaskBlobRow(task_hash="0" * 64, verifier="math", task={"answer": "1"})
    for start in range(0, records, 1000):
        rows = [RecordRow(id=new_record_id(), request_id=None, caller_key_id="seed", task_id=None,
                          task_hash="0" * 64, task_public={"answer": "1"}, verifier="math", verifier_version="1",
                          response_hash="1" * 64, response=uuid.uuid4().hex * (kb * 1024 // 32), components={},
                          reward=1.0, verdict="correct", evidence={}, flags=[], sandbox_backend="process",
                          usage=None, duration_ms=1.0, group_id=uuid.uuid4().hex, group_index=0)
                for _ in range(start, min(records, start + 1000))]
        store.append(rows, [blob])
    store.engine.dispose()


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def export(url: str, mode: str, limit: int) -> dict[str, float]:
    """Run in a child process: export everything, report peak RSS growth."""
    from sqlalchemy import select

    from service.routes.records import record_out
    from service.store import AuditStore
    from service.tables import RecordRow
    from service.ui import bundle
    from service.ui.queries import RecordFilter, apply_filter, ordering

    store = AuditStore(url)
    f = RecordFilter()
    before = _rss_kb("VmRSS")
    started = time.perf_counter()
    size = 0
    if mode == "stream":
        chunks, _ = bundle.stream(store, f, limit)
        for chunk in chunks:
            size += len(chunk)
    else:  # the previous design: every record in a list, the zip in a BytesIO
        stmt = apply_filter(store, select(RecordRow), f).order_by(*ordering(f.sort)).limit(limit)
        with store.db() as s:
            rows = list(s.scalars(stmt))
        records = [record_out(r).model_dump(mode="json") for r in rows]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("b/data.js", "window.ASSAY_BUNDLE = " + json.dumps({"records": records}) + ";\n")
            z.writestr("b/records.jsonl", "".join(json.dumps(r) + "\n" for r in records))
        size = len(buffer.getvalue())
    return {"peak_mb": (_rss_kb("VmHWM") - before) / 1024, "seconds": time.perf_counter() - started,
            "zip_mb": size / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--kb", type=int, default=10)
    parser.add_argument("--child", nargs=2, metavar=("URL", "MODE"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(export(args.child[0], args.child[1], args.records)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/audit.db"
        seed(url, args.records, args.kb)
        results = {}
        for mode in ("whole", "stream"):
            out = subprocess.run([sys.executable, __file__, "--records", str(args.records), "--child", url, mode],
                                 capture_output=True, text=True, check=True, cwd=REPO)
            results[mode] = json.loads(out.stdout)
            print(mode, results[mode])
        print(f"records: {args.records} x {args.kb} KB; peak RSS growth whole/stream: "
              f"{results['whole']['peak_mb'] / max(results['stream']['peak_mb'], 0.1):.1f}x")


if __name__ == "__main__":
    main()
