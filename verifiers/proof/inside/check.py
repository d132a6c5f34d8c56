"""Metamath proof checking, as in the Metamath book (section 4.3, "Verifying proofs").

A proof is run on a stack: a hypothesis pushes its expression; an assertion pops one entry
per mandatory hypothesis, unifies its floating hypotheses with the popped typecodes to get
a substitution, checks the substituted essential hypotheses against the popped entries and
its disjoint-variable restrictions against the theorem's, then pushes its substituted
conclusion. The proof is right when exactly the theorem's assertion is left. Compressed
proofs (appendix B) are decoded step by step, with `Z` saving the step's result for reuse.

Everything here works on candidate data: sizes are bounded (proof tokens, steps,
expression length) and every failure is a `ProofFailure` with the step and a short reason.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from verifiers.proof.inside.database import LABEL_RE, Assertion, Database, Hyp


@dataclass(frozen=True)
class Target:
    """What the proof must establish, and with what."""

    label: str
    expr: tuple[str, ...]
    # Mandatory hypotheses in order (the implicit head of a compressed proof's label list).
    mandatory: tuple[str, ...]
    # Every hypothesis label the proof may cite: mandatory ones and the dummy-variable $f.
    hyps: dict[str, Hyp]
    dvs: frozenset[tuple[str, str]]
    # Assertions with index below this may be cited (the theorem's own position).
    before_index: int


@dataclass(frozen=True)
class Limits:
    max_steps: int = 200_000
    max_expression: int = 20_000
    # Symbols in all expressions the proof builds (bounds memory: each step builds one).
    max_total_symbols: int = 20_000_000
    # time.process_time() after which checking stops (None: no deadline). CPU time, so that
    # a loaded machine does not turn an honest proof into a timeout; the host still kills
    # the process on a wall-clock limit.
    deadline: float | None = None


@dataclass
class Report:
    format_ok: bool = True
    correct: bool = False
    incomplete: bool = False
    timed_out: bool = False
    forbidden_reference: bool = False
    compressed: bool = False
    steps: int = 0
    used: set[str] = field(default_factory=set)
    disallowed: list[str] = field(default_factory=list)
    failure: dict[str, object] | None = None


class ProofFailure(Exception):
    def __init__(self, reason: str, step: int | None = None, label: str | None = None, *,
                 format_error: bool = False, compliance: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.step = step
        self.label = label
        self.format_error = format_error
        # A reference the task forbids (the theorem itself, a later statement, another
        # theorem's hypothesis).
        self.compliance = compliance

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"reason": self.reason}
        if self.step is not None:
            out["step"] = self.step
        if self.label is not None:
            out["label"] = self.label
        return out


class CheckTimeout(ProofFailure):
    pass


UNKNOWN = None  # a `?` step: an unknown expression of unknown typecode
COMPRESSED_RE = re.compile(r"[A-Z?]+\Z")


def check(db: Database, target: Target, proof_tokens: list[str], limits: Limits,
          is_allowed) -> Report:
    """Run the proof. `is_allowed(assertion)` says whether a cited assertion may be used."""
    report = Report()
    report.compressed = bool(proof_tokens) and proof_tokens[0] == "("
    try:
        if proof_tokens and proof_tokens[0] == "(":
            steps = _compressed_steps(db, target, proof_tokens, limits)
        else:
            steps = _normal_steps(target, proof_tokens, limits)
        _run(db, target, steps, limits, is_allowed, report)
    except CheckTimeout as failure:
        report.timed_out = True
        report.failure = failure.describe()
    except ProofFailure as failure:
        if failure.format_error:
            report.format_ok = False
        report.forbidden_reference = failure.compliance
        report.correct = False
        report.failure = failure.describe()
    return report


# A step is ("hyp"|"assert"|"unknown"|"saved", payload, save_after).
Step = tuple[str, object, bool]


def _resolve(target: Target, db: Database, label: str, step: int) -> Step:
    if not LABEL_RE.match(label):
        raise ProofFailure(f"{label!r} is not a label", step, format_error=True)
    hyp = target.hyps.get(label)
    if hyp is not None:
        return ("hyp", hyp, False)
    if label == target.label:
        return ("assert", label, False)  # refused as self-citation when run
    assertion = db.assertions.get(label)
    if assertion is None:
        if label in db.hyps:
            # Another frame's hypothesis is a statement nobody proved here: citing it assumes
            # what was to be shown, as a `?` step does, so it is refused as a forbidden
            # reference (compliance), not judged as a wrong step (round 9).
            raise ProofFailure(f"hypothesis {label} is not one of this theorem's", step, label, compliance=True)
        raise ProofFailure(f"no statement labelled {label}", step, label, format_error=True)
    return ("assert", assertion, False)


def _citation(target: Target, db: Database, label: str, step: int) -> Step:
    """What a label cites, refusing the theorem itself and anything after it."""
    entry = _resolve(target, db, label, step)
    if entry[0] == "assert":
        assertion = entry[1]
        if not isinstance(assertion, Assertion):
            raise ProofFailure("the proof cites the theorem it proves", step, label, compliance=True)
        if assertion.index >= target.before_index:
            raise ProofFailure(f"{label} comes after the theorem being proved", step, label, compliance=True)
    return entry


def _normal_steps(target: Target, tokens: list[str], limits: Limits):
    if not tokens:
        raise ProofFailure("the proof is empty", format_error=True)
    if len(tokens) > limits.max_steps:
        raise ProofFailure(f"the proof has {len(tokens)} steps; at most {limits.max_steps} are allowed",
                           format_error=True)
    for token in tokens:
        if token == "?":
            yield ("unknown", None, False)
        else:
            yield ("label", token, False)


def _compressed_steps(db: Database, target: Target, tokens: list[str], limits: Limits):
    try:
        close = tokens.index(")")
    except ValueError:
        raise ProofFailure("compressed proof without a closing ')'", format_error=True) from None
    labels = tokens[1:close]
    letters = "".join(tokens[close + 1:])
    if not letters:
        raise ProofFailure("compressed proof without steps", format_error=True)
    if not COMPRESSED_RE.match(letters):
        bad = next(ch for ch in letters if not ("A" <= ch <= "Z" or ch == "?"))
        raise ProofFailure(f"character {bad!r} in the compressed proof's steps", format_error=True)
    if len(letters) > limits.max_steps * 8:
        raise ProofFailure(f"compressed proof of {len(letters)} characters is too long", format_error=True)
    mandatory = set(target.mandatory)
    for label in labels:
        if label in mandatory:
            raise ProofFailure(f"mandatory hypothesis {label} listed in the compressed proof", label=label,
                               format_error=True)
    if len(set(labels)) != len(labels):
        raise ProofFailure("a label is listed twice in the compressed proof", format_error=True)
    for label in labels:  # every listed label must exist and be citable, used or not
        _citation(target, db, label, 0)
    heads = list(target.mandatory) + labels
    head_count = len(heads)
    saved_count = 0
    number = 0
    digits = 0
    steps = 0
    last_was_step = False
    for ch in letters:
        if ch == "?":
            if digits:
                raise ProofFailure("'?' inside a step number", steps + 1, format_error=True)
            steps += 1
            last_was_step = False  # an unknown step cannot be saved
            yield ("unknown", None, False)
        elif ch == "Z":
            if not last_was_step or digits:
                raise ProofFailure("'Z' does not follow a step", steps, format_error=True)
            last_was_step = False
            saved_count += 1
            yield ("save", None, False)
        elif ch >= "U":
            number = number * 5 + (ord(ch) - 84)
            digits += 1
            if number > head_count + saved_count + limits.max_steps:
                raise ProofFailure("step number out of range", steps + 1, format_error=True)
        else:
            number = number * 20 + (ord(ch) - 64)
            steps += 1
            if steps > limits.max_steps:
                raise ProofFailure(f"the proof has more than {limits.max_steps} steps", format_error=True)
            if number <= head_count:
                yield ("label", heads[number - 1], False)
            elif number <= head_count + saved_count:
                yield ("saved", number - head_count - 1, False)
            else:
                raise ProofFailure(f"step number {number} refers to nothing ({head_count} labels, "
                                   f"{saved_count} saved steps)", steps, format_error=True)
            number = digits = 0
            last_was_step = True
    if digits:
        raise ProofFailure("the compressed proof ends inside a step number", steps, format_error=True)


def _run(db: Database, target: Target, steps, limits: Limits, is_allowed, report: Report) -> None:
    stack: list[tuple[str, ...] | None] = []
    saved: list[tuple[str, ...] | None] = []
    step = 0
    max_expr = limits.max_expression
    resolved: dict[str, Step] = {}
    built = 0
    deadline = limits.deadline
    for kind, payload, _ in steps:
        if kind == "save":
            saved.append(stack[-1])
            continue
        step += 1
        report.steps = step
        if deadline is not None and not step & 255 and time.process_time() > deadline:
            raise CheckTimeout("checking ran out of time", step)
        if kind == "unknown":
            report.incomplete = True
            stack.append(UNKNOWN)
            continue
        if kind == "saved":
            stack.append(saved[payload])  # type: ignore[index]
            continue
        label = payload  # type: ignore[assignment]
        entry = resolved.get(label)  # type: ignore[arg-type]
        if entry is None:
            entry = resolved[label] = _citation(target, db, label, step)  # type: ignore[arg-type]
        if entry[0] == "hyp":
            stack.append(entry[1].expr)  # type: ignore[union-attr]
            continue
        assertion = entry[1]
        assert isinstance(assertion, Assertion)
        if label not in report.used:
            report.used.add(label)
            if not is_allowed(assertion):
                report.disallowed.append(label)
        result = _apply(db, target, assertion, stack, step, max_expr)
        if result is not None:
            built += len(result)
            if built > limits.max_total_symbols:
                raise ProofFailure(f"the proof builds more than {limits.max_total_symbols} symbols in all",
                                   step, label)
        stack.append(result)
    report.steps = step
    if len(stack) != 1:
        raise ProofFailure(f"the proof leaves {len(stack)} expressions on the stack, not 1", step)
    if report.incomplete:
        raise ProofFailure("the proof has unknown '?' steps", step)
    if stack[0] != target.expr:
        raise ProofFailure(f"the proof proves {_show(stack[0])}, not {_show(target.expr)}", step)
    report.correct = True


def _apply(db: Database, target: Target, assertion: Assertion, stack: list, step: int,
           max_expr: int) -> tuple[str, ...] | None:
    label = assertion.label
    count = len(assertion.hyps)
    if len(stack) < count:
        raise ProofFailure(f"{label} needs {count} hypotheses; the stack holds {len(stack)}", step, label)
    base = len(stack) - count
    popped = stack[base:]
    del stack[base:]
    subst: dict[str, tuple[str, ...]] = {}
    unknown = False
    hyps = db.hyps
    for hyp_label, entry in zip(assertion.hyps, popped, strict=True):
        hyp = hyps[hyp_label]
        if entry is UNKNOWN:
            unknown = True
            continue
        if hyp.kind == "f":
            if entry[0] != hyp.expr[0]:
                raise ProofFailure(f"hypothesis {hyp_label} of {label} wants typecode {hyp.expr[0]}, "
                                   f"got {entry[0]}", step, label)
            subst[hyp.expr[1]] = entry[1:]
    if unknown:
        return UNKNOWN
    for hyp_label, entry in zip(assertion.hyps, popped, strict=True):
        hyp = hyps[hyp_label]
        if hyp.kind == "e" and _substitute(hyp.expr, subst, max_expr, step, label) != entry:
            raise ProofFailure(f"hypothesis {hyp_label} of {label} does not match: expected "
                               f"{_show(_substitute(hyp.expr, subst, max_expr, step, label))}, "
                               f"got {_show(entry)}", step, label)
    if assertion.dvs:
        variables = db.variables
        for x, y in assertion.dvs:
            for a in subst[x]:
                if a not in variables:
                    continue
                for b in subst[y]:
                    if b not in variables:
                        continue
                    if a == b:
                        raise ProofFailure(f"disjoint variable violation: {label} needs {x} and {y} "
                                           f"disjoint, both contain {a}", step, label)
                    if (a, b) not in target.dvs and (b, a) not in target.dvs:
                        raise ProofFailure(f"disjoint variable violation: {label} needs $d {a} {b}, "
                                           f"which the theorem does not have", step, label)
    return _substitute(assertion.expr, subst, max_expr, step, label)


def _substitute(expr: tuple[str, ...], subst: dict[str, tuple[str, ...]], max_expr: int,
                step: int, label: str) -> tuple[str, ...]:
    out: list[str] = [expr[0]]
    for sym in expr[1:]:
        found = subst.get(sym)
        if found is None:
            out.append(sym)
        else:
            out.extend(found)
    if len(out) > max_expr:
        raise ProofFailure(f"step builds an expression of {len(out)} symbols (limit {max_expr})", step, label)
    return tuple(out)


def _show(expr: tuple[str, ...] | None, limit: int = 300) -> str:
    if expr is None:
        return "?"
    text = " ".join(expr)
    return text if len(text) <= limit else text[:limit] + " ..."
