"""`assay audit archive | verify-archive | partitions`: retention of the audit log (issue 27).

Run as the schema owner (`--url`, default ASSAY_DATABASE_URL): the service's own role may
never delete. See service/audit_archive.py and docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
from datetime import date
from pathlib import Path
from typing import Any

from service.config import Settings


def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    from service.audit_archive import ArchiveError, archive
    from service.store import AuditStore

    store = AuditStore(args.url or settings.database_url)
    try:
        with store.engine.begin() as conn:
            from service import audit_partitions
            if audit_partitions.is_partitioned(conn):
                audit_partitions.ensure_ahead(conn)
        result = archive(store, args.before, Path(args.out), remove=not args.keep)
    except ArchiveError as exc:
        print(f"archive refused: {exc}")
        return 1
    finally:
        store.engine.dispose()
    print(json.dumps({"path": str(result.path) if result.path else None, "records": result.records,
                      "partitions": result.partitions, "removed": result.removed,
                      "left_in_default_partition": result.left_in_default}, indent=1))
    return 0


def cmd_verify_archive(args: argparse.Namespace, settings: Settings) -> int:
    from service.audit_archive import ArchiveError, check_file, file_sha256

    path = Path(args.path)
    manifest_path = Path(f"{path}.manifest.json")
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    try:
        checked = check_file(path)
    except ArchiveError as exc:
        print(json.dumps({"intact": False, "problem": str(exc)}, indent=1))
        return 1
    problems = []
    if manifest and file_sha256(path) != manifest.get("sha256"):
        problems.append("the file's SHA-256 differs from its manifest")
    if manifest and checked["records"] != manifest.get("records"):
        problems.append(f"{checked['records']} records, the manifest says {manifest.get('records')}")
    if manifest and checked["digest"] != manifest.get("digest"):
        problems.append("the records' digest differs from the manifest's")
    print(json.dumps({"intact": not problems, "problems": problems, "records": checked["records"],
                      "chains": len(checked["chains"]), "manifest": bool(manifest)}, indent=1))
    return 0 if not problems else 1


def cmd_partitions(args: argparse.Namespace, settings: Settings) -> int:
    from sqlalchemy import create_engine

    from service import audit_partitions

    engine = create_engine(args.url or settings.database_url)
    try:
        with engine.begin() as conn:
            if not audit_partitions.is_partitioned(conn):
                print("records are not partitioned (SQLite, or a schema before revision 0012)")
                return 0
            made = audit_partitions.ensure_ahead(conn, args.days_ahead)
            left = audit_partitions.default_rows(conn)
    finally:
        engine.dispose()
    print(json.dumps({"created": made, "rows_in_default_partition": left}, indent=1))
    return 0


def add_commands(audit_sub: Any) -> None:
    archive = audit_sub.add_parser("archive", help="move whole days of records before DATE to compressed JSON Lines "
                                   "(schema owner; removes them once the archive is verified)")
    archive.add_argument("--before", required=True, type=date.fromisoformat, help="YYYY-MM-DD (UTC day, exclusive)")
    archive.add_argument("--out", required=True, help="directory for the archive and its manifest")
    archive.add_argument("--url", help="SQLAlchemy URL of the schema owner (default ASSAY_DATABASE_URL)")
    archive.add_argument("--keep", action="store_true", help="write and verify the archive, remove nothing")
    archive.set_defaults(func=cmd_archive)
    check = audit_sub.add_parser("verify-archive", help="check an archive file: digest, count, row hashes, links")
    check.add_argument("path")
    check.set_defaults(func=cmd_verify_archive)
    parts = audit_sub.add_parser("partitions", help="make the day partitions ahead (schema owner; run daily)")
    parts.add_argument("--days-ahead", type=int, default=14)
    parts.add_argument("--url", help="SQLAlchemy URL of the schema owner (default ASSAY_DATABASE_URL)")
    parts.set_defaults(func=cmd_partitions)
