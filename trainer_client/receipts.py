"""Signed reward receipts, checked on the trainer's side (the canonical JSON they sign is `assay_rules.canonical`).

Every result the service returns carries
`receipt = {"payload": {...}, "key_id": ..., "signature": ...}`: an Ed25519 signature
(base64) over the payload serialised by `canonical_json` (keys sorted, no whitespace,
UTF-8, no NaN). The service signs with this same function (`assay_rules.canonical`), so
the rule is defined once. The payload holds the record id, task hash, response
hash, verifier and its version, verdict, reward, components and time.

`ReceiptKey` is the service's public key (from `GET /v1/receipts/key` or
`assay receipts key`, handed to the trainer out of band). `check_result` refuses a
result whose receipt is missing, signed by another key, forged, or does not say what the
result says (reward, verdict, components, record id, verifier, and the response the
trainer sent). The standard library, `cryptography` and `assay_rules` only: nothing of the service.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from assay_rules.canonical import canonical_json, eval_report_digest, key_id_of, response_hash

PAYLOAD_FIELDS = ("record_id", "task_hash", "response_hash", "verifier", "verifier_version", "verdict", "reward",
                  "components", "time")


class ReceiptError(RuntimeError):
    """A result's receipt is missing, forged, signed by another key, or disagrees with the result:
    something between the service and the trainer changed the answer. The reward must not be used."""


@dataclass(frozen=True)
class ReceiptKey:
    """An Ed25519 public key that receipts must be signed with."""

    raw: bytes

    @property
    def key_id(self) -> str:
        return key_id_of(self.raw)

    @classmethod
    def parse(cls, value: str | bytes | ReceiptKey) -> ReceiptKey:
        """The key as `GET /v1/receipts/key` gives it (`public_key`, base64 of the raw 32 bytes), or PEM."""
        if isinstance(value, ReceiptKey):
            return value
        text = value.decode() if isinstance(value, bytes) else value
        text = text.strip()
        if text.startswith("-----BEGIN"):
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            loaded = serialization.load_pem_public_key(text.encode())
            if not isinstance(loaded, Ed25519PublicKey):
                raise ValueError("receipt key: the PEM key is not an Ed25519 public key")
            return cls(loaded.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("receipt key: not base64 of an Ed25519 public key, nor PEM") from None
        if len(raw) != 32:
            raise ValueError(f"receipt key: an Ed25519 public key has 32 bytes, this one {len(raw)}")
        return cls(raw)

    def verify(self, receipt: Any) -> dict[str, Any]:
        """The receipt's payload if its signature is this key's; raises ReceiptError otherwise."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        if not isinstance(receipt, Mapping):
            raise ReceiptError("the result carries no receipt")
        payload, key_id, signature = receipt.get("payload"), receipt.get("key_id"), receipt.get("signature")
        if not isinstance(payload, dict) or not isinstance(signature, str):
            raise ReceiptError("the receipt is malformed (needs payload and signature)")
        if key_id != self.key_id:
            raise ReceiptError(f"the receipt is signed by key {key_id!r}, not the service's key {self.key_id!r}")
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(base64.b64decode(signature, validate=True),
                                                                canonical_json(payload))
        except (InvalidSignature, binascii.Error, ValueError):
            raise ReceiptError(f"the receipt's signature does not match its payload (record "
                               f"{payload.get('record_id')!r}): forged or changed on the way") from None
        return payload


def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
        return a == b
    return float(a) == float(b)


def _components(value: Any) -> dict[str, tuple[Any, Any]]:
    """name -> (value, hard) from the service's component shape {name: {"value", "hard"}}."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): (v.get("value"), v.get("hard")) if isinstance(v, Mapping) else (v, None) for k, v in value.items()}


def check_result(result: Mapping[str, Any], key: ReceiptKey, response: str | None = None,
                 task: str | None = None) -> dict[str, Any]:
    """Check one result (a /v1/verify answer, or one of a group's `results`) against its receipt.

    `response`: the text the trainer sent for it, when known; the receipt must name its hash.
    `task`: `assay_rules.canonical.task_sent` of the verifier and task the trainer sent, when
    known; the receipt must carry the same `task_sent` (a genuine answer about the same response
    judged against another task is refused). Returns the signed payload; raises ReceiptError
    naming what differs."""
    payload = key.verify(result.get("receipt"))
    where = f"record {payload.get('record_id')!r}"
    missing = [name for name in PAYLOAD_FIELDS if name not in payload]
    if missing:
        raise ReceiptError(f"{where}: the receipt's payload lacks {', '.join(missing)}")
    if not _same_number(result.get("reward"), payload["reward"]):
        raise ReceiptError(f"{where}: reward {result.get('reward')!r} differs from the signed {payload['reward']!r}")
    for name in ("record_id", "verifier", "verifier_version", "verdict", "task_hash"):
        if name in result and result[name] != payload[name]:
            raise ReceiptError(f"{where}: {name} {result[name]!r} differs from the signed {payload[name]!r}")
    got, signed = _components(result.get("components")), _components(payload["components"])
    if got.keys() != signed.keys() or any(not _same_number(got[k][0], signed[k][0]) or got[k][1] != signed[k][1]
                                          for k in signed):
        raise ReceiptError(f"{where}: components {result.get('components')!r} differ from the signed "
                           f"{payload['components']!r}")
    if response is not None and payload["response_hash"] != response_hash(response):
        raise ReceiptError(f"{where}: the receipt is for another response than the one sent")
    if task is not None:
        check_task_sent(payload, task)
    return payload


def check_task_sent(payload: Mapping[str, Any], task: str, request_id: str | None = None) -> None:
    """Raises ReceiptError unless a checked receipt's payload signs `task`
    (`assay_rules.canonical.task_sent` of the verifier and task the trainer sent) and, for a
    /v1/verify call, the call's `request_id` (one record per id and key, so a fresh id signed
    means this call's own judgement)."""
    where = f"record {payload.get('record_id')!r}"
    if payload.get("task_sent") != task:
        raise ReceiptError(f"{where}: the receipt answers another request, about another task than the one "
                           f"sent (task_sent {payload.get('task_sent')!r})")
    if request_id is not None and payload.get("request_id") != request_id:
        raise ReceiptError(f"{where}: the receipt answers another request (request_id "
                           f"{payload.get('request_id')!r}, not {request_id!r})")


def check_eval(report: Mapping[str, Any], key: ReceiptKey, name: str, checkpoint: str,
               sent: Mapping[str, list[tuple[str, list[str]]]]) -> dict[str, Any]:
    """Check a POST /v1/evals answer: every record's receipt, and the service's signature over the
    figures (`signed`), which must name this report, these receipts in order, the name and
    checkpoint sent and, per family, the tasks sent in order. `sent`: family -> [(task_sent,
    [response texts])] as the request named them; the receipts must be for exactly those
    responses. Returns the signed payload; raises ReceiptError naming what differs."""
    receipts = report.get("receipts")
    if not isinstance(receipts, list):
        raise ReceiptError("the evaluation carries no receipts")
    payloads = [key.verify(r) for r in receipts]
    want = sorted(response_hash(text) for groups in sent.values() for _, texts in groups for text in texts)
    if sorted(str(p.get("response_hash")) for p in payloads) != want:
        raise ReceiptError(f"the evaluation's {len(payloads)} receipts are not for the {len(want)} responses sent")
    signed = key.verify(report.get("signed"))
    expected = {"eval_id": report.get("id"), "name": name, "checkpoint": checkpoint,
                "report": eval_report_digest(report) if "families" in report and "overall" in report else None,
                "records": [p.get("record_id") for p in payloads],
                "task_sent": {family: [task for task, _ in groups] for family, groups in sent.items()}}
    differs = [field for field, value in expected.items() if signed.get(field) != value]
    if differs:
        raise ReceiptError(f"evaluation {report.get('id')!r}: {', '.join(differs)} differ from what the service "
                           f"signed: the figures were changed, or the report answers another request")
    return signed


class ReplayGuard:
    """Refuses a genuine receipt handed back for another request than the one it answered.

    A receipt binds its record, task and response, not the request: a proxy that kept a
    genuine answer could hand it back when the same response text is verified again (for
    another task, at a later step), and every byte would verify. So the client remembers
    which request it accepted each record id for (the newest `capacity` of them) and refuses
    a record id it already accepted for another request; and it refuses a receipt older
    than the request that asked for it by more than `max_age_s` (an allowance for the two
    clocks' difference; None turns it off), which covers answers kept from before this
    process started. A request that names its own `request_id` may be answered by the
    record logged for that id earlier, so only the first check applies to it.

    Past `capacity`, the oldest ids are forgotten; the newest signed time among them is kept
    (`_floor`), and a receipt signed at or before it that is not remembered is refused: it
    could be one of the forgotten, handed back within the age allowance. The service's
    receipts are signed in time order, so a fresh answer is always newer.
    """

    def __init__(self, max_age_s: float | None = 300.0, capacity: int = 200_000) -> None:
        self.max_age = None if max_age_s is None else timedelta(seconds=max_age_s)
        self.capacity = capacity
        self._seen: OrderedDict[str, tuple[str, datetime | None]] = OrderedDict()
        self._floor: datetime | None = None
        self._lock = threading.Lock()

    def accept(self, payload: Mapping[str, Any], request: str, sent_at: datetime | None) -> None:
        """`request`: what identifies the request (its request_id, or one token per call);
        `sent_at`: when it was first sent (aware UTC), None when an older record may answer it."""
        record_id = str(payload.get("record_id"))
        try:
            signed_at: datetime | None = datetime.fromisoformat(str(payload.get("time")))
        except ValueError:
            signed_at = None
        if signed_at is not None and signed_at.tzinfo is None:
            signed_at = None
        if sent_at is not None and self.max_age is not None:
            if signed_at is None:
                raise ReceiptError(f"record {record_id!r}: the receipt's time is not an aware time")
            if signed_at < sent_at - self.max_age:
                raise ReceiptError(f"record {record_id!r}: the receipt was signed at {payload.get('time')}, before "
                                   f"this request was sent: an earlier answer handed back")
        with self._lock:
            before = self._seen.get(record_id)
            if before is not None and before[0] != request:
                raise ReceiptError(f"record {record_id!r}: this receipt already answered another request")
            if (before is None and sent_at is not None and self._floor is not None
                    and (signed_at is None or signed_at <= self._floor)):
                raise ReceiptError(f"record {record_id!r}: the receipt is no newer than receipts this client "
                                   f"accepted and has since forgotten: possibly an earlier answer handed back")
            self._seen[record_id] = (request, signed_at)
            self._seen.move_to_end(record_id)
            while len(self._seen) > self.capacity:
                _, (_, forgotten) = self._seen.popitem(last=False)
                if forgotten is not None and (self._floor is None or forgotten > self._floor):
                    self._floor = forgotten
