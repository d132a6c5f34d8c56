"""The `tool_state` task model and what follows from it (the expected final state).

Validation runs the gold actions through the domain pack on the trusted side: that is
our own code on the task author's data, never on the agent's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from verifiers.base import TaskBase
from verifiers.tool_state.inside.env import Environment
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.wire import HARD_MAX_CALLS

MAX_GOLD_ACTIONS = 200


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str = Field(min_length=1, max_length=64)
    args: dict[str, Any] = {}


class ToolStateTask(TaskBase):
    hidden_fields: ClassVar[frozenset[str]] = frozenset(
        {"gold_actions", "expected_state", "required_outputs", "required_reads"}
    )

    environment: str
    actor: str
    initial_state: dict[str, Any]
    # None: every tool of the environment. Calling any other tool is a violation.
    allowed_tools: list[str] | None = None
    gold_actions: list[Action] = Field(default=[], max_length=MAX_GOLD_ACTIONS)
    expected_state: dict[str, Any] | None = None
    # Values the final message must state (matched as whole values, see checks.py).
    required_outputs: list[str] = Field(default=[], max_length=20)
    # Calls that must appear (successful, same tool and args) in the trace.
    required_reads: list[Action] = Field(default=[], max_length=20)
    max_calls: int = Field(default=64, ge=1, le=HARD_MAX_CALLS)
    max_message_chars: int = Field(default=4000, ge=1, le=100_000)
    max_unsupported_values: int = Field(default=1, ge=0)
    max_message_values: int = Field(default=12, ge=1)

    _initial: dict[str, Any] = PrivateAttr(default_factory=dict)
    _expected: dict[str, Any] = PrivateAttr(default_factory=dict)
    _public: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve(self) -> ToolStateTask:
        pack = get_pack(self.environment)
        initial = pack.validate_state(self.initial_state)
        pack.check_actor(initial, self.actor)
        if self.allowed_tools is not None:
            unknown = sorted(set(self.allowed_tools) - set(pack.tools))
            if unknown:
                raise ValueError(f"allowed_tools names tools {pack.name} does not have: {unknown}")
        env = Environment.start(pack, initial, self.actor, self.allowed_tools)
        for i, action in enumerate(self.gold_actions):
            event = env.step(action.tool, action.args)
            if not event.ok:
                raise ValueError(f"gold_actions[{i}] fails: {event.error}")
        for i, read in enumerate(self.required_reads):
            if self.allowed_tools is not None and read.tool not in self.allowed_tools:
                raise ValueError(f"required_reads[{i}] uses {read.tool}, which allowed_tools forbids")
        expected = env.state
        if self.expected_state is not None:
            explicit = pack.validate_state(self.expected_state)
            if self.gold_actions and explicit != expected:
                raise ValueError("expected_state disagrees with the state the gold_actions produce")
            expected = explicit
        if expected == initial and not self.required_outputs and not self.required_reads:
            # Otherwise an agent that does nothing passes.
            raise ValueError(
                "the expected state equals the initial state: the task must say what must be observed "
                "(required_outputs or required_reads)"
            )
        self._initial, self._expected = initial, expected
        return self

    def public_view(self) -> dict[str, Any]:
        """Cached: the service writes it into every record of a group, and a validated
        task is never changed (its states make it the costliest part of a record)."""
        if self._public is None:
            self._public = super().public_view()
        return self._public

    def replay_spec(self) -> dict[str, Any]:
        """What the sandboxed replay needs (everything but the response)."""
        return {
            "environment": self.environment,
            "actor": self.actor,
            "initial_state": self._initial,
            "allowed_tools": self.allowed_tools,
            "expected_state": self._expected,
            "required_outputs": self.required_outputs,
            "required_reads": [r.model_dump() for r in self.required_reads],
            "max_calls": self.max_calls,
            "max_message_chars": self.max_message_chars,
            "max_unsupported_values": self.max_unsupported_values,
            "max_message_values": self.max_message_values,
        }

    def initial(self) -> dict[str, Any]:
        return self._initial
