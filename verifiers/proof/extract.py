"""Find the proof in a model's response (host side: regular expressions on bounded text).

The proof is the last ```metamath (or ```mm) fenced block, else the last `$= ... $.`
span of the text (with the `label $p ...` restatement just before it, if any), else the
last untagged fenced block. Inside a block, a `$= ... $.` span
is the proof and the text before it may restate the theorem as `label $p ... $=`. Anything
else a block declares (`$a`, `$c`, `$v`, `$f`, `$e`, `$d`, scopes, includes, a second
`$p`) is reported, never obeyed: the verifier judges only the proof, against the task's
own statement and database. Tokenising and checking happen in the sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TAGGED_FENCE_RE = re.compile(r"```[ \t]*(?:metamath|mm)[ \t]*\r?\n(.*?)```", re.S | re.I)
PLAIN_FENCE_RE = re.compile(r"```[ \t]*\r?\n(.*?)```", re.S)
SPAN_RE = re.compile(r"\$=(.*?)\$\.", re.S)
# Keywords a response may not use: each would add to or change the database.
DECLARING = ("$a", "$c", "$v", "$f", "$e", "$d", "${", "$}", "$[", "$]")
PROVE_RE = re.compile(r"(?:^|\s)(\S+)\s+\$p\s(.*?)(?:\s\$=|\Z)", re.S)
# A Metamath comment `$( ... $)` (whitespace-separated keywords, not nested) is whitespace, inside a
# proof too (the Metamath book, section 4.1.2); an unterminated `$(` stays and fails as a token.
COMMENT_OPEN_RE = re.compile(r"(?<!\S)\$\((?!\S)")
COMMENT_CLOSE_RE = re.compile(r"(?<!\S)\$\)(?!\S)")


def without_comments(block: str) -> str:
    """The block with its comments as spaces; linear (each search starts where the last ended)."""
    parts, pos = [], 0
    while (start := COMMENT_OPEN_RE.search(block, pos)) is not None:
        end = COMMENT_CLOSE_RE.search(block, start.end())
        if end is None:
            break
        parts.append(block[pos:start.start()] + " ")
        pos = end.end()
    return "".join(parts) + block[pos:]


@dataclass
class Extracted:
    proof: str | None
    method: str
    # Keywords the response's block uses to declare statements (a violation).
    declared: list[str] = field(default_factory=list)
    # The math string of a `$p` restatement, if the block gives one (must match the task).
    stated: str | None = None
    reason: str | None = None


def extract_proof(response: str) -> Extracted:
    found = _extract(response)
    # A response may declare nothing, wherever its proof is read from: a declaration in prose or in
    # another block is never obeyed, but the rule is the response's (round 15: only a bare span's
    # response was read for them).
    found.declared = sorted(set(found.declared) | set(_declarations_in(response)))
    return found


def _extract(response: str) -> Extracted:
    tagged = TAGGED_FENCE_RE.findall(response)
    if tagged:
        return _from_block(tagged[-1], "fenced block")
    spans = list(SPAN_RE.finditer(response))
    if spans:
        last = spans[-1]
        return _from_block(_restatement_before(response, last.start()) + last.group(0), "$= span")
    plain = PLAIN_FENCE_RE.findall(response)
    if plain:
        return _from_block(plain[-1], "plain fenced block")
    return Extracted(None, "none", reason="no ```metamath block or $= ... $. span found")


# A declaration written as Metamath anywhere in a response: a scope token, or a declaring keyword
# whose statement runs to its `$.` through plain tokens. Its statement shape is what tells it from
# prose that names a keyword ("the $e hypotheses, $= ... $.").
DECLARATION_RE = re.compile(r"(?<!\S)(?:\$[{}\[\]]|\$[acvfed](?=\s)(?:\s+(?!\$)\S+)*?\s+\$\.)(?!\S)")


def _declarations_in(response: str) -> list[str]:
    """The declaring keywords of the Metamath statements anywhere in a response (comments are
    whitespace). A span's text is Metamath like a block's: a `${ h $e |- ch $. ... $}` around it
    declares as much as it would inside a fence, though only the span is read as the proof."""
    return [match.group(0).split()[0] for match in DECLARATION_RE.finditer(without_comments(response))]


def _restatement_before(response: str, span_start: int) -> str:
    """The `label $p math` that opens a bare span (`mt3 $p |- ph $= ... $.`), else "".

    A span in prose restates its theorem as a block does, and the restated assertion must be
    the task's there too: read only from the text since the last `$.`, and only the
    restatement itself, so the prose around it is never read as declarations.
    """
    # Comments first: a `$.` inside one ends nothing (round 15: `$( ... $. $)` hid the restatement).
    head = without_comments(response[:span_start])
    head = head[head.rfind("$.") + 2:] if "$." in head else head
    found = None
    for found in PROVE_RE.finditer(head + " $="):  # noqa: B007 - the last one is wanted
        pass
    return f"{found.group(1)} $p {found.group(2)} " if found else ""


def _from_block(block: str, method: str) -> Extracted:
    block = without_comments(block)
    tokens = block.split()
    declared = sorted({tok for tok in tokens if tok in DECLARING})
    if tokens.count("$=") > 1 or tokens.count("$p") > 1:
        return Extracted(None, method, declared, reason="the response gives more than one proof or $p statement")
    if "$=" not in tokens:
        if "$p" in tokens or "$." in tokens:
            return Extracted(None, method, declared, reason="the block has statements but no $= ... $. proof")
        return Extracted(block.strip(), method, declared)
    head, _, tail = block.partition("$=")
    proof, end, _ = tail.partition("$.")
    if not end:
        return Extracted(None, method, declared, reason="the $= proof is not ended by $.")
    stated = None
    if "$p" in head.split():
        found = PROVE_RE.search(head + " $=")
        stated = found.group(2).strip() if found else ""
    return Extracted(proof.strip(), method, declared, stated)
