"""The public key that signs reward receipts and the audit chains' heads."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from service.deps import SignerDep

router = APIRouter(prefix="/v1/receipts", tags=["rewards"])


class ReceiptKeyOut(BaseModel):
    key_id: str = Field(description="Receipts name it in `key_id`.")
    algorithm: str = Field(description="Always `Ed25519`.")
    public_key: str = Field(description="Base64 of the raw 32-byte public key (trainer_client's `receipt_key`).")
    pem: str = Field(description="The same key as PEM (SubjectPublicKeyInfo).")


@router.get("/key", response_model=ReceiptKeyOut)
async def receipt_key(signer: SignerDep) -> ReceiptKeyOut:
    """The public key of this deployment. Public: it lets anyone check a receipt, not make one.
    Pin it in the trainer from a channel you trust (`assay receipts key` on the server)."""
    return ReceiptKeyOut(**signer.public_info())
