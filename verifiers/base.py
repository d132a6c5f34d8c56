"""The verifier contract: task + response -> evidence -> components -> verdict and reward.

A verifier is a pure unit: it never imports the service, never writes records, and runs
all untrusted work through the `Sandbox` it is handed. One exception, isolated by the
database instead: Postgres-dialect SQL runs on a Postgres server (the sandbox has no
network), under a per-task role that can only read the task's own schemas, with a
statement timeout, in a transaction that is rolled back (verifiers/sql/postgres_backend.py).
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from assay_rules.rewards import round_reward
from sandboxes.base import Sandbox

EVIDENCE_TEXT_LIMIT = 2000


class Verdict(StrEnum):
    correct = "correct"
    incorrect = "incorrect"
    invalid_format = "invalid_format"
    violation = "violation"
    timeout = "timeout"
    error = "error"


class TaskInvalid(ValueError):
    """The task itself is malformed or unusable (a client error, never a reward).

    `field` names the part of the task at fault, as a dotted path from the request's
    task (`task`, `task.answer`, ...). Without one, a message that starts with such a
    path and a colon names it; otherwise the whole task is meant.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        leading = _TASK_PATH.match(message)
        self.field = field or (leading.group(1) if leading else "task")


_TASK_PATH = re.compile(r"^(task(?:\.[A-Za-z0-9_]+)*):")


class UnknownVerifier(LookupError):
    pass


class ContractBreach(ValueError):
    """A verifier returned an outcome outside the reward contract: a verifier bug, never a reward."""

    cause = "contract_breach"


@dataclass(frozen=True)
class Component:
    name: str
    value: float
    hard: bool

    def passed(self) -> bool:
        return self.value >= 1.0


def hard(name: str, ok: bool) -> Component:
    return Component(name, 1.0 if ok else 0.0, True)


def gated_verdict(format_ok: bool, compliant: bool, correct: bool) -> Verdict:
    """The verdict of the three hard gates, the first failing one deciding."""
    if not format_ok:
        return Verdict.invalid_format
    if not compliant:
        return Verdict.violation
    return Verdict.correct if correct else Verdict.incorrect


def soft(name: str, value: float) -> Component:
    return Component(name, min(1.0, max(0.0, float(value))), False)


FlagAction = Literal["flag", "fail"]
TruncationPolicy = Literal["score", "fail", "mask"]
FLAG_EVIDENCE_LIMIT = 500
# A flag name is a short snake_case word, optionally `family:word`: never text a response
# chose (see Verifier.flag_names). Any other name becomes UNNAMED_FLAG, the offered
# name kept, clipped, in its evidence.
FLAG_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}(?::[a-z][a-z0-9_]{0,47})?")
UNNAMED_FLAG = "unnamed_flag"
# Bounds on one outcome's flags: how many, and the encoded size of each one's evidence.
MAX_FLAGS = 64
FLAG_EVIDENCE_BYTES = 4000


DEFAULT_WEIGHTS = {"correctness": 1.0, "resources": 0.0, "process": 0.0}


class TaskBase(BaseModel):
    """Options every task accepts. Verifier task models extend this."""

    model_config = ConfigDict(extra="forbid")

    # Fields listed here are hidden: never returned by read endpoints, logged as hashes.
    hidden_fields: ClassVar[frozenset[str]] = frozenset()
    # Fields added after tasks were registered: hashed only when not at their default, so older
    # tasks keep their hash. A task model adds its own to these (`TaskBase.hashed_when_set | {...}`).
    hashed_when_set: ClassVar[frozenset[str]] = frozenset({"hide"})

    # Numbers that feed the reward: finite and in range (NaN fails both bounds).
    failure_value: float = Field(0.0, ge=-1.0, le=1.0, description="The reward when a hard component fails.")
    reward_weights: dict[str, Annotated[float, Field(ge=0.0, le=1000.0)]] | None = None
    # Inspection options (see verifiers/inspection.py). At their defaults they are left out
    # of the task hash, so tasks registered before they existed keep their identity.
    prompt: str | None = Field(None, max_length=1_000_000,
                               description="The prompt the policy saw; detectors compare the response to it.")
    flag_policy: dict[str, FlagAction] = Field(
        default_factory=dict, description='Per flag: "flag" (information, the default) or "fail" (a hard failure).')
    truncation: TruncationPolicy = Field(
        "score", description="A response cut at its length limit: `score` it as it is, `fail` it, or `mask` it "
                             "(advantage null, left out of the group statistics).")
    hide: list[str] = Field(default_factory=list, max_length=64,
                            description="Further fields to treat as hidden, beyond the verifier's own.")

    @field_validator("hide")
    @classmethod
    def _known_hidden(cls, hide: list[str]) -> list[str]:
        names = {alias for name, info in cls.model_fields.items() for alias in (name, info.alias) if alias}
        unknown = sorted(set(hide) - names)
        if unknown:
            raise ValueError(f"names fields this task does not have: {unknown}")
        return hide

    def hidden(self) -> frozenset[str]:
        """The hidden fields of this task, by their keys in `model_dump(mode="json")`."""
        fields = type(self).model_fields
        by_alias = bool(self.model_config.get("serialize_by_alias"))
        out = set()
        for name in self.hidden_fields | set(self.hide):
            field_name = next((n for n, info in fields.items() if name in (n, info.alias)), name)
            info = fields.get(field_name)
            out.add(info.alias if by_alias and info is not None and info.alias else field_name)
        return frozenset(out)

    def hash_material(self) -> dict[str, Any]:
        """What `task_hash` covers: the task as JSON, every field included (the inspection options
        too, as they always were), except fields added later (`hashed_when_set`) at their default."""
        fields = type(self).model_fields
        unset = {name for name in self.hashed_when_set
                 if getattr(self, name) == fields[name].get_default(call_default_factory=True)}
        return self.model_dump(mode="json", exclude=unset)

    def public_view(self) -> dict[str, Any]:
        """The task with hidden fields replaced by unkeyed hashes. The service shows keyed
        fingerprints instead (service/fingerprints.py); this stays for local tools."""
        data = self.model_dump(mode="json")
        for name in self.hidden():
            if name in data and data[name] is not None:
                data[name] = {"sha256": sha256_json(data[name])}
        return data

    def task_hash(self) -> str:
        """Unkeyed: for caches inside a verifier. What leaves the service is keyed (service/fingerprints.py)."""
        return sha256_json(self.hash_material())


class Flag(str):
    """A named pattern a detector saw in one response, with bounded evidence of where.

    A flag is its name (it equals, hashes and sorts as the string), so code that reads
    flags as names keeps working; the evidence rides along."""

    evidence: dict[str, Any]

    def __new__(cls, name: str, evidence: dict[str, Any] | None = None) -> Flag:
        evidence = dict(evidence or {})
        if not (isinstance(name, str) and FLAG_NAME.fullmatch(name)):
            name, evidence = UNNAMED_FLAG, {"offered": clip(repr(name), 100)}
        size = len(json.dumps(evidence, default=repr))
        if size > FLAG_EVIDENCE_BYTES:
            evidence = {"truncated": f"{size} bytes of evidence"}
        made = super().__new__(cls, name)
        made.evidence = evidence
        return made

    @property
    def name(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Flag({str(self)!r}, {self.evidence!r})"


def flag(name: str, **evidence: Any) -> Flag:
    """A flag whose evidence strings are clipped, so that records stay bounded."""
    return Flag(name, {k: clip(v, FLAG_EVIDENCE_LIMIT) if isinstance(v, str) else v for k, v in evidence.items()})


@dataclass
class Outcome:
    """What a verifier concluded about one response."""

    verdict: Verdict
    components: list[Component]
    evidence: dict[str, Any] = field(default_factory=dict)
    # Plain names are accepted and become flags without evidence.
    flags: list[Flag | str] = field(default_factory=list)
    usage: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.flags = _bounded_flags(self.flags)

    def flag_map(self) -> dict[str, dict[str, Any]]:
        """Flags by name; a name seen twice keeps its first evidence."""
        out: dict[str, dict[str, Any]] = {}
        for f in self.flags:
            out.setdefault(str(f), f.evidence if isinstance(f, Flag) else {})
        return dict(sorted(out.items()))

    def add_flags(self, flags: list[Flag]) -> None:
        self.flags = _bounded_flags([*self.flags, *flags])

    def contract_breach(self) -> str | None:
        """What in this outcome breaks the reward contract, or None: a component that is not a
        number in [0, 1] (a NaN from 0/0, an infinity, a bool), or a number that is not finite
        in the evidence, the flags' evidence or the usage (a record could not store it)."""
        for c in self.components:
            if isinstance(c.value, bool) or not isinstance(c.value, int | float) or not 0.0 <= c.value <= 1.0:
                return f"component {c.name!r} is {c.value!r}, not a number in [0, 1]"
        stack: list[Any] = [self.evidence, self.usage, *(f.evidence for f in self.flags if isinstance(f, Flag))]
        while stack:
            item = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                return f"a number that is not finite ({item!r}) in the evidence, flags or usage"
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)
        return None

    def reward(self, task: TaskBase) -> float:
        return score(self.components, task.reward_weights, task.failure_value, self.verdict)


def _bounded_flags(flags: list[Flag | str]) -> list[Flag | str]:
    """Flags as `Flag`s, at most MAX_FLAGS distinct names (the first ones kept)."""
    out: list[Flag | str] = []
    names: set[str] = set()
    for f in flags:
        made = f if isinstance(f, Flag) else Flag(f)
        if str(made) not in names and len(names) >= MAX_FLAGS:
            continue
        names.add(str(made))
        out.append(made)
    return out


def score(
    components: list[Component],
    weights: dict[str, float] | None = None,
    failure_value: float = 0.0,
    verdict: Verdict | None = None,
) -> float:
    """Hard gates first; a soft component never compensates a failed hard one."""
    if verdict is Verdict.error or any(c.hard and not c.passed() for c in components):
        return failure_value
    weights = {**DEFAULT_WEIGHTS, **(weights or {})}
    scored = [(weights.get(c.name, 0.0), c.value) for c in components if not c.hard or c.name == "correctness"]
    total = sum(w for w, _ in scored)
    if total <= 0:
        return 1.0
    return round_reward(sum(w * v for w, v in scored) / total)


def sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def clip(text: str | bytes | None, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    """Bound a piece of evidence text."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + f"...[{len(text) - limit} more chars]"


@dataclass(frozen=True)
class Probe:
    """An answer that must earn nothing (task certification): a task that rewards one is broken.

    `excused_if_reference_passes`: a task under which the reference is judged first; when the
    reference is correct there, the probe states the gold itself (a constant probe `0` for a
    gold `0`) and is skipped."""

    name: str
    response: str
    excused_if_reference_passes: dict[str, Any] | None = None


@dataclass
class VerifyContext:
    sandbox: Sandbox
    # False for registered tasks: their hidden fields must not reach evidence in clear
    # (inline tasks came from the caller, who already holds them).
    reveal_hidden: bool = True
    # Addresses of external services a verifier family may use, from the service's one
    # settings object (e.g. "sql_postgres": the admin URL for Postgres-dialect SQL tasks).
    services: Mapping[str, str] = field(default_factory=dict)


class Verifier(abc.ABC):
    """One verifier family. Subclass, set the class attributes, decorate with @register."""

    name: ClassVar[str]
    version: ClassVar[str]
    description: ClassVar[str] = ""
    task_model: ClassVar[type[TaskBase]]
    # Every flag name this verifier can raise, when it declares them (None: undeclared).
    # Metrics label flags by name only within this vocabulary (service/metrics.py).
    flag_names: ClassVar[frozenset[str] | None] = None
    # True when `verify_many` judges a group in one pass (shared sandbox set-up): the
    # engine then hands it the whole group on one thread. False: the engine fans the
    # responses out to threads, one `verify` call each.
    judges_groups: ClassVar[bool] = False
    # Flags computed from a task's hidden data (e.g. which tables the hidden gold reads):
    # left out of what a `reward` key sees for a registered task.
    hidden_flags: ClassVar[frozenset[str]] = frozenset()

    def parse_task(self, raw: dict[str, Any]) -> TaskBase:
        try:
            return self.task_model.model_validate(raw)
        except ValidationError as exc:
            raise TaskInvalid(_validation_message(exc)) from exc

    @abc.abstractmethod
    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        """Judge one response. Infrastructure failures raise SandboxError (-> `error`)."""

    def feedback(self, task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
        """What a policy may be shown about this outcome (see verifiers/feedback.py): never a
        hidden value or anything computed from one that the response can steer. Families
        override this with their own view; the default says only what the verdict says."""
        return {"verdict": outcome.verdict.value}

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        """Judge a group of responses to one task. Override to share sandbox set-up, and
        set `judges_groups = True` so that the engine calls it."""
        return [self.verify(task, response, ctx) for response in responses]

    # Task certification (service/certification.py). A family overrides these three.
    def reference(self, task: TaskBase, supplied: str | None) -> str | None:
        """The response that must earn the full reward; by default the one the caller supplied."""
        return supplied

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        """Answers that must earn nothing (`reference`: what `reference()` gave)."""
        return []

    def time_budget_s(self, task: TaskBase) -> float | None:
        """The time the task allows one response, when the family knows it."""
        return None

    def warm(self, ctx: VerifyContext) -> None:  # noqa: B027
        """Start whatever sandbox pools this verifier uses (optional)."""

    def close(self, ctx: VerifyContext) -> None:  # noqa: B027
        """Release what this verifier holds in the sandbox, before the sandbox closes (optional)."""

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "task_schema": self.task_model.model_json_schema(),
            "hidden_fields": sorted(self.task_model.hidden_fields),
        }


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "task"
        parts.append(f"task.{where}: {err['msg']}")
    return "; ".join(parts)
