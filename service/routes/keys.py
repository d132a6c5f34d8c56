"""API keys for admins: list them (never a secret) and revoke one (effective at once)."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends, HTTPException, Request

from service.auth import Caller, require_scope
from service.keys import KeyList, KeyNotFound, KeyOut, RevokeIn, list_keys, revoke_key
from service.schemas import ErrorOut

router = APIRouter(prefix="/v1/keys", tags=["keys"])
_errors = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut}, 422: {"model": ErrorOut}}


@router.get("", response_model=KeyList, responses=_errors)
async def keys(request: Request, _: Caller = Depends(require_scope("admin"))) -> KeyList:
    """Every key: id, name, scopes, creation, and its revocation if any."""
    return KeyList(keys=await anyio.to_thread.run_sync(list_keys, request.app.state.store))


@router.post("/{key_id}/revoke", response_model=KeyOut, responses=_errors)
async def revoke(key_id: str, body: RevokeIn, request: Request,
                 caller: Caller = Depends(require_scope("admin"))) -> KeyOut:
    """Revoke a key: its API calls and viewer sessions stop at once (idempotent)."""
    try:
        return await anyio.to_thread.run_sync(revoke_key, request.app.state.store, key_id,
                                              f"key:{caller.key_id}", body.reason)
    except KeyNotFound as exc:
        raise HTTPException(404, str(exc)) from None
