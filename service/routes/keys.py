"""API keys for admins: list them (never a secret) and revoke one (effective at once)."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from service.deps import AdminCaller, StoreDep
from service.errors import KeyNotFound, responses
from service.keys import KeyList, KeyOut, RevokeIn, list_keys, revoke_key

router = APIRouter(prefix="/v1/keys", tags=["keys"])
_errors = responses(KeyNotFound)


@router.get("", response_model=KeyList, responses=_errors)
async def keys(store: StoreDep, _: AdminCaller) -> KeyList:
    """Every key: id, name, scopes, creation, and its revocation if any."""
    return KeyList(keys=await anyio.to_thread.run_sync(list_keys, store))


@router.post("/{key_id}/revoke", response_model=KeyOut, responses=_errors)
async def revoke(key_id: str, body: RevokeIn, store: StoreDep, caller: AdminCaller) -> KeyOut:
    """Revoke a key: its API calls and viewer sign-ins stop at once (idempotent)."""
    return await anyio.to_thread.run_sync(revoke_key, store, key_id, f"key:{caller.key_id}", body.reason)
