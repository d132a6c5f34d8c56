"""The `proof` task model: which statement to prove, in which database, under what rules.

The database is a shipped one (Debian's metamath-databases, read by name inside the
sandbox) or an inline `.mm` text of bounded size. What the task names (theorem, labels,
axioms) is checked against the database in the sandbox and reported as a 4xx naming the
field when it does not fit.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from verifiers.base import TaskBase

LABEL_PATTERN = r"^[A-Za-z0-9._-]+$"
DATABASE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
LABEL_RE = re.compile(LABEL_PATTERN)
MAX_INLINE_DATABASE_CHARS = 2_000_000
MAX_MATH_STRING_CHARS = 20_000


class Hypothesis(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str | None = Field(None, pattern=LABEL_PATTERN, max_length=100)
    expression: str = Field(min_length=1, max_length=MAX_MATH_STRING_CHARS,
                            validation_alias=AliasChoices("expression", "statement", "assertion"))


class Statement(BaseModel):
    """A new statement: `|- ...` math strings; hypotheses are labelled LABEL.1, LABEL.2, ...
    unless given as {"label", "expression"}."""

    model_config = ConfigDict(extra="forbid")
    label: str = Field(pattern=LABEL_PATTERN, max_length=100)
    hypotheses: list[Hypothesis] = Field(default=[], max_length=100)
    assertion: str = Field(min_length=1, max_length=MAX_MATH_STRING_CHARS)
    # Disjoint-variable restrictions, each like a `$d x y z $.` line: ["x y z"] or [["x", "y", "z"]].
    disjoint: list[list[str]] = Field(default=[], max_length=1000)

    @field_validator("hypotheses", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"expression": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("disjoint", mode="before")
    @classmethod
    def _split_lines(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [item.split() if isinstance(item, str) else item for item in value]
        return value

    @field_validator("disjoint")
    @classmethod
    def _groups(cls, value: list[list[str]]) -> list[list[str]]:
        for group in value:
            if len(group) < 2 or len(group) > 100:
                raise ValueError("each disjoint group names 2 to 100 variables")
        return value


class ProofTask(TaskBase):
    system: Literal["metamath"] = "metamath"
    database: str = Field("set.mm", pattern=DATABASE_NAME_PATTERN, max_length=100,
                          description="A shipped database (metamath-databases), or a name for database_text.")
    database_text: str | None = Field(
        None, max_length=MAX_INLINE_DATABASE_CHARS,
        validation_alias=AliasChoices("database_text", "inline_database"),
        description="An inline .mm database used instead of a shipped one.")
    theorem: str | None = Field(None, pattern=LABEL_PATTERN, max_length=100,
                                description="Prove this $p of the database using only statements before it.")
    statement: Statement | None = Field(None, description="Prove this new statement using the whole database.")
    allowed: list[str] | None = Field(
        None, max_length=50_000,
        description="Labels a proof may cite (syntax constructors and the statement's hypotheses always may).")
    forbidden_axioms: list[str] = Field(default=[], max_length=2_000)
    timeout_s: float = Field(10.0, gt=0, le=60, description="Time to check one proof.")
    max_proof_steps: int = Field(100_000, ge=1, le=1_000_000)
    max_expression: int = Field(20_000, ge=10, le=200_000, description="Symbols in one intermediate expression.")

    @field_validator("allowed", "forbidden_axioms")
    @classmethod
    def _labels(cls, value: list[str] | None) -> list[str] | None:
        for label in value or []:
            if not LABEL_RE.match(label) or len(label) > 100:
                raise ValueError(f"{label[:100]!r} is not a Metamath label")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> ProofTask:
        if (self.theorem is None) == (self.statement is None):
            raise ValueError("give exactly one of theorem and statement")
        return self

    def database_spec(self) -> dict[str, Any]:
        """How the sandbox finds the database: by shipped name, or the inline text and its hash."""
        if self.database_text is None:
            return {"name": self.database}
        digest = hashlib.sha256(self.database_text.encode()).hexdigest()
        return {"text": self.database_text, "sha256": digest}
