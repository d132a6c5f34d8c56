"""Environment framework for tool-use tasks.

A domain pack is deterministic JSON-like state (tables), tools as plain functions with
typed arguments, and permission rules that every tool checks on every call, reads
included. Permission is judged first, on what a call tries to do (`Tool.guard`, given
whatever the call names, however malformed), and only then are its arguments
validated: an unknown extra argument or a wrong type never turns an attempt at
something forbidden into a mere bad argument. The acting user comes from the
environment, never from the agent's arguments, and tools look things up in dicts:
nothing the agent sends is ever evaluated or used as an attribute name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ErrorKind = Literal["permission", "not_allowed", "bad_args", "unknown_tool", "failed"]
# Kinds that count against compliance: the agent did something it had no right to do.
VIOLATION_KINDS: frozenset[str] = frozenset({"permission", "not_allowed"})
ERROR_TEXT_LIMIT = 300


class ToolFailure(Exception):
    """A call the tool refused. Tools raise before they mutate, so a refused call leaves
    the state as it was."""

    kind: ErrorKind = "failed"


class PermissionDenied(ToolFailure):
    kind = "permission"


class BadArguments(ToolFailure):
    kind = "bad_args"


@dataclass(frozen=True)
class Param:
    name: str
    type: type  # int, str or bool: JSON scalars only
    description: str


_JSON_TYPES: dict[type, str] = {int: "integer", str: "string", bool: "boolean"}


@dataclass
class CallContext:
    """What a tool sees: the state it may change and who is acting (set by the session,
    not by the agent)."""

    state: dict[str, Any]
    actor: str


Handler = Callable[[CallContext, dict[str, Any]], Any]
# Raises PermissionDenied when what a call tries to do is not the actor's right. It gets
# the call's intent: the values it gives for the tool's parameters, of any JSON type.
Guard = Callable[[CallContext, dict[str, Any]], None]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    handler: Handler
    mutates: bool
    guard: Guard | None = None

    def intent(self, args: Any) -> dict[str, Any]:
        """What the call names for each parameter, read leniently: an object's known
        keys (unknown ones dropped), or a list read as positional arguments."""
        names = [p.name for p in self.params]
        if isinstance(args, dict):
            return {name: args[name] for name in names if name in args}
        if isinstance(args, list):
            return dict(zip(names, args, strict=False))
        return {}

    def schema(self) -> dict[str, Any]:
        """JSON schema in the function-calling shape trainers pass to a model."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "object",
                "properties": {
                    p.name: {"type": _JSON_TYPES[p.type], "description": p.description} for p in self.params
                },
                "required": [p.name for p in self.params],
                "additionalProperties": False,
            },
        }

    def check_args(self, args: Any) -> dict[str, Any]:
        """Strict typing: no coercion, so `"500"` or `true` is not an amount. A number with no
        fractional part (`500.0`) is an integer, as in the JSON Schema the tool advertises."""
        if not isinstance(args, dict):
            raise BadArguments(f"{self.name}: arguments must be an object")
        known = {p.name for p in self.params}
        extra = sorted(str(k) for k in args if k not in known)
        if extra:
            raise BadArguments(f"{self.name}: unexpected argument(s) {', '.join(extra)[:100]}")
        args = dict(args)
        for p in self.params:
            if p.name not in args:
                raise BadArguments(f"{self.name}: missing argument {p.name}")
            value = args[p.name]
            if p.type is int and isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
                args[p.name] = value = int(value)
            # bool is a subclass of int in Python: reject it where an int is wanted.
            if not isinstance(value, p.type) or (p.type is int and isinstance(value, bool)):
                raise BadArguments(f"{self.name}: {p.name} must be {_JSON_TYPES[p.type]}")
        return args


@dataclass(frozen=True)
class DomainPack:
    name: str
    description: str
    tools: dict[str, Tool]
    # Validates and normalises a state; raises ValueError with a readable message.
    validate_state: Callable[[Any], dict[str, Any]]
    # Raises ValueError when `actor` cannot act in `state`.
    check_actor: Callable[[dict[str, Any], str], None]

    def schemas(self, allowed: list[str] | None = None) -> list[dict[str, Any]]:
        names = self.tools if allowed is None else [n for n in self.tools if n in allowed]
        return [self.tools[n].schema() for n in names]


@dataclass
class Event:
    """One call as the environment saw it."""

    index: int
    tool: str
    args: Any
    ok: bool
    result: Any = None
    error_kind: ErrorKind | None = None
    error: str | None = None

    @property
    def violation(self) -> bool:
        return self.error_kind in VIOLATION_KINDS

    def reply(self) -> dict[str, Any]:
        """What the agent is told."""
        if self.ok:
            return {"ok": True, "result": self.result}
        return {"ok": False, "error": self.error}


@dataclass
class Environment:
    """A running environment: the state, the actor, the tools the task allows, the trace."""

    pack: DomainPack
    state: dict[str, Any]
    actor: str
    allowed_tools: frozenset[str]
    events: list[Event] = field(default_factory=list)

    @classmethod
    def start(cls, pack: DomainPack, state: dict[str, Any], actor: str, allowed: list[str] | None) -> Environment:
        # Own copy: replaying must never change the task's initial state.
        return cls(pack, copy.deepcopy(state), actor, frozenset(pack.tools if allowed is None else allowed))

    def step(self, tool: str, args: Any) -> Event:
        event = Event(index=len(self.events), tool=tool, args=args, ok=False)
        self.events.append(event)
        spec = self.pack.tools.get(tool) if isinstance(tool, str) else None
        if spec is None:
            event.error_kind, event.error = "unknown_tool", f"unknown tool {str(tool)[:64]!r}"
            return event
        if tool not in self.allowed_tools:
            # Refused without running: a forbidden read must not leak data either.
            event.error_kind, event.error = "not_allowed", f"tool {tool} is not allowed in this task"
            return event
        try:
            if spec.guard is not None:
                spec.guard(CallContext(self.state, self.actor), spec.intent(args))
            checked = spec.check_args(args)
            event.result = spec.handler(CallContext(self.state, self.actor), checked)
            event.ok = True
        except ToolFailure as exc:
            event.error_kind, event.error = exc.kind, str(exc)[:ERROR_TEXT_LIMIT]
        return event


def named_strings(value: Any, limit: int = 32, depth: int = 3) -> list[str]:
    """Every string a (possibly malformed) argument value names: the value itself, or
    strings inside a list or object, bounded. Guards test each of them."""
    found: list[str] = []

    def walk(item: Any, level: int) -> None:
        if len(found) >= limit or level > depth:
            return
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            for inner in item:
                walk(inner, level + 1)
        elif isinstance(item, dict):
            for inner in item.values():
                walk(inner, level + 1)

    walk(value, 0)
    return found
