"""`assay tasks certify` and `assay verifier diff`: the certification gate and the verifier
release gate on this machine's sandbox and audit store (no server needed).

Exit codes: `tasks certify` 0 when every task is certified, 4 when any is quarantined;
`verifier diff` 0 when no reward flipped, 5 when some did; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import anyio
from pydantic import ValidationError

from service.auth import Caller
from service.config import Settings

EXIT_QUARANTINED = 4
EXIT_FLIPPED = 5
EXIT_BAD_INPUT = 2
# The CLI's own caller: certificates and reports it writes name it instead of an API key.
CLI_CALLER = Caller(key_id="cli", scopes=frozenset({"admin"}), name="cli")


@contextmanager
def local_pipeline(settings: Settings) -> Iterator[Any]:
    from service.executors import create_local_executor
    from service.metrics import Metrics
    from service.pipeline import Pipeline
    from service.store import AuditStore

    executor = create_local_executor(settings)
    try:
        yield Pipeline(settings, AuditStore(settings.database_url), executor, Metrics())
    finally:
        executor.close()


def cmd_tasks_certify(args: argparse.Namespace, settings: Settings) -> int:
    """Certify every task of a JSON Lines file (`{"verifier", "task" | "task_id", "reference"?}` per line):
    one certificate per line on stdout (or --out), then a summary on stderr."""
    from service.certification import Certifier
    from service.certification_schemas import MAX_CERTIFY_TASKS, CertifyItem, CertifyRequest

    try:
        with open(args.file) as f:
            items = [CertifyItem.model_validate(json.loads(line)) for line in f if line.strip()]
    except (OSError, ValueError, ValidationError) as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = sys.stdout if args.out in (None, "-") else open(args.out, "w")  # noqa: SIM115 - closed below
    counts = {"certified": 0, "quarantined": 0}
    try:
        with local_pipeline(settings) as pipeline:
            certifier = Certifier(pipeline)
            for start in range(0, len(items), MAX_CERTIFY_TASKS):
                req = CertifyRequest(tasks=items[start:start + MAX_CERTIFY_TASKS], runs=args.runs)
                done = anyio.run(certifier.certify, req, CLI_CALLER)
                for cert in done.certificates:
                    counts[cert.status] += 1
                    out.write(cert.model_dump_json() + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    print(json.dumps({"tasks": len(items), **counts}), file=sys.stderr)
    return EXIT_QUARANTINED if counts["quarantined"] else 0


def cmd_verifier_diff(args: argparse.Namespace, settings: Settings) -> int:
    """Replay a verdict-stratified sample of a verifier's records with the code as it is now."""
    from service.certification_schemas import DiffRequest
    from service.verifier_diff import VerifierDiff
    from verifiers.base import UnknownVerifier

    try:
        req = DiffRequest(sample=args.sample, since=args.since)
        with local_pipeline(settings) as pipeline:
            report = anyio.run(VerifierDiff(pipeline).run, args.verifier, req, CLI_CALLER)
    except (ValidationError, UnknownVerifier) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(report.model_dump_json(indent=2))
    print(f"{report.reward_flips} of {report.replayed} rewards flipped", file=sys.stderr)
    return EXIT_FLIPPED if report.reward_flips else 0


def add_commands(sub: Any) -> None:
    """The `tasks` and `verifier` command groups, added to the `assay` parser."""
    tasks = sub.add_parser("tasks", help="check tasks before training on them")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    certify = tasks_sub.add_parser("certify", help="certify the tasks of a JSON Lines file (exit 4: quarantined)")
    certify.add_argument("file", help='one {"verifier", "task" or "task_id", "reference"?} per line')
    certify.add_argument("--runs", type=int, default=2, help="how often each reference is judged (2-16)")
    certify.add_argument("--out", default=None, help="write the certificates here (default stdout)")
    certify.set_defaults(func=cmd_tasks_certify)

    verifier = sub.add_parser("verifier", help="the release gate of a verifier upgrade")
    verifier_sub = verifier.add_subparsers(dest="verifier_command", required=True)
    diff = verifier_sub.add_parser("diff", help="replay logged records with the code as it is now (exit 5: flips)")
    diff.add_argument("--verifier", required=True)
    diff.add_argument("--sample", type=int, default=500, help="records to replay, spread over verdicts")
    diff.add_argument("--since", type=datetime.fromisoformat, default=None, help="ISO time: only records since")
    diff.set_defaults(func=cmd_verifier_diff)
