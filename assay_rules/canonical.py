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


def key_id_of(raw_public_key: bytes) -> str:
    """A key's id: the first 16 hex digits of SHA-256 of its raw 32 bytes."""
    return hashlib.sha256(raw_public_key).hexdigest()[:16]
