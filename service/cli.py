"""The `assay` command line: serve, verify locally, manage keys, read and replay the audit log."""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import sys
from typing import Any

from service.auth import SCOPES
from service.cli_audit import add_commands as add_audit_commands
from service.cli_certify import add_commands as add_certification_commands
from service.config import Settings


def _store(settings: Settings):
    from service.store import AuditStore

    return AuditStore(settings.database_url)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from service.app import create_app
    from service.migrations import SchemaOutOfDate
    from service.store import AuditStore
    from service.warm_up import families

    try:  # refuse an out-of-date schema or an unknown family with the fix, before a traceback
        families(settings.warm_up)
        AuditStore(settings.database_url).engine.dispose()
    except (SchemaOutOfDate, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from service.logs import configure_logging
    from service.read_deadlines import protocol_with_deadlines
    from service.serve_processes import STARTUP_FAILURE, die_with_supervisor, serve_processes

    if args.fd is None and settings.api_processes > 1:
        import logging.config

        logging.config.dictConfig(configure_logging(args.log_level))
        return serve_processes(settings, args.host, args.port, args.log_level)
    if args.supervisor is not None:
        die_with_supervisor(args.supervisor)
    # JSON lines for uvicorn and the app alike; the app logs one line per request itself, so
    # uvicorn's access log (which prints query strings, keys included) stays off.
    config = uvicorn.Config(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
                            log_config=configure_logging(args.log_level), access_log=False,
                            timeout_graceful_shutdown=10,
                            http=protocol_with_deadlines(settings.header_timeout_s, settings.body_timeout_s))
    # --fd: a socket the supervisor of several API processes listens on (socket() finds its family).
    server = uvicorn.Server(config)
    server.run(sockets=None if args.fd is None else [socket.socket(fileno=args.fd)])
    return 0 if server.started else STARTUP_FAILURE


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from sqlalchemy import create_engine

    from service import migrations
    from service.db_roles import RoleRefused, grant_service_role

    if args.db_command == "revision":
        print(migrations.new_revision(args.message))
        return 0
    engine = create_engine(args.url or settings.database_url)
    try:
        if args.db_command == "current":
            with engine.connect() as connection:
                print(f"{migrations.current_revision(connection) or 'none'} (head {migrations.head_revision()})")
            return 0
        before, after = migrations.upgrade(engine)
        print(f"audit database at revision {after} (was {before or 'none'})")
        if args.service_role:
            try:
                grant_service_role(engine, args.service_role)
            except RoleRefused as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(f"role {args.service_role!r} may read and append records, never change them")
        return 0
    finally:
        engine.dispose()


def cmd_keys_create(args: argparse.Namespace, settings: Settings) -> int:
    from service.auth import InvalidScopes, create_key

    try:
        key = create_key(_store(settings), [s.strip() for s in args.scopes.split(",") if s.strip()], args.name)
    except InvalidScopes as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(key)
    return 0


def cmd_keys_list(args: argparse.Namespace, settings: Settings) -> int:
    from service.keys import list_keys

    for key in list_keys(_store(settings)):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M:%S} by {key.revoked_by}" if key.revoked_at else (
            "revoked" if key.revoked else "active")
        reason = f" ({key.reason})" if key.reason else ""
        print(f"{key.key_id}\t{','.join(key.scopes)}\t{key.name or '-'}\t{key.created_at:%Y-%m-%d %H:%M:%S}\t"
              f"{state}{reason}")
    return 0


def cmd_keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    import getpass

    from service.keys import KeyNotFound, revoke_key

    try:
        key = revoke_key(_store(settings), args.key_id, args.by or f"cli:{getpass.getuser()}", args.reason)
    except KeyNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{key.key_id}\trevoked {key.revoked_at:%Y-%m-%d %H:%M:%S} by {key.revoked_by}")
    return 0


def _read_items(path: str) -> list[dict[str, Any]]:
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path) as f:
            text = f.read()
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        return json.loads(text)
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Verify locally through the same pipeline stages, verifiers and sandbox, without a server or records."""
    import anyio
    from pydantic import ValidationError

    from sandboxes.base import SandboxBusy, SandboxUnavailable
    from service.executors import create_local_executor
    from service.fingerprints import Fingerprints
    from service.metrics import Metrics
    from service.pipeline import Pipeline, verify_locally
    from service.schemas import VerifyRequest
    from verifiers.base import TaskInvalid, UnknownVerifier

    executor = create_local_executor(settings)
    # No records and no task ids here: nothing this prints is named by a deployment's fingerprint.
    pipeline = Pipeline(settings, store=None, executor=executor, metrics=Metrics(),  # type: ignore[arg-type]
                        fingerprints=Fingerprints(secrets.token_bytes(32)))
    status = 0
    try:
        for number, item in enumerate(_read_items(args.input), start=1):
            try:
                req = VerifyRequest.model_validate(item)
                shown = anyio.run(verify_locally, pipeline, req)
            except (ValidationError, TaskInvalid, UnknownVerifier, SandboxBusy, SandboxUnavailable) as exc:
                # Local use: the operator's own input, so the message is shown as it is.
                print(json.dumps({"line": number, "error": str(exc)}))
                status = 1
                continue
            print(json.dumps(shown))
    finally:
        executor.close()
    return status


def _row_json(row: Any) -> dict[str, Any]:
    from service.pipeline.results import record_out

    return record_out(row).model_dump(mode="json")


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    store = _store(settings)
    if args.audit_command == "show":
        row = store.record(args.record_id)
        if row is None:
            print(f"error: record {args.record_id!r} not found", file=sys.stderr)
            return 1
        print(json.dumps(_row_json(row), indent=2))
        return 0
    filters = {"verifier": args.verifier, "verdict": args.verdict, "group_id": args.group_id,
               "caller_key_id": args.key, "task_id": args.task_id, "flag": args.flag}
    if args.audit_command == "list":
        for row in store.query(limit=args.limit, **filters):
            print(f"{row.id}  {row.created_at:%Y-%m-%d %H:%M:%S}  {row.verifier:<10} {row.verdict:<15}"
                  f" reward={row.reward:<6g} flags={','.join(row.flags or []) or '-'}")
        return 0
    if args.out in (None, "-"):
        _export(store, filters, sys.stdout)
    else:
        with open(args.out, "w") as out:
            _export(store, filters, out)
    return 0


def _public_keys(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Keys to check signed heads with: --public-key values (base64 or a PEM file), else the key file."""
    from pathlib import Path

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from service.signing import key_path, public_key_of
    from trainer_client.receipts import ReceiptKey

    keys: dict[str, Any] = {}
    for value in args.public_key or []:
        key = ReceiptKey.parse(Path(value).read_text() if Path(value).is_file() else value)
        keys[key.key_id] = Ed25519PublicKey.from_public_bytes(key.raw)
    if not keys:
        public = public_key_of(key_path(settings))
        from cryptography.hazmat.primitives import serialization

        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        keys[ReceiptKey(raw).key_id] = public
    return keys


def cmd_audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0: every chain, signed head and task blob intact; 1: tampering found; 2: could not check."""
    from pathlib import Path

    from service.audit_verify import verify
    from service.migrations import SchemaOutOfDate
    from service.signing import SigningKeyError

    try:
        keys = _public_keys(args, settings)
        anchor = json.loads(Path(args.anchor).read_text()) if args.anchor else None
        store = _store(settings)
    except (SigningKeyError, SchemaOutOfDate, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = verify(store, keys, anchor)
    summary = report.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for problem in report.problems:
            print(f"{problem.kind}: {problem.message}")
        rows = sum(c["rows"] for chains in summary["chains"].values() for c in chains.values())
        unsigned = sum(c["unsigned"] for chains in summary["chains"].values() for c in chains.values())
        print(f"{'INTACT' if report.intact else 'TAMPERED'}: {rows} chained rows in "
              f"{sum(len(c) for c in summary['chains'].values())} chains, {report.heads} signed heads, "
              f"{unsigned} rows after the last signed heads, {sum(report.legacy.values())} rows from before "
              f"chaining (not vouched for)")
        if report.newest_head is not None:
            print(f"newest signed head (keep it outside the database, pass it as --anchor): "
                  f"{json.dumps(report.newest_head)}")
    return 0 if report.intact else 1


def cmd_receipts_key(args: argparse.Namespace, settings: Settings) -> int:
    from service.signing import Signer, SigningKeyError, key_path, load_private

    path = key_path(settings)
    try:
        if not path.exists():
            raise SigningKeyError(f"no signing key at {path} yet: the service creates it at its first start")
        info = Signer(load_private(path)).public_info()
    except SigningKeyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(info["pem"] if args.pem else json.dumps(info, indent=2))
    return 0


def _export(store: Any, filters: dict[str, Any], out: Any) -> None:
    for row in store.iter_all(**filters):
        out.write(json.dumps(_row_json(row)) + "\n")


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from service.errors import NotFound
    from service.executors import create_local_executor
    from service.metrics import Metrics
    from service.pipeline import Pipeline

    executor = create_local_executor(settings)
    try:
        result = anyio.run(Pipeline(settings, _store(settings), executor, Metrics()).replay, args.record_id)
    except NotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        executor.close()
    print(json.dumps(result.model_dump(mode="json"), indent=2))
    print("same verdict" if result.same_verdict else "VERDICT DIFFERS", file=sys.stderr)
    return 0 if result.same_verdict else 3


def _print_model(model: Any) -> None:
    print(json.dumps(model.model_dump(mode="json"), indent=2))


def cmd_review(args: argparse.Namespace, settings: Settings) -> int:
    """Review decisions against the audit store: a queue to label, labels, a summary."""
    import getpass

    from pydantic import ValidationError

    from service.auth import Caller
    from service.errors import Rejected
    from service.inspection_schemas import LabelIn
    from service.review import add_label, review_queue, review_summary

    store = _store(settings)
    if args.review_command == "next":
        picked, available = review_queue(store, args.verifier, args.flag, args.n, args.seed)
        for stratum, row in picked:
            print(json.dumps({"stratum": stratum, "record": _row_json(row)}))
        print(f"unlabelled: {available}", file=sys.stderr)
        return 0
    if args.review_command == "label":
        try:
            body = LabelIn(label=args.label, corrected_verdict=args.verdict, pattern=args.pattern, note=args.note)
            author = args.author or f"cli:{getpass.getuser()}"
            _print_model(add_label(store, args.record_id, body, Caller("cli", frozenset({"review"}), author)))
        except (ValidationError, Rejected) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    _print_model(review_summary(store, args.verifier))
    return 0


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from service.errors import NotFound
    from service.evals import compare, eval_report

    store = _store(settings)
    try:
        _print_model(eval_report(store, args.eval_id) if args.eval_command == "report"
                     else compare(store, args.a, args.b))
    except NotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assay", description="Assay reward service")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    # From service/serve_processes.py: the socket to serve, and the supervisor to end with.
    serve.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--supervisor", type=int, help=argparse.SUPPRESS)
    serve.set_defaults(func=cmd_serve)

    verify = sub.add_parser("verify", help="verify JSON/JSONL requests locally (no server, no records)")
    verify.add_argument("input", nargs="?", default="-", help="file of requests, or - for stdin")
    verify.set_defaults(func=cmd_verify)

    db = sub.add_parser("db", help="audit database schema (Alembic migrations)")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="migrate the audit database to the newest revision")
    upgrade.add_argument("--url", help="SQLAlchemy URL of the schema owner (default ASSAY_DATABASE_URL)")
    upgrade.add_argument("--service-role", help="Postgres: grant this role what the service needs, "
                         "records INSERT and SELECT only (see docs/operations.md)")
    current = db_sub.add_parser("current", help="print the database's revision and the head")
    current.add_argument("--url")
    revision = db_sub.add_parser("revision", help="write a new empty revision after the head")
    revision.add_argument("-m", "--message", required=True)
    for p in (upgrade, current, revision):
        p.set_defaults(func=cmd_db, service_role=None, url=None)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it")
    create.add_argument("--scopes", required=True, help=f"comma-separated: {','.join(SCOPES)}")
    create.add_argument("--name", default=None)
    create.set_defaults(func=cmd_keys_create)
    keys_sub.add_parser("list", help="list keys: id, scopes, name, created, revoked (never a secret)").set_defaults(
        func=cmd_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id: API calls and viewer sign-ins stop at once")
    revoke.add_argument("key_id")
    revoke.add_argument("--reason", default=None)
    revoke.add_argument("--by", default=None, help="who revokes (default: cli:<user>)")
    revoke.set_defaults(func=cmd_keys_revoke)

    audit = sub.add_parser("audit", help="read the audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    add_audit_commands(audit_sub)  # archive, verify-archive, partitions (service/cli_audit.py)
    for name in ("list", "export"):
        p = audit_sub.add_parser(name)
        p.add_argument("--verifier")
        p.add_argument("--verdict")
        p.add_argument("--group-id")
        p.add_argument("--key", help="the sending API key's id (a group id lives in its sender's namespace)")
        p.add_argument("--task-id")
        p.add_argument("--flag")
        if name == "list":
            p.add_argument("--limit", type=int, default=50)
        else:
            p.add_argument("--out", default=None, help="file to write (default stdout)")
        p.set_defaults(func=cmd_audit)
    show = audit_sub.add_parser("show")
    show.add_argument("record_id")
    show.set_defaults(func=cmd_audit)
    check = audit_sub.add_parser("verify", help="check every hash chain, signed head and task blob; exit 0 intact, "
                                 "1 tampering found, 2 could not check")
    check.add_argument("--public-key", action="append", help="a trusted public key (base64 or a PEM file); "
                       "repeat for old keys. Default: the public half of ASSAY_SIGNING_KEY_PATH")
    check.add_argument("--anchor", help="JSON file holding a newest signed head printed by an earlier run")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(func=cmd_audit_verify)

    receipts = sub.add_parser("receipts", help="reward receipts")
    receipts_sub = receipts.add_subparsers(dest="receipts_command", required=True)
    rkey = receipts_sub.add_parser("key", help="print the public key that signs receipts (as GET /v1/receipts/key)")
    rkey.add_argument("--pem", action="store_true", help="print only the PEM")
    rkey.set_defaults(func=cmd_receipts_key)

    replay = sub.add_parser("replay", help="re-run a logged verification and compare verdicts")
    replay.add_argument("record_id")
    replay.set_defaults(func=cmd_replay)

    review = sub.add_parser("review", help="label decisions; estimate each verifier's error rates")
    review_sub = review.add_subparsers(dest="review_command", required=True)
    nxt = review_sub.add_parser("next", help="a stratified sample of unlabelled records (JSON lines)")
    nxt.add_argument("--verifier")
    nxt.add_argument("--flag")
    nxt.add_argument("-n", type=int, default=10)
    nxt.add_argument("--seed", type=int, default=None)
    nxt.set_defaults(func=cmd_review)
    label = review_sub.add_parser("label", help="label a record (append-only)")
    label.add_argument("record_id")
    label.add_argument("label", choices=["agree", "disagree", "exploit"])
    label.add_argument("--verdict", help="with disagree: the corrected verdict")
    label.add_argument("--pattern", help="with exploit: the pattern's name")
    label.add_argument("--note")
    label.add_argument("--author", help="default: cli:<user>")
    label.set_defaults(func=cmd_review)
    rsummary = review_sub.add_parser("summary", help="false-positive rates with Wilson 95%% intervals")
    rsummary.add_argument("--verifier")
    rsummary.set_defaults(func=cmd_review)

    ev = sub.add_parser("eval", help="held-out evaluation runs")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True)
    report = ev_sub.add_parser("report", help="an evaluation run's report")
    report.add_argument("eval_id")
    report.set_defaults(func=cmd_eval)
    cmp_ = ev_sub.add_parser("compare", help="B minus A per family, bootstrap 95%% intervals over tasks")
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    cmp_.set_defaults(func=cmd_eval)
    add_certification_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args, Settings())


if __name__ == "__main__":
    sys.exit(main())
