"""Task certification for SQL: the gold query must earn the reward; `SELECT 1`, every table
read whole, and the gold without its ordering (where order matters) must earn nothing."""

from __future__ import annotations

import re

from verifiers.base import Probe, TaskBase

_CREATE_TABLE = re.compile(
    r"\bCREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\"`\[]?[A-Za-z_][\w$]*[\"`\]]?)",
    re.IGNORECASE)
_OUTER_ORDER_BY = re.compile(r"\bORDER\s+BY\b", re.IGNORECASE)
MAX_TABLE_PROBES = 20


def reference(task: TaskBase, supplied: str | None) -> str | None:
    return supplied or task.gold  # type: ignore[attr-defined]


def tables(schema_sql: str) -> list[str]:
    found: list[str] = []
    for match in _CREATE_TABLE.finditer(schema_sql):
        name = match.group(1)
        if name not in found:
            found.append(name)
    return found[:MAX_TABLE_PROBES]


def without_order(gold: str) -> str | None:
    """The gold with its outermost ORDER BY removed (None when it has none)."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(gold.strip().rstrip(";"), read="sqlite")
    except Exception:  # noqa: BLE001 - a gold sqlglot cannot read simply gets no such probe
        return None
    if tree is None or tree.args.get("order") is None:
        return None
    tree.set("order", None)
    return tree.sql(dialect="sqlite")


def probes(task: TaskBase) -> list[Probe]:
    out = [Probe("select_1", "SELECT 1;")]
    out += [Probe(f"select_all_{name.strip(chr(34) + '`[]')}", f"SELECT * FROM {name};")
            for name in tables(task.schema_sql)]  # type: ignore[attr-defined]
    gold = task.gold  # type: ignore[attr-defined]
    order_matters = task.order_matters  # type: ignore[attr-defined]
    ordered = order_matters or (order_matters is None and gold and _OUTER_ORDER_BY.search(gold))
    if gold and task.mode == "query" and ordered:  # type: ignore[attr-defined]
        unordered = without_order(gold)
        if unordered:
            out.append(Probe("gold_without_order", unordered))
    return out
