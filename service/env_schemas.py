"""Request and response models of the environment-session endpoints (`/v1/envs`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas import RunTag, TaskRef, UnicodeText
from verifiers.tool_state.wire import MAX_TOOL_NAME

VERIFIER = "tool_state"


class _Strict(UnicodeText):
    model_config = ConfigDict(extra="forbid")


class OpenEnv(TaskRef):
    verifier: str = Field(VERIFIER, description="Only `tool_state` tasks have environments.",
                          json_schema_extra={"enum": [VERIFIER]})
    task: dict[str, Any] | None = Field(None, description="A `tool_state` task inline.")
    run: RunTag | None = Field(None, description="The training run and step of this rollout (the finish may "
                                                 "name a later step).")

    @model_validator(mode="after")
    def _tool_state_only(self) -> OpenEnv:
        if self.verifier != VERIFIER:
            raise ValueError(f"environments exist only for the {VERIFIER!r} verifier")
        return self


class OpenedEnv(BaseModel):
    env_id: str
    environment: str
    actor: str = Field(description="The user the agent acts as; tools take identity from the session, not arguments.")
    tools: list[dict[str, Any]] = Field(description="Function schemas of the tools this task allows.")
    max_steps: int
    expires_in_s: float = Field(description="Idle time after which the session is dropped.")


class StepRequest(_Strict):
    tool: str = Field(min_length=1, max_length=MAX_TOOL_NAME)
    args: dict[str, Any] = {}


class StepResult(BaseModel):
    ok: bool
    result: Any = None
    error: str | None = None
    step: int = Field(description="Index of this call in the trace.")
    steps_left: int


class FinishRequest(_Strict):
    final_message: str = Field(description="The agent's final message to the user.")
    request_id: str | None = Field(None, max_length=200)
    run: RunTag | None = Field(None, description="The run and step to log the record under; default: the open's.")
