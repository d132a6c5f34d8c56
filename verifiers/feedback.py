"""Feedback: what a policy may be shown about a decision.

Every verifier family writes two views of an outcome. `evidence` is the full audit view
(auditors, the viewer, replay). `feedback` is built for a policy to read (multi-turn and
agentic trainers show it to the model): the response's own errors, visible-test results,
counts, the format problem; never a hidden value, and nothing computed from one that the
response can steer. Each family's `feedback.py` picks what it shows from the evidence (a
whitelist, never a blacklist); `HiddenText.scrub` is the second line: it masks in every
string of the feedback any word or number that occurs in the task's hidden fields and
neither in its public fields nor in the response itself.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from verifiers.base import Outcome, TaskBase, Verdict

MASK = "…"
_WORD = re.compile(r"[A-Za-z0-9_]+")
# Numbers and quoted text in a message from a database or interpreter: they may quote the
# data the statement tripped on (a cast, a duplicate key), hidden or computed from hidden.
_LITERAL = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(?<![A-Za-z0-9_.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# Words of the languages' own vocabulary: they say nothing about a task's hidden data.
_SQL_VOCABULARY = (
    "select from where and or not null is in as on join left right inner outer cross full group by order "
    "having limit offset union all distinct insert into values update set delete create table primary key "
    "integer int text real float numeric varchar char boolean true false case when then else end exists "
    "like between asc desc count sum avg min max cast coalesce with default unique references index"
)
_SQL_WORDS = frozenset(_SQL_VOCABULARY.split(" "))
_VOCABULARY = frozenset(w.lower() for w in (*keyword.kwlist, *dir(builtins))) | _SQL_WORDS


def words(value: Any) -> Iterable[str]:
    """Every word and number in a JSON value (keys included), lower-cased."""
    if isinstance(value, str):
        yield from (w.lower() for w in _WORD.findall(value))
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield from (w.lower() for w in _WORD.findall(str(value)))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from words(str(key))
            yield from words(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from words(item)


@functools.lru_cache(maxsize=64)
def _schema_words(model: type[TaskBase]) -> frozenset[str]:
    """Field names of the task model and its nested models: the shape, not the content."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "properties" and isinstance(item, dict):
                    found.update(k.lower() for k in item)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(model.model_json_schema())
    return frozenset(w for name in found for w in _WORD.findall(name))


@dataclass(frozen=True)
class HiddenText:
    """The words a task's hidden fields hold that its public fields do not."""

    tokens: frozenset[str]

    @classmethod
    def of(cls, task: TaskBase) -> HiddenText:
        data = task.model_dump(mode="json")
        hidden_names = task.hidden()
        hidden = set(words([v for k, v in data.items() if k in hidden_names]))
        public = set(words({k: v for k, v in data.items() if k not in hidden_names}))
        return cls(frozenset(hidden - public - _VOCABULARY - _schema_words(type(task))))

    def scrub(self, value: Any, response: str) -> Any:
        """`value` with every hidden word the response does not state itself masked."""
        if not self.tokens:
            return value
        stated = set(words(response))
        secret = self.tokens - stated

        def mask(text: str) -> str:
            return _WORD.sub(lambda m: MASK if m.group(0).lower() in secret else m.group(0), text)

        return _map_strings(value, mask)


def mask_literals(text: str, response: str) -> str:
    """Numbers and quoted text in `text` that the response does not contain, masked: for
    messages a database or interpreter wrote while it held hidden data."""
    def keep(match: re.Match[str]) -> str:
        literal = match.group(0)
        inner = literal[1:-1] if literal[:1] in "'\"" else literal
        return literal if inner and inner in response else (literal[0] + MASK + literal[0]
                                                             if literal[:1] in "'\"" else MASK)
    return _LITERAL.sub(keep, text)


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(v, fn) for v in value]
    return value


def infrastructure(outcome: Outcome) -> dict[str, Any]:
    """For verdict `error`: which part failed, in the service's own words (never a job's text)."""
    return pick(outcome.evidence, "error", "error_cause", "message") if outcome.verdict == Verdict.error else {}


def pick(evidence: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The named keys of `evidence` that are present."""
    return {k: evidence[k] for k in keys if k in evidence}
