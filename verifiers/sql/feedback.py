"""What a policy may be shown about an `sql` decision (see verifiers/feedback.py).

The response's own problems (no SQL, a statement it may not run, its own database error
with numbers and quoted text it did not write masked, since a database quotes the data a
statement tripped on) and, per instance, the expected row count and whether the response got
fewer, as many or more rows (and changed fewer, as many or more rows of each table), and its
column problem. Never a row, a value or a diff: the rows a response gets back are computed
from the hidden instances, so showing them would let any response read the hidden tables.
Never the response's own counts either: a response steers them with the hidden rows
(`WITH RECURSIVE` up to a hidden number returns that many rows), so a count would read a
hidden value in one response (round 15); a comparison with a count the task fixes tells at
most one of three answers an instance, like the reward.
"""

from __future__ import annotations

from typing import Any

from verifiers.base import Outcome, TaskBase
from verifiers.feedback import mask_literals, pick

# Flags computed from the hidden gold (which tables it reads, whether it reads any) or from
# per-instance matches: a reward key does not see them for a registered task.
HIDDEN_FLAGS = frozenset({"reads_unrelated_tables", "constant_result", "instance_dependent"})
ERROR_CHARS = 300


def sql_feedback(task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
    evidence = outcome.evidence
    out: dict[str, Any] = {"verdict": outcome.verdict.value, **pick(evidence, "reason", "classification")}
    instances = [_instance(entry, response) for entry in evidence.get("instances") or []]
    if instances:
        out["instances"] = instances
    return out


def _instance(entry: dict[str, Any], response: str) -> dict[str, Any]:
    item: dict[str, Any] = {"instance": entry.get("instance")}
    if entry.get("ok") is False:
        first_line = str(entry.get("error") or "").strip().splitlines()[:1]
        item.update(failure=entry.get("failure"),
                    error=mask_literals(first_line[0][:ERROR_CHARS], response) if first_line else "")
        return item
    if "expected_rows" in entry:
        item.update(expected_rows=entry["expected_rows"], rows=versus(entry["rows"], entry["expected_rows"]))
    columns = (entry.get("diff") or {}).get("columns")
    if columns is not None:
        # "expected N columns, got M" or the response's own column names: fixed by its text, not the data.
        item["columns"] = columns
    if entry.get("problems_shown"):
        item["problems"] = entry["problems_shown"]  # predicate checks, without the response's counts
    tables = entry.get("tables") or {}
    if tables:
        item["tables"] = {name: {"removed": versus(t["removed"], t["expected_removed"]),
                                 "expected_removed": t["expected_removed"],
                                 "added": versus(t["added"], t["expected_added"]),
                                 "expected_added": t["expected_added"]}
                          for name, t in tables.items()}
    return item


def versus(count: int, expected: int) -> str:
    """A count the response steers, told only against the one the task fixes."""
    return "same" if count == expected else "fewer" if count < expected else "more"
