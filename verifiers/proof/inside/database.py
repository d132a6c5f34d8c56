"""A Metamath database read once into what proof checking needs (standard library only).

Parsing follows the Metamath book's specification (section 4.1): `$c`/`$v` declarations,
`$f`/`$e` hypotheses, `$d` restrictions, `${ $}` scopes, `$a`/`$p` assertions with their
frames. Proofs of the database itself are not kept (a task hides the target's proof, and
they are trusted): only the labels each proof cites, from which every assertion's axiom
closure (what `show trace_back /axioms` lists) is computed as a bit set once, at load.
The database is trusted input from the operator or the task author, but inline databases
are still read only inside the sandbox, with bounded sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LABEL_RE = re.compile(r"[A-Za-z0-9._-]+\Z")
# Printable ASCII only: Metamath's own character set.
TOKEN_CHARS_RE = re.compile(r"[\x21-\x7e]+\Z")


class DatabaseError(ValueError):
    """The database itself is malformed."""


@dataclass(slots=True)
class Hyp:
    label: str
    kind: str  # "f" or "e"
    expr: tuple[str, ...]  # typecode first
    index: int


@dataclass(slots=True)
class Assertion:
    label: str
    kind: str  # "a" or "p"
    expr: tuple[str, ...]
    index: int
    # Mandatory hypotheses in database order (the order a citing proof supplies them).
    hyps: tuple[str, ...]
    # Mandatory disjoint-variable pairs, each sorted.
    dvs: frozenset[tuple[str, str]]
    # Theorems only: the scope the proof was checked in (shared objects, not copies).
    optional_floats: tuple[str, ...] = ()
    all_dvs: frozenset[tuple[str, str]] = frozenset()
    axioms: int = 0  # bit set over Database.axiom_labels


@dataclass
class Scope:
    """What is active in one `${ ... $}` block (and the file's top level)."""

    floats: list[str] = field(default_factory=list)
    essentials: list[str] = field(default_factory=list)
    dvs: set[tuple[str, str]] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)


@dataclass
class Database:
    constants: set[str] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)
    hyps: dict[str, Hyp] = field(default_factory=dict)
    assertions: dict[str, Assertion] = field(default_factory=dict)
    # Typecodes a proof can end in (|- in set.mm): those of $e/$p statements that are not
    # also variable typecodes. $a statements of these typecodes are the axioms.
    provable: set[str] = field(default_factory=set)
    axiom_labels: list[str] = field(default_factory=list)
    axiom_bits: dict[str, int] = field(default_factory=dict)
    # Scope at the end of the file: what a new statement may use.
    final_floats: tuple[str, ...] = ()
    final_dvs: frozenset[tuple[str, str]] = frozenset()
    float_of_var: dict[str, str] = field(default_factory=dict)
    statement_count: int = 0
    # Proof texts, only when asked for (tests and benchmarks read the database's proofs).
    proofs: dict[str, str] | None = None

    def axiom_names(self, bits: int) -> list[str]:
        names = []
        index = 0
        while bits:
            if bits & 1:
                names.append(self.axiom_labels[index])
            bits >>= 1
            index += 1
        return names

    def is_syntax(self, assertion: Assertion) -> bool:
        return assertion.expr[0] not in self.provable


def tokens_of(text: str) -> list[str]:
    """The database's tokens with comments removed."""
    try:
        text.encode("ascii")
    except UnicodeEncodeError as exc:
        raise DatabaseError(f"non-ASCII character at offset {exc.start}") from None
    tokens: list[str] = []
    start = 0
    end = len(text)
    # Comments are `$(` ... `$)` tokens; str.find keeps this at C speed for set.mm.
    while start < end:
        opening = _find_token(text, "$(", start)
        if opening < 0:
            tokens += text[start:].split()
            break
        tokens += text[start:opening].split()
        closing = _find_token(text, "$)", opening + 2)
        if closing < 0:
            raise DatabaseError("unterminated comment")
        comment = text[opening + 2:closing]
        if _find_token(comment, "$(", 0) >= 0:
            raise DatabaseError("nested comment")
        start = closing + 2
    if "$)" in tokens:
        raise DatabaseError("$) outside a comment")
    return tokens


def _find_token(text: str, token: str, start: int) -> int:
    """Offset of `token` standing as a whitespace-separated token, or -1."""
    while True:
        found = text.find(token, start)
        if found < 0:
            return -1
        after = found + len(token)
        if (found == 0 or text[found - 1].isspace()) and (after == len(text) or text[after].isspace()):
            return found
        start = found + 1


def parse(text: str, keep_proofs: bool = False) -> Database:
    tokens = tokens_of(text)
    db = Database(proofs={} if keep_proofs else None)
    _Reader(db, tokens).read()
    return db


class _Reader:
    def __init__(self, db: Database, tokens: list[str]) -> None:
        self.db = db
        self.tokens = tokens
        self.pos = 0
        self.scopes = [Scope()]
        self.index = 0
        # Proof references of each $p, resolved into axiom closures after the whole read
        # (closures of earlier statements are final by then; order makes one pass enough).
        self.refs: list[tuple[Assertion, list[str]]] = []
        self.active_floats: dict[str, str] = {}  # variable -> $f label
        self.active_variables: set[str] = set()
        self._floats_cache: tuple[str, ...] | None = None
        self._dvs_cache: tuple[int, frozenset[tuple[str, str]]] | None = None
        self._dv_version = 0

    def fail(self, message: str) -> DatabaseError:
        return DatabaseError(f"{message} (token {self.pos})")

    def until(self, end: str) -> list[str]:
        tokens = self.tokens
        try:
            stop = tokens.index(end, self.pos)
        except ValueError:
            raise self.fail(f"missing {end}") from None
        out = tokens[self.pos:stop]
        self.pos = stop + 1
        return out

    def is_active_var(self, symbol: str) -> bool:
        return symbol in self.active_variables

    def read(self) -> None:
        db = self.db
        tokens = self.tokens
        n = len(tokens)
        labels_seen: set[str] = set()
        while self.pos < n:
            tok = tokens[self.pos]
            self.pos += 1
            if tok == "${":
                self.scopes.append(Scope())
            elif tok == "$}":
                if len(self.scopes) == 1:
                    raise self.fail("$} without ${")
                scope = self.scopes.pop()
                self.active_variables -= scope.variables
                for label in scope.floats:
                    var = db.hyps[label].expr[1]
                    if self.active_floats.get(var) == label:
                        del self.active_floats[var]
                if scope.floats:
                    self._floats_cache = None
                if scope.dvs:
                    self._dv_version += 1
            elif tok == "$c":
                if len(self.scopes) > 1:
                    raise self.fail("$c inside a block")
                for sym in self.until("$."):
                    self._check_symbol(sym)
                    if sym in db.constants or sym in db.variables:
                        raise self.fail(f"symbol {sym} declared twice")
                    db.constants.add(sym)
            elif tok == "$v":
                for sym in self.until("$."):
                    self._check_symbol(sym)
                    if sym in db.constants or self.is_active_var(sym):
                        raise self.fail(f"symbol {sym} declared twice")
                    db.variables.add(sym)
                    self.scopes[-1].variables.add(sym)
                    self.active_variables.add(sym)
            elif tok == "$d":
                syms = self.until("$.")
                for sym in syms:
                    if not self.is_active_var(sym):
                        raise self.fail(f"$d names {sym}, not an active variable")
                if len(set(syms)) != len(syms):
                    raise self.fail("$d repeats a variable")
                scope_dvs = self.scopes[-1].dvs
                for i, x in enumerate(syms):
                    for y in syms[i + 1:]:
                        scope_dvs.add((x, y) if x < y else (y, x))
                self._dv_version += 1
            elif tok in ("$[", "$]"):
                raise self.fail("file inclusion is not supported")
            elif tok.startswith("$"):
                raise self.fail(f"unexpected keyword {tok}")
            else:
                label = tok
                if not LABEL_RE.match(label):
                    raise self.fail(f"bad label {label!r}")
                if label in labels_seen or label in db.constants or label in db.variables:
                    raise self.fail(f"label {label} reused")
                labels_seen.add(label)
                if self.pos >= n:
                    raise self.fail(f"label {label} without a statement")
                kind = tokens[self.pos]
                self.pos += 1
                self._statement(label, kind)
        if len(self.scopes) != 1:
            raise DatabaseError("unclosed ${ block at end of file")
        self._finish()

    def _check_symbol(self, sym: str) -> None:
        if "$" in sym or not TOKEN_CHARS_RE.match(sym):
            raise self.fail(f"bad math symbol {sym!r}")

    def _expr(self, end: str) -> tuple[str, ...]:
        expr = self.until(end)
        if not expr:
            raise self.fail("empty statement")
        db = self.db
        if expr[0] not in db.constants:
            raise self.fail(f"typecode {expr[0]} is not a constant")
        constants, active = db.constants, self.active_variables
        for sym in expr[1:]:
            if sym not in constants and sym not in active:
                raise self.fail(f"symbol {sym} is not declared")
        return tuple(expr)

    def _statement(self, label: str, kind: str) -> None:
        db = self.db
        self.index += 1
        if kind == "$f":
            expr = self._expr("$.")
            if len(expr) != 2 or not self.is_active_var(expr[1]):
                raise self.fail(f"$f {label} must be a typecode and a variable")
            if expr[1] in self.active_floats:
                raise self.fail(f"variable {expr[1]} has two active $f")
            db.hyps[label] = Hyp(label, "f", expr, self.index)
            self.scopes[-1].floats.append(label)
            self.active_floats[expr[1]] = label
            self._floats_cache = None
        elif kind == "$e":
            expr = self._expr("$.")
            self._check_typed(expr, label)
            db.hyps[label] = Hyp(label, "e", expr, self.index)
            self.scopes[-1].essentials.append(label)
        elif kind in ("$a", "$p"):
            expr = self._expr("$=" if kind == "$p" else "$.")
            self._check_typed(expr, label)
            assertion = self._frame(label, kind[1], expr)
            if kind == "$p":
                proof = self.until("$.")
                if not proof:
                    raise self.fail(f"$p {label} has an empty proof")
                if db.proofs is not None:
                    db.proofs[label] = " ".join(proof)
                self.refs.append((assertion, _proof_refs(proof)))
                assertion.optional_floats, assertion.all_dvs = self._scope_state()
            db.assertions[label] = assertion
        else:
            raise self.fail(f"label {label} followed by {kind!r}, not a statement keyword")

    def _check_typed(self, expr: tuple[str, ...], label: str) -> None:
        for sym in expr[1:]:
            if sym not in self.db.constants and sym not in self.active_floats:
                raise self.fail(f"variable {sym} in {label} has no active $f")

    def _scope_state(self) -> tuple[tuple[str, ...], frozenset[tuple[str, str]]]:
        """All active $f labels and $d pairs; consecutive theorems share the objects."""
        if self._floats_cache is None:
            self._floats_cache = tuple(sorted(self.active_floats.values(), key=lambda lab: self.db.hyps[lab].index))
        if self._dvs_cache is None or self._dvs_cache[0] != self._dv_version:
            pairs: set[tuple[str, str]] = set()
            for scope in self.scopes:
                pairs |= scope.dvs
            self._dvs_cache = (self._dv_version, frozenset(pairs))
        return self._floats_cache, self._dvs_cache[1]

    def _frame(self, label: str, kind: str, expr: tuple[str, ...]) -> Assertion:
        db = self.db
        essentials = [lab for scope in self.scopes for lab in scope.essentials]
        needed = set(expr[1:])
        for lab in essentials:
            needed.update(db.hyps[lab].expr[1:])
        mandatory_vars = needed & db.variables
        floats = [self.active_floats[v] for v in mandatory_vars if v in self.active_floats]
        hyps = sorted(floats + essentials, key=lambda lab: db.hyps[lab].index)
        dvs = frozenset(
            pair for scope in self.scopes for pair in scope.dvs
            if pair[0] in mandatory_vars and pair[1] in mandatory_vars
        )
        return Assertion(label, kind, expr, self.index, tuple(hyps), dvs)

    def _finish(self) -> None:
        db = self.db
        variable_typecodes = {h.expr[0] for h in db.hyps.values() if h.kind == "f"}
        typed = {h.expr[0] for h in db.hyps.values() if h.kind == "e"}
        typed |= {a.expr[0] for a in db.assertions.values() if a.kind == "p"}
        db.provable = typed - variable_typecodes
        for assertion in db.assertions.values():  # dicts keep database order
            if assertion.kind == "a" and assertion.expr[0] in db.provable:
                bit = 1 << len(db.axiom_labels)
                db.axiom_labels.append(assertion.label)
                db.axiom_bits[assertion.label] = bit
                assertion.axioms = bit
        for assertion, refs in self.refs:
            bits = 0
            for ref in refs:
                cited = db.assertions.get(ref)
                if cited is not None and cited.index < assertion.index:
                    bits |= cited.axioms
            assertion.axioms = bits
        db.final_floats, db.final_dvs = self._scope_state()
        db.float_of_var = dict(self.active_floats)
        db.statement_count = self.index


def _proof_refs(proof: list[str]) -> list[str]:
    """Labels a database proof cites (compressed: the parenthesised list)."""
    if proof[0] == "(":
        try:
            return proof[1:proof.index(")")]
        except ValueError:
            return []
    return proof
