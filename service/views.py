"""Who sees what of a decision: the one place that chooses between `feedback` and full
`evidence` for an answer.

- Every result carries `feedback` (what a policy may be shown, see verifiers/feedback.py).
- A registered task's hidden data came from an admin, not the caller: its results carry
  the feedback as their `evidence`, and flags computed from hidden data are left out,
  unless the request asks for `"evidence": "full"` with a key that holds `audit` (which
  reads the same full evidence from the records anyway).
- An inline task's hidden data came from the caller: full evidence by default; a request
  may ask for `"evidence": "feedback"` to get the policy's view only.
- Environment sessions answer with the feedback view whatever the task: what they return
  is what an agent loop shows the policy.
Records always keep the full evidence (and the feedback as it was shown) for auditors.
"""

from __future__ import annotations

from typing import Literal

from service.auth import Caller
from service.errors import EvidenceForbidden
from service.schemas import VerifyResult

View = Literal["full", "feedback"]


def choose(caller: Caller, registered: bool, requested: View | None, where: str = "evidence") -> View:
    if not registered:
        return requested or "full"
    if requested == "full":
        if not caller.scopes & {"audit", "admin"}:
            raise EvidenceForbidden(f"{where}: full evidence of a registered task needs a key with the 'audit' "
                                    "scope; its hidden data is not the caller's")
        return "full"
    return "feedback"


def shown(result: VerifyResult, view: View, hidden_flags: frozenset[str] = frozenset()) -> VerifyResult:
    """`result` as the chosen view shows it."""
    if view == "full":
        return result
    flags = [f for f in result.flags if f not in hidden_flags]
    return result.model_copy(update={
        "evidence": dict(result.feedback),
        "flags": flags,
        "flag_evidence": {k: v for k, v in result.flag_evidence.items() if k in flags},
    })
