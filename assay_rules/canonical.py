"""The canonical JSON that receipts sign and audit chains hash, and the hashes receipts name.

The service signs receipts and chains records with `canonical_json`; the trainer client
checks receipts with it. One definition, so the bytes agree on both sides.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any, allow_nan: bool = False) -> bytes:
    """The bytes a receipt signs: JSON with sorted keys, no whitespace, UTF-8, finite numbers only.
    (The service's audit chains hash rows with the same rule, where a stored NaN must not fail a write.)"""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan).encode()


def response_hash(text: str) -> str:
    """The receipt's `response_hash` of a response text (SHA-256 of its UTF-8 bytes, hex)."""
    return hashlib.sha256(text.encode()).hexdigest()


def task_sent(verifier: str, task: Any = None, task_id: str | None = None) -> str:
    """The receipt's `task_sent`: SHA-256 (hex) of the canonical JSON of the verifier and the task
    (or registered `task_id`) exactly as the request named them. The keyed `task_hash` cannot be
    recomputed by the trainer, so without this a receipt bound no task the trainer could check: a
    proxy holding the trainer's key could answer with a fresh, genuine receipt for the same response
    judged against another task. Only the sender of an inline task learns this plain hash of it."""
    named = {"verifier": verifier, "task_id": task_id} if task_id is not None else {"verifier": verifier, "task": task}
    return hashlib.sha256(canonical_json(named, allow_nan=True)).hexdigest()


def eval_report_digest(report: Any) -> str:
    """The signed `report` of an evaluation's answer: SHA-256 (hex) of the canonical JSON of its
    `{"families": ..., "overall": ...}` as the service sent them."""
    return hashlib.sha256(canonical_json({"families": report["families"], "overall": report["overall"]},
                                         allow_nan=True)).hexdigest()


def key_id_of(raw_public_key: bytes) -> str:
    """A key's id: the first 16 hex digits of SHA-256 of its raw 32 bytes."""
    return hashlib.sha256(raw_public_key).hexdigest()[:16]
