"""Task certification for code: a reference solution (given with the request) must pass;
`pass`, the prompt unchanged, exits, an always-equal object and the visible examples
hard-coded must not."""

from __future__ import annotations

import ast
from typing import Any

from verifiers.base import Probe, TaskBase

MAX_HARDCODED_EXAMPLES = 50


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _function(entry: str, body: str, prelude: str = "") -> str:
    return f"{prelude}def {entry}(*args, **kwargs):\n    {body}\n"


ALWAYS_EQUAL = (
    "class _AlwaysEqual:\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    __hash__ = object.__hash__\n"
)


def visible_examples(visible_tests: str) -> list[tuple[Any, Any]]:
    """(arguments, expected) of `candidate(...) == value` comparisons with literal values."""
    found: list[tuple[Any, Any]] = []
    for node in ast.walk(ast.parse(visible_tests)):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
            continue
        call, expected = node.left, node.comparators[0]
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
            continue
        try:
            args = tuple(ast.literal_eval(a) for a in call.args)
            value = ast.literal_eval(expected)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        found.append((args, value))
    return found[:MAX_HARDCODED_EXAMPLES]


def probes(task: TaskBase) -> list[Probe]:
    entry = task.entry_point  # type: ignore[attr-defined]
    out: list[Probe] = []
    if entry:
        out += [
            Probe("pass", _fenced(_function(entry, "pass"))),
            Probe("sys_exit", _fenced(_function(entry, "sys.exit(0)", "import sys\n") + "sys.exit(0)\n")),
            Probe("os_exit", _fenced(_function(entry, "os._exit(0)", "import os\n") + "os._exit(0)\n")),
            Probe("raise_system_exit", _fenced(_function(entry, "raise SystemExit(0)") + "raise SystemExit(0)\n")),
            Probe("always_equal", _fenced(_function(entry, "return _AlwaysEqual()", ALWAYS_EQUAL))),
        ]
        examples = visible_examples(task.visible_tests) if task.visible_tests else []  # type: ignore[attr-defined]
        if examples:
            table = repr({repr(args): value for args, value in examples})
            out.append(Probe("visible_examples_hardcoded", _fenced(
                f"_SEEN = {table}\n" + _function(entry, "return _SEEN.get(repr(args))"))))
    else:
        out += [
            Probe("pass", _fenced("pass")),
            Probe("sys_exit", _fenced("import sys\nsys.exit(0)")),
            Probe("os_exit", _fenced("import os\nos._exit(0)")),
            Probe("raise_system_exit", _fenced("raise SystemExit(0)")),
        ]
        visible = task.visible_io_cases or []  # type: ignore[attr-defined]
        if visible:
            table = repr({case.stdin: case.stdout for case in visible[:MAX_HARDCODED_EXAMPLES]})
            out.append(Probe("visible_examples_hardcoded", _fenced(
                f"import sys\n_SEEN = {table}\nsys.stdout.write(_SEEN.get(sys.stdin.read(), ''))")))
    if task.prompt:
        out.append(Probe("prompt_unchanged", _fenced(task.prompt)))
    return out


def time_budget_s(task: TaskBase) -> float:
    cases = 1 if task.tests is not None else len(task.io_cases or [])  # type: ignore[attr-defined]
    visible = (1 if task.visible_tests else 0) + len(task.visible_io_cases or [])  # type: ignore[attr-defined]
    per_case = task.time_limit_s * (task.time_factor or 2.0 if task.language != "python" else 1.0)  # type: ignore[attr-defined]
    # A compiled language pays its compile once (verifiers/code/native.py's own limit).
    compile_s = 60.0 if task.language != "python" else 0.0  # type: ignore[attr-defined]
    return per_case * (cases + visible) + compile_s
