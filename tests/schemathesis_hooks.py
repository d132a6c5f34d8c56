"""Schemathesis hooks for tests/test_fuzz_api.py (loaded through SCHEMATHESIS_HOOKS).

Random bodies almost never make a valid task, so the operations behind an id (records,
environment steps) would only ever see 404s. Every other call to the operations that
create those ids is sent with a valid body instead, and the stateful phase follows the
OpenAPI links from their responses."""

from __future__ import annotations

import itertools
import os
from typing import Any

import schemathesis

_calls = itertools.count()


def _valid_bodies() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        ("POST", "/v1/envs"): {"verifier": "tool_state", "task_id": os.environ["ASSAY_FUZZ_ENV_TASK"]},
        ("POST", "/v1/verify"): {"verifier": "math", "task": {"answer": "2"}, "response": "\\boxed{2}"},
    }


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    body = _valid_bodies().get((case.operation.method.upper(), case.operation.path))
    if body is not None and next(_calls) % 2 == 0:
        case.body = body
