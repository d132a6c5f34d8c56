"""The grader side: runs the task's test code inside the grader sandbox pool.

This process holds the tests and decides pass/fail, and no candidate code ever runs in
it. Each `candidate(...)` call (and each other name the tests take from the candidate's
module) is a proxy that sends the arguments as plain data through the trusted host to
the separate candidate process and decodes the reply into built-in values. So the
candidate cannot patch `check`, `AssertionError` or this harness, cannot read the tests
from any frame or file, and cannot hand back an object with a rigged `__eq__`.

Standard library only (plus our stdlib-only `values`).
"""

from __future__ import annotations

import builtins
import importlib
import sys
from typing import Any

from verifiers.code import values
from verifiers.code.candidate import COMMON_MODULES

PRELOAD = ("verifiers.code.grader", *COMMON_MODULES)
TESTS_FILENAME = "<tests>"
PROMPT_FILENAME = "<prompt>"
MESSAGE_CHARS = 300
# Modules a test may take from the candidate's namespace by name (import math in the
# prompt, used bare by the test). Anything else is refused: a candidate must not make
# the grader import arbitrary modules.
_IMPORTABLE = frozenset(COMMON_MODULES) | {"sys", "json", "array", "cmath", "numbers", "textwrap", "unicodedata"}


class CandidateGone(BaseException):
    """The candidate process ended, exited or broke protocol during a call.

    A BaseException so that a test's `except Exception:` cannot swallow it: in an
    ordinary run, a program that exits or dies ends the tests with it.
    """


class CandidateError(Exception):
    """The candidate raised an exception that is not a built-in type."""


def _rebuild(error: dict[str, Any]) -> BaseException:
    message = str(error.get("message", ""))[:MESSAGE_CHARS]
    if error.get("exit"):
        return CandidateGone(f"candidate raised {error.get('type')} during the call")
    for name in error.get("bases") or []:
        kind = getattr(builtins, str(name), None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            try:
                exc = kind(message)
            except Exception:  # e.g. UnicodeDecodeError needs five arguments
                continue
            exc._assay_candidate = True  # type: ignore[attr-defined]
            return exc
    exc = CandidateError(f"{error.get('type')}: {message}")
    exc._assay_candidate = True  # type: ignore[attr-defined]
    return exc


def _proxy(channel: Any, name: str, counter: list[int]) -> Any:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        try:
            message = {"op": "call", "name": name, "args": values.encode(list(args)),
                       "kwargs": values.encode(dict(kwargs))}
        except values.Unencodable as exc:
            raise TypeError(f"cannot pass this argument to the candidate: {exc}") from None
        counter[0] += 1
        reply = channel.ask(message)
        # The host wraps the candidate's answer; anything else means the candidate is gone.
        if not isinstance(reply, dict) or "answer" not in reply:
            raise CandidateGone(str(reply.get("gone") if isinstance(reply, dict) else "no reply"))
        answer = reply["answer"]
        if not isinstance(answer, dict):
            raise CandidateGone("malformed answer from the candidate")
        if answer.get("ok") is True:
            try:
                return values.decode(answer.get("value"))
            except (ValueError, TypeError, RecursionError) as exc:
                raise CandidateGone(f"undecodable value from the candidate: {exc}") from None
        error = answer.get("error")
        raise _rebuild(error if isinstance(error, dict) else {})

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _bind_exports(namespace: dict[str, Any], exports: dict[str, Any], channel: Any, counter: list[int]) -> None:
    for name, info in exports.items():
        # Never let the candidate shadow a builtin (`abs`, `AssertionError`, `len`...).
        if not isinstance(name, str) or not name.isidentifier() or hasattr(builtins, name) or name in namespace:
            continue
        if not isinstance(info, dict):
            continue
        kind = info.get("kind")
        if kind == "callable":
            namespace[name] = _proxy(channel, name, counter)
        elif kind == "value":
            try:
                namespace[name] = values.decode(info.get("value"))
            except (ValueError, TypeError, RecursionError):
                continue
        elif kind == "module" and info.get("module") in _IMPORTABLE:
            namespace[name] = importlib.import_module(info["module"])


def _failure_line(tb: Any) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TESTS_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def grade(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Run `check(candidate)` from the task's tests against the proxied candidate."""
    counter = [0]
    namespace: dict[str, Any] = {"__name__": "__assay_tests__", "__builtins__": builtins}
    # Trusted definitions first (the task's prompt, e.g. HumanEval/32's `poly`): names
    # they define resolve to the task's own code, never to the candidate's redefinition.
    entry_point = payload["entry_point"]
    candidate = _proxy(channel, entry_point, counter)
    try:
        prompt = payload.get("prompt")
        if prompt:
            exec(compile(prompt, PROMPT_FILENAME, "exec"), namespace)
        _bind_exports(namespace, payload.get("exports") or {}, channel, counter)
        namespace[entry_point] = candidate
        exec(compile(payload["tests"], TESTS_FILENAME, "exec"), namespace)
    except BaseException as exc:
        if counter[0] == 0 and not isinstance(exc, CandidateGone):
            # Nothing of the candidate ran: the task's own code is broken.
            return {"status": "bad_tests", "message": "the task's prompt or tests raised " + type(exc).__name__}
        raise
    check = namespace.get("check")
    if not callable(check):
        return {"status": "bad_tests", "message": "the tests define no check(candidate)"}
    try:
        check(candidate)
    except CandidateGone as exc:
        return {"status": "gone", "message": str(exc)[:MESSAGE_CHARS], "calls": counter[0]}
    except BaseException as exc:
        tb = sys.exc_info()[2]
        return {
            "status": "fail" if isinstance(exc, AssertionError) else "error",
            "type": type(exc).__name__,
            # A message from the candidate's own exception is the candidate's text; a
            # message built by the test may quote expected values, so it is marked.
            "message": str(exc)[:MESSAGE_CHARS],
            "from_candidate": bool(getattr(exc, "_assay_candidate", False)),
            "line": _failure_line(tb),
            "calls": counter[0],
        }
    return {"status": "pass", "calls": counter[0]}
