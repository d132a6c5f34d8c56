"""The deployment's Ed25519 key: signs reward receipts and the audit chains' heads.

The key is a PKCS#8 PEM file (setting ASSAY_SIGNING_KEY_PATH; by default beside the
SQLite database, else `var/assay.signing-key.pem`). The service creates it at its first
start with mode 0600 (atomically: replicas starting together end up with one key) and
refuses to start on a key file that others may read. The database never holds the
private key, so whoever can rewrite the database still cannot sign.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay_rules.canonical import canonical_json, key_id_of

if TYPE_CHECKING:
    from service.config import Settings
    from service.tables import RecordRow

ALGORITHM = "Ed25519"


class SigningKeyError(RuntimeError):
    """The signing key cannot be read, created, or is not kept private."""


def default_key_path(database_url: str) -> Path:
    """Beside a SQLite file database; `var/` (the SQLite default's folder) otherwise."""
    if database_url.startswith("sqlite:///") and not database_url.startswith("sqlite:///:memory:"):
        db = Path(database_url.removeprefix("sqlite:///"))
        return db.with_name(f"{db.stem}.signing-key.pem")
    return Path("var/assay.signing-key.pem")


def key_path(settings: Settings) -> Path:
    return settings.signing_key_path or default_key_path(settings.database_url)


class Signer:
    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_raw = private_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                                serialization.PublicFormat.Raw)
        self.key_id = key_id_of(self.public_raw)

    @classmethod
    def load_or_create(cls, path: Path) -> Signer:
        if not path.exists():
            _create(path)
        return cls(load_private(path))

    def sign(self, payload: Any) -> str:
        """Base64 Ed25519 signature over the payload's canonical JSON."""
        return base64.b64encode(self._key.sign(canonical_json(payload))).decode()

    def public_info(self) -> dict[str, str]:
        pem = self._key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        return {"key_id": self.key_id, "algorithm": ALGORITHM,
                "public_key": base64.b64encode(self.public_raw).decode(), "pem": pem}

    def receipt(self, row: RecordRow, task_sent: str | None = None) -> dict[str, Any]:
        """`task_sent`: the answered request's task as it named it (assay_rules.canonical.task_sent),
        signed with the record so a trainer can tell an answer about another task."""
        payload = receipt_payload(row)
        return self.signed(payload if task_sent is None else {**payload, "task_sent": task_sent})

    def signed(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A payload in a receipt's shape: {payload, key_id, signature}."""
        return {"payload": payload, "key_id": self.key_id, "signature": self.sign(payload)}


def receipt_payload(row: RecordRow) -> dict[str, Any]:
    payload = {"record_id": row.id, "task_hash": row.task_hash, "response_hash": row.response_hash,
               "verifier": row.verifier, "verifier_version": row.verifier_version, "verdict": row.verdict,
               "reward": row.reward, "components": row.components, "time": utc_iso(row.created_at)}
    # A caller's request_id names one record only (unique per key), so a trainer that sends a fresh
    # id and finds it signed knows the answer is that request's: not an earlier one, not the best
    # of several judgements a proxy asked for.
    return payload if row.request_id is None else {**payload, "request_id": row.request_id}


def utc_iso(moment: datetime) -> str:
    """A stored time as the chains and receipts write it (SQLite hands back naive UTC times)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


def public_key_of(path: Path) -> Ed25519PublicKey:
    """The public half of a key file: the private key (PKCS#8) or a public key (SubjectPublicKeyInfo)."""
    data = _read(path)
    if b"PUBLIC KEY" in data.split(b"\n", 1)[0]:
        key = serialization.load_pem_public_key(data)
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(f"{path}: not an Ed25519 public key")
        return key
    return load_private(path).public_key()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {path}: {exc.strerror}") from None


def load_private(path: Path) -> Ed25519PrivateKey:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyError(f"the signing key {path} may be read by others (mode {stat.S_IMODE(mode):04o}): "
                              f"run `chmod 600 {path}`")
    try:
        key = serialization.load_pem_private_key(_read(path), password=None)
    except ValueError as exc:
        raise SigningKeyError(f"{path}: not a PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path}: not an Ed25519 private key")
    return key


def _create(path: Path) -> None:
    """Write a new key with mode 0600 where none is; a key another process wrote first wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption())
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".signing-key-")  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # a key already there is never replaced
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
