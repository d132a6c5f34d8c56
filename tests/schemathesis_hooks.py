"""Schemathesis hooks for tests/test_fuzz_api.py (loaded through SCHEMATHESIS_HOOKS).

Random bodies almost never make a valid task, so the operations behind an id (records,
environment steps) would only ever see 404s. Every other call to the operations that
create those ids is sent with a valid body instead, and the stateful phase follows the
OpenAPI links from their responses. One call in five otherwise carries a hostile input
of issue 22's classes (see `_hostile`)."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import schemathesis

_calls = itertools.count()


def _valid_bodies() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        ("POST", "/v1/envs"): {"verifier": "tool_state", "task_id": os.environ["ASSAY_FUZZ_ENV_TASK"]},
        ("POST", "/v1/verify"): {"verifier": "math", "task": {"answer": "2"}, "response": "\\boxed{2}"},
    }


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def _hostile(case: Any, kwargs: dict[str, Any], n: int) -> None:
    """The input classes of issue 22, mixed into generated calls: a lone surrogate in a dict
    key, nesting past the depth limit, a cursor past 64 bits. Each must be a 4xx. Bodies go
    as raw bytes (`kwargs["data"]`): Schemathesis itself cannot hold a lone surrogate."""
    if case.operation.method.upper() == "GET" and case.operation.path == "/v1/records":
        case.query = {**(case.query or {}), "after": 2**70}
    elif isinstance(case.body, dict):
        body = {**case.body, "x\ud800": 1} if n % 2 else {**case.body, "deep": _nested(200)}
        kwargs["data"] = json.dumps(body).encode()  # ensure_ascii: the surrogate goes as its \\ud800 escape


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    n = next(_calls)
    if (case.path_parameters or {}).get("key_id") == os.environ.get("ASSAY_FUZZ_KEY_ID"):
        case.path_parameters = {**case.path_parameters, "key_id": "not-the-fuzzers-own-key"}  # it would lock itself out
    body = _valid_bodies().get((case.operation.method.upper(), case.operation.path))
    if body is not None and n % 2 == 0:
        case.body = body
    elif n % 5 == 1:
        _hostile(case, kwargs, n)
