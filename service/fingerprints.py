"""Keyed fingerprints: every hash over hidden data that leaves the audit store.

A plain SHA-256 of a small value is the value: 301 guesses reverse `["300"]`. So hidden
fields in public task views, and the `task_hash` that records, filters and receipts name,
are HMAC-SHA256 under a per-deployment secret, which a `reward` key never holds and so
cannot confirm a guess with offline.

The secret is 32 random bytes in a file (mode 0600), created at first start beside the
SQLite database, or where `ASSAY_FINGERPRINT_KEY_FILE` says (compose keeps it in a volume
of its own, shared by the API replicas). Records written before keep the plain hashes they
have: their task blobs are stored under those, so replay, `task_hash` filters and exports
work for both.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from service.config import Settings
from verifiers.base import TaskBase

KEY_BYTES = 32
FINGERPRINT_FIELD = "hmac_sha256"


class Fingerprints:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the fingerprint secret must hold at least 16 bytes")
        self._secret = secret

    def of(self, value: Any) -> str:
        """HMAC-SHA256 of a JSON value, canonically encoded (64 hex digits, as task hashes were)."""
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def task_hash(self, task: TaskBase) -> str:
        return self.of(task.hash_material())

    def public_view(self, task: TaskBase) -> dict[str, Any]:
        """The task as a `reward` key may see it: hidden fields replaced by keyed fingerprints."""
        data = task.model_dump(mode="json")
        for name in task.hidden():
            if data.get(name) is not None:
                data[name] = {FINGERPRINT_FIELD: self.of(data[name])}
        return data


def key_path(settings: Settings) -> Path:
    if settings.fingerprint_key_file is not None:
        return settings.fingerprint_key_file
    url = settings.database_url
    if settings.is_sqlite and url.startswith("sqlite:///") and ":memory:" not in url:
        return Path(url.removeprefix("sqlite:///")).parent / "fingerprint.key"
    return Path("var/fingerprint.key")


def load_or_create_secret(path: Path) -> bytes:
    """The deployment's secret; made (0600, never overwritten) when the file is missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:  # first start: we made the file, so we write it (another replica reads it below)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(KEY_BYTES) + "\n")
    for _ in range(50):
        text = path.read_text().strip()
        if text:
            return bytes.fromhex(text)
        time.sleep(0.1)  # another process made it a moment ago and is writing it
    raise RuntimeError(f"{path}: the fingerprint secret file is empty")


def create_fingerprints(settings: Settings) -> Fingerprints:
    return Fingerprints(load_or_create_secret(key_path(settings)))
