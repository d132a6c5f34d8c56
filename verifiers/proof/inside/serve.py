"""In-sandbox entry point: check Metamath proofs against databases kept loaded.

A warm worker reads the shipped set.mm once (`sandbox_warm_up`), so every session forked
from it starts with the database in memory, like a Lean server's REPL pool keyed by its
import header. Other shipped databases and inline ones are read on first use and kept
per session, keyed by name or content hash (a few, bounded). Only our own checker runs
here, on the candidate's proof text as data.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any

from verifiers.proof.inside.check import Limits, Target, check
from verifiers.proof.inside.database import LABEL_RE, TOKEN_CHARS_RE, Database, DatabaseError, Hyp, parse

SHIPPED_DIR = "/usr/share/metamath/databases"
PRELOADED = ("set.mm",)
MAX_CACHED = 4
AXIOMS_SHOWN = 400

_databases: collections.OrderedDict[str, Database] = collections.OrderedDict()


class TaskProblem(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def shipped_path(name: str) -> str:
    return os.path.join(SHIPPED_DIR, name)


def _load(spec: dict[str, Any]) -> Database:
    key = "inline:" + str(spec["sha256"]) if "text" in spec else "shipped:" + str(spec["name"])
    found = _databases.get(key)
    if found is not None:
        _databases.move_to_end(key)
        return found
    if "text" in spec:
        try:
            db = parse(spec["text"])
        except DatabaseError as exc:
            raise TaskProblem("database_text", f"the database does not parse: {exc}") from None
    else:
        name = str(spec["name"])
        try:
            with open(shipped_path(name), encoding="ascii") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            raise TaskProblem("database", f"no shipped database {name!r} in {SHIPPED_DIR}") from None
        try:
            db = parse(text)
        except DatabaseError as exc:
            raise TaskProblem("database", f"shipped database {name!r} does not parse: {exc}") from None
    _databases[key] = db
    while len(_databases) > MAX_CACHED + len(PRELOADED):
        oldest = next(k for k in _databases if not k.startswith("shipped:") or k[8:] not in PRELOADED)
        del _databases[oldest]
    return db


def sandbox_warm_up() -> None:
    """Run in the warm worker before it forks: the preloaded databases are then shared."""
    for name in PRELOADED:
        if os.path.exists(shipped_path(name)):
            _load({"name": name})


def _theorem_target(db: Database, label: str) -> Target:
    assertion = db.assertions.get(label)
    if assertion is None:
        raise TaskProblem("theorem", f"no assertion labelled {label!r} in the database")
    if assertion.kind != "p":
        raise TaskProblem("theorem", f"{label!r} is an axiom ($a), not a theorem")
    hyps = {lab: db.hyps[lab] for lab in assertion.hyps + assertion.optional_floats}
    return Target(label, assertion.expr, assertion.hyps, hyps, assertion.all_dvs, assertion.index)


def _math_string(db: Database, text: str, where: str) -> tuple[str, ...]:
    tokens = tuple(text.split())
    if not tokens:
        raise TaskProblem(where, "empty math string")
    for tok in tokens:
        if not TOKEN_CHARS_RE.match(tok):
            raise TaskProblem(where, f"symbol {tok!r} is not printable ASCII")
    if tokens[0] not in db.constants:
        raise TaskProblem(where, f"typecode {tokens[0]!r} is not a constant of the database")
    for tok in tokens[1:]:
        if tok not in db.constants and tok not in db.float_of_var:
            raise TaskProblem(where, f"symbol {tok!r} is neither a constant nor a variable with a $f")
    return tokens


def _statement_target(db: Database, statement: dict[str, Any]) -> Target:
    label = str(statement["label"])
    expr = _math_string(db, statement["assertion"], "statement.assertion")
    essentials: list[Hyp] = []
    base = db.statement_count
    for position, hyp in enumerate(statement.get("hypotheses") or [], start=1):
        hyp_label = hyp.get("label") or f"{label}.{position}"
        where = f"statement.hypotheses.{position - 1}"
        if not LABEL_RE.match(hyp_label) or hyp_label in db.assertions or hyp_label in db.final_floats \
                or hyp_label == label or any(h.label == hyp_label for h in essentials):
            raise TaskProblem(where, f"hypothesis label {hyp_label!r} is taken or malformed")
        essentials.append(Hyp(hyp_label, "e", _math_string(db, hyp["expression"], where), base + position))
    used = set(expr[1:])
    for hyp in essentials:
        used.update(hyp.expr[1:])
    floats = sorted((db.hyps[db.float_of_var[v]] for v in used if v in db.float_of_var), key=lambda h: h.index)
    dvs = set(db.final_dvs)
    for position, group in enumerate(statement.get("disjoint") or []):
        names = list(group)
        for name in names:
            if name not in db.float_of_var:
                raise TaskProblem(f"statement.disjoint.{position}", f"{name!r} is not a variable")
        if len(set(names)) != len(names):
            raise TaskProblem(f"statement.disjoint.{position}", "a variable is repeated")
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                dvs.add((x, y) if x < y else (y, x))
    hyps = {lab: db.hyps[lab] for lab in db.final_floats}
    hyps.update({h.label: h for h in essentials})
    mandatory = tuple(h.label for h in floats) + tuple(h.label for h in essentials)
    return Target(label, expr, mandatory, hyps, frozenset(dvs), base + len(essentials) + 1)


def _referenced(db: Database, labels: list[str] | None, field: str, axioms_only: bool) -> set[str]:
    out = set()
    for label in labels or []:
        assertion = db.assertions.get(label)
        if assertion is None:
            if not axioms_only and label in db.hyps:
                continue
            raise TaskProblem(field, f"no statement labelled {label!r} in the database")
        if axioms_only and label not in db.axiom_bits:
            raise TaskProblem(field, f"{label!r} is not an axiom of the database")
        out.add(label)
    return out


def check_one(request: dict[str, Any]) -> dict[str, Any]:
    try:
        return _check_one(request)
    except TaskProblem as problem:
        return {"status": "task_invalid", "field": problem.field, "message": problem.message[:500]}


def _check_one(request: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    db = _load(request["database"])
    loaded = time.monotonic()
    if request.get("theorem") is not None:
        target = _theorem_target(db, str(request["theorem"]))
    else:
        target = _statement_target(db, request["statement"])
    allowed = _referenced(db, request.get("allowed"), "allowed", False) if request.get("allowed") is not None \
        else None
    forbidden = _referenced(db, request.get("forbidden_axioms"), "forbidden_axioms", True)
    evidence: dict[str, Any] = {}
    failures: list[str] = []

    def is_allowed(assertion) -> bool:
        return allowed is None or assertion.label in allowed or db.is_syntax(assertion)

    text = str(request["proof"])
    bad = next((i for i, ch in enumerate(text) if not ("\x21" <= ch <= "\x7e" or ch in " \t\r\n\f")), None)
    if bad is not None:
        return _format_failure(f"character U+{ord(text[bad]):04X} at offset {bad}: a proof is printable ASCII "
                               f"separated by whitespace", loaded - started)
    limits = Limits(max_steps=int(request["max_steps"]), max_expression=int(request["max_expression"]),
                    deadline=time.process_time() + float(request["timeout_s"]))
    report = check(db, target, text.split(), limits, is_allowed)
    evidence["proof_format"] = "compressed" if report.compressed else "normal"
    evidence["steps"] = report.steps
    if report.timed_out:
        return {"status": "timeout", "evidence": {**evidence, "first_failure": report.failure},
                "load_s": round(loaded - started, 3)}
    if not report.format_ok:
        return {**_format_failure(str(report.failure.get("reason") if report.failure else ""), loaded - started),
                "evidence": {**evidence, "first_failure": report.failure}}
    stated = request.get("stated")
    correct = report.correct
    if report.failure is not None:
        evidence["first_failure"] = report.failure
    if correct and stated is not None and tuple(stated.split()) != target.expr:
        correct = False
        evidence["first_failure"] = {"reason": "the response restates a different assertion than the task's"}
    bits = 0
    for label in report.used:
        bits |= db.assertions[label].axioms
    names = db.axiom_names(bits)
    evidence["axioms"] = names[:AXIOMS_SHOWN]
    evidence["axiom_count"] = len(names)
    evidence["references"] = len(report.used)
    used_forbidden = sorted(name for name in names if name in forbidden)
    flags = []
    if report.incomplete:
        failures.append("the proof has '?' steps (incomplete)")
        flags.append("incomplete_proof")
    if used_forbidden:
        failures.append(f"depends on forbidden axioms: {', '.join(used_forbidden)}")
        evidence["forbidden_axioms_used"] = used_forbidden
        flags.append("uses_forbidden_axiom")
    if report.disallowed:
        failures.append(f"cites labels outside the allowed list: {', '.join(sorted(report.disallowed)[:20])}")
        evidence["disallowed_references"] = sorted(report.disallowed)[:50]
    if report.forbidden_reference and report.failure:
        failures.append(str(report.failure["reason"]))
    if failures:
        evidence["compliance_failures"] = failures
    return {"status": "checked", "format": True, "correct": correct, "compliant": not failures,
            "flags": flags, "evidence": evidence, "load_s": round(loaded - started, 3)}


def _format_failure(reason: str, load_s: float) -> dict[str, Any]:
    return {"status": "checked", "format": False, "correct": False, "compliant": True, "flags": [],
            "evidence": {"first_failure": {"reason": reason}}, "load_s": round(load_s, 3)}


def serve(payload: Any, channel: Any) -> None:
    channel.serve(check_one)
