"""The `sql` task model: what a client sends, validated at the edge (pydantic v2)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from verifiers.base import TaskBase

# JSON cell values an explicit expected result may hold.
Cell = int | float | str | bool | None


class RowCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=0)


class Predicate(BaseModel):
    """Constraints on the response's rows instead of a gold query: every row must make
    `sql` true, where `sql` is an SQL boolean expression over the result columns named
    c1..cN (it may also read the instance's tables, e.g. in an EXISTS subquery)."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1)
    columns: int | None = Field(None, ge=1, description="required number of result columns")
    row_count: RowCount = Field(default_factory=RowCount)
    distinct: bool = Field(False, description="rows must be pairwise distinct")


class SqlTask(TaskBase):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    hidden_fields: ClassVar[frozenset[str]] = frozenset({"gold", "expected", "predicate", "instances"})

    dialect: Literal["sqlite", "postgres"] = "sqlite"
    # `schema` would shadow a BaseModel attribute, hence the alias.
    schema_sql: str = Field(alias="schema", min_length=1, max_length=1_000_000)
    instances: list[Annotated[str, Field(max_length=4_000_000)]] = Field(
        min_length=1, max_length=16, description="data scripts, one database each")
    mode: Literal["query", "mutation"] = "query"
    gold: str | None = Field(None, max_length=100_000)
    expected: list[list[list[Cell]]] | None = Field(
        None, description="explicit expected rows, one list of rows per instance (query mode)"
    )
    expected_columns: list[str] | None = None
    predicate: Predicate | None = None
    order_matters: bool | None = Field(None, description="default: the gold's outermost ORDER BY")
    float_tolerance: float = Field(1e-9, ge=0.0, le=1.0, description="relative, applied only to floats")
    float_abs_tolerance: float = Field(1e-12, ge=0.0, le=1.0)
    column_names_matter: bool = False
    show_expected: bool = Field(
        False, description="allow expected (gold) rows in evidence diffs; leave off for hidden tasks"
    )
    timeout_s: float = Field(2.0, gt=0.0, le=30.0, description="per statement, per instance")
    max_rows: int = Field(10_000, ge=1, le=100_000)
    max_result_bytes: int = Field(1_000_000, ge=1_000, le=8_000_000)

    # SQL tasks carry whole data scripts, so hashing one costs real time, and the service
    # asks for the public view once per audit record: both are computed once per task
    # object (tasks are never mutated after validation).
    _hash: str | None = PrivateAttr(default=None)
    _public: dict[str, Any] | None = PrivateAttr(default=None)

    def task_hash(self) -> str:
        if self._hash is None:
            self._hash = super().task_hash()
        return self._hash

    def public_view(self) -> dict[str, Any]:
        if self._public is None:
            self._public = super().public_view()
        return dict(self._public)

    @model_validator(mode="after")
    def _one_source_of_truth(self) -> SqlTask:
        sources = [name for name in ("gold", "expected", "predicate") if getattr(self, name) is not None]
        if len(sources) != 1:
            raise ValueError(f"give exactly one of gold, expected, predicate (got {sources or 'none'})")
        if self.mode == "mutation" and self.gold is None:
            raise ValueError("mutation tasks are judged against a gold statement")
        if self.expected is not None and len(self.expected) != len(self.instances):
            raise ValueError("expected needs one list of rows per instance")
        if self.predicate is not None and self.order_matters:
            raise ValueError("order_matters does not apply to predicate tasks")
        return self

    def limits_payload(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "build_timeout_s": 10.0,
            "max_rows": self.max_rows,
            "max_result_bytes": self.max_result_bytes,
            "max_value_bytes": 1_000_000,
            "max_sql_bytes": 1_000_000,
            "heap_mb": 256,
        }
