"""The `code` task model: assert-style tests or stdin/stdout cases, with hidden fields."""

from __future__ import annotations

import ast
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from verifiers.base import TaskBase

MAX_TEST_CHARS = 1_000_000
MAX_CASES = 1000
DEFAULT_OUTPUT_BYTES = 1_000_000
MAX_OUTPUT_BYTES = 64_000_000
# Left at its default, the output limit makes room for the task's own answers: this many
# times the largest expected stdout (a right answer may space or format it otherwise), rounded
# up to a power of two. A response can find the limit through its verdict (`violation` once it
# writes more), so the limit tells it at most which power of two that answer's size is near.
OUTPUT_ROOM = 2


class IOCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stdin: str = Field("", max_length=16_000_000)
    stdout: str = Field(max_length=16_000_000)
    name: str | None = Field(None, max_length=100)


class Checker(BaseModel):
    """A special checker (testlib conventions): run per case as
    `checker input.txt output.txt answer.txt`; exit 0 accepted, 1 wrong answer,
    2 presentation error, 3 checker failure (verdict `error`), 7 points (`points X` on
    its stderr, X in [0, 1])."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["c", "cpp", "java", "javascript", "go", "rust", "python"] = "cpp"
    source: str = Field(max_length=MAX_TEST_CHARS)


def _defines_check(source: str, field: str) -> None:
    # Parsing the task's own test source (trusted input from the trainer or admin) only
    # checks its shape early, so a broken task is a 422 rather than an `error` per response.
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"{field} is not valid Python: {exc.msg} (line {exc.lineno})") from None
    if not any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in tree.body):
        raise ValueError(f"{field} must define check(candidate) at top level")


class CodeTask(TaskBase):
    """A task for the `code` verifier.

    Exactly one of `tests` (HumanEval style: source defining `check(candidate)`, not
    calling it, plus `entry_point`) and `io_cases` (stdin -> expected stdout) is given.
    """

    hidden_fields: ClassVar[frozenset[str]] = frozenset({"tests", "io_cases", "checker", "interactor"})
    # Added with the compiled languages: left out of the hash at their defaults.
    hashed_when_set: ClassVar[frozenset[str]] = TaskBase.hashed_when_set | {"checker", "time_factor", "interactor"}

    language: Literal["python", "c", "cpp", "java", "javascript", "go", "rust"] = Field(
        "python", description="python: function tests or io_cases; the others: io_cases (docs/languages.md).")
    checker: Checker | None = Field(None, description="A special checker for io_cases (testlib conventions).")
    time_factor: float | None = Field(
        None, gt=0.0, le=10.0, description="Multiplies time_limit_s for this language (default: the language's own).")
    entry_point: str | None = Field(None, max_length=100)
    tests: str | None = Field(None, max_length=MAX_TEST_CHARS)
    io_cases: list[IOCase] | None = Field(None, max_length=MAX_CASES)
    # Visible tests may be shown to the policy; they run too and are reported by content.
    visible_tests: str | None = Field(None, max_length=MAX_TEST_CHARS)
    visible_io_cases: list[IOCase] | None = Field(None, max_length=MAX_CASES)
    # Trusted code the candidate's module starts with (e.g. HumanEval's prompt). Names it
    # defines resolve, in the grader, to these definitions and never to the candidate's.
    prompt: str | None = Field(None, max_length=MAX_TEST_CHARS)
    compare: Literal["exact", "lines", "whitespace", "float"] = "whitespace"
    float_tolerance: float = Field(1e-6, ge=0.0, le=1.0)
    time_limit_s: float = Field(5.0, gt=0.0, le=60.0, description="per test")
    memory_mb: int = Field(512, ge=64, le=8192)
    output_bytes: int = Field(
        DEFAULT_OUTPUT_BYTES, ge=1024, le=MAX_OUTPUT_BYTES,
        description="stdout/stderr cap per run. Left unset: at least twice the largest expected stdout.")
    partial_credit: bool = False
    # Interactive problems (verifiers/code/interactive.py): each io case's stdin is the
    # interactor's input file and its stdout the interactor's answer file.
    interactor: Checker | None = Field(
        None, description="An interactor for io_cases, in a sandbox of its own (testlib conventions).")

    _largest_answer: int = PrivateAttr(0)

    @property
    def output_limit_bytes(self) -> int:
        """What one run may write to stdout (and to stderr): `output_bytes` as given, or, left
        at its default, room for the task's own answers (an interactor's answer files are
        not the program's output)."""
        if "output_bytes" in self.model_fields_set or self.interactor is not None:
            return self.output_bytes
        room = OUTPUT_ROOM * self._largest_answer
        return max(self.output_bytes, min(MAX_OUTPUT_BYTES, 1 << (room - 1).bit_length() if room > 1 else 0))

    @model_validator(mode="after")
    def _check_shape(self) -> CodeTask:
        if self.language != "python" and self.tests is not None:
            raise ValueError(f"language {self.language!r} takes `io_cases` (stdin -> stdout), not `tests`")
        if self.checker is not None and self.io_cases is None:
            raise ValueError("`checker` goes with `io_cases`")
        if (self.tests is None) == (self.io_cases is None):
            raise ValueError("give exactly one of `tests` (with `entry_point`) and `io_cases`")
        if self.tests is not None:
            if not self.entry_point or not self.entry_point.isidentifier():
                raise ValueError("`tests` needs `entry_point`, the name of the function to check")
            _defines_check(self.tests, "tests")
            if self.visible_tests is not None:
                _defines_check(self.visible_tests, "visible_tests")
            if self.visible_io_cases:
                raise ValueError("`visible_io_cases` go with `io_cases`, not `tests`")
        else:
            if not self.io_cases:
                raise ValueError("`io_cases` must not be empty")
            if self.visible_tests is not None:
                raise ValueError("`visible_tests` go with `tests`, not `io_cases`")
        if self.interactor is not None and self.io_cases is None:
            raise ValueError("`interactor` goes with `io_cases` (the interactor's input and answer files)")
        if self.interactor is not None and self.checker is not None:
            raise ValueError("give at most one of `checker` and `interactor` (the interactor decides)")
        cases = [*(self.io_cases or []), *(self.visible_io_cases or [])]
        self._largest_answer = max((len(case.stdout.encode()) for case in cases), default=0)
        if (self.interactor is None and "output_bytes" in self.model_fields_set
                and self._largest_answer > self.output_bytes):
            raise ValueError(f"output_bytes ({self.output_bytes}) is smaller than an io case's expected stdout "
                             f"({self._largest_answer} bytes): every right answer would be cut off")
        if self.prompt is not None and self.language == "python":
            try:
                ast.parse(self.prompt)
            except SyntaxError as exc:
                raise ValueError(f"prompt is not valid Python: {exc.msg}") from None
        return self
