"""Listing and revoking API keys. A revocation is an INSERT into the append-only
`key_revocations` table (key id, time, by whom, why): `api_keys` is never updated. Every
key check (API, `?api_key=`, viewer sign-ins) reads it, so a revoked key stops at once on
every replica."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select

from service.errors import KeyNotFound
from service.schemas import UnicodeText
from service.store import AuditStore
from service.tables import ApiKeyRow, KeyRevocationRow
from service.validation import printable


class KeyOut(BaseModel):
    key_id: str
    name: str | None
    scopes: list[str]
    created_at: datetime
    revoked: bool
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    reason: str | None = None


class KeyList(BaseModel):
    keys: list[KeyOut]


class RevokeIn(UnicodeText):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, max_length=500, description="Why the key is revoked (kept with the revocation).")


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def list_keys(store: AuditStore, limit: int = 10_000) -> list[KeyOut]:
    """Every key (never a secret or its hash), oldest first, with its first revocation."""
    first = (select(KeyRevocationRow.key_id, func.min(KeyRevocationRow.seq).label("seq"))
             .group_by(KeyRevocationRow.key_id).subquery())
    stmt = (select(ApiKeyRow, KeyRevocationRow)
            .outerjoin(first, first.c.key_id == ApiKeyRow.key_id)
            .outerjoin(KeyRevocationRow, KeyRevocationRow.seq == first.c.seq)
            .order_by(ApiKeyRow.created_at, ApiKeyRow.key_id).limit(limit))
    with store.db() as s:
        rows = s.execute(stmt).all()
    return [KeyOut(key_id=key.key_id, name=key.name, scopes=key.scopes.split(","), created_at=_aware(key.created_at),
                   revoked=bool(key.revoked) or rev is not None, revoked_at=_aware(rev.revoked_at) if rev else None,
                   revoked_by=rev.revoked_by if rev else None, reason=rev.reason if rev else None)
            for key, rev in rows]


def revoke_key(store: AuditStore, key_id: str, by: str, reason: str | None = None) -> KeyOut:
    """Revoke a key: one new row in `key_revocations`. Revoking a revoked key adds nothing."""
    with store.db() as s, s.begin():
        key = s.get(ApiKeyRow, key_id)
        if key is None:
            raise KeyNotFound(f"key {printable(key_id)!r} not found")
        already = s.scalar(select(KeyRevocationRow.seq).where(KeyRevocationRow.key_id == key_id).limit(1))
        if already is None and not key.revoked:
            s.add(KeyRevocationRow(key_id=key_id, revoked_by=by[:200], reason=reason))
    return next(k for k in list_keys(store) if k.key_id == key_id)
