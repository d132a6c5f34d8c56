"""Cheap detectors over a SQL response, from the parse tree the verifier already made.

- `constant_result`: a query that reads no table (its result cannot depend on the data),
  unless the task's own gold reads none either;
- `reads_unrelated_tables`: tables the gold does not read and that no foreign key links to
  a table it reads, or system catalogs (`sqlite_master`, `information_schema`, ...). Needs a
  gold statement; a join through a related table is not flagged.

Only the response's own table names go into evidence: the gold is hidden.
"""

from __future__ import annotations

import functools

from sqlglot import exp
from sqlglot.errors import SqlglotError

from verifiers.base import Flag, flag
from verifiers.sql.parse import parse_statements
from verifiers.sql.task import SqlTask

CATALOG_PREFIXES = ("sqlite_", "pg_")
CATALOG_SCHEMAS = {"information_schema", "pg_catalog", "sqlite_master", "sqlite_schema"}


def tables_read(statement: exp.Expression) -> frozenset[str]:
    """Real tables a statement names (common table expressions left out), lower case."""
    ctes = {cte.alias.lower() for cte in statement.find_all(exp.CTE)}
    out = set()
    for table in statement.find_all(exp.Table):
        name = table.name.lower()
        schema = (table.db or "").lower()
        if not name or (name in ctes and not schema):
            continue
        out.add(f"{schema}.{name}" if schema in CATALOG_SCHEMAS else name)
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def _statement_tables(sql: str, dialect: str) -> frozenset[str] | None:
    try:
        statements = parse_statements(sql, dialect)
    except (SqlglotError, ValueError, RecursionError):
        return None
    return frozenset().union(*(tables_read(s) for s in statements)) if statements else None


@functools.lru_cache(maxsize=64)
def foreign_keys(schema_sql: str, dialect: str) -> frozenset[tuple[str, str]]:
    """(table, referenced table) pairs declared in the task's schema."""
    try:
        statements = parse_statements(schema_sql, dialect)
    except (SqlglotError, ValueError, RecursionError):
        return frozenset()
    pairs = set()
    for statement in statements:
        if not isinstance(statement, exp.Create) or not isinstance(statement.this, exp.Schema):
            continue
        owner = statement.this.this
        if not isinstance(owner, exp.Table):
            continue
        for reference in statement.find_all(exp.Reference):
            target = reference.find(exp.Table)
            if target is not None:
                pairs.add((owner.name.lower(), target.name.lower()))
    return frozenset(pairs)


def _is_catalog(name: str) -> bool:
    return name.startswith(CATALOG_PREFIXES) or name.split(".", 1)[0] in CATALOG_SCHEMAS


def sql_flags(task: SqlTask, statement: exp.Expression | None) -> list[Flag]:
    if statement is None:
        return []
    mine = tables_read(statement)
    gold = _statement_tables(task.gold, task.dialect) if task.gold else None
    flags = []
    if not mine and task.mode == "query" and gold != frozenset():
        flags.append(flag("constant_result", reason="the query reads no table"))
    catalogs = sorted(t for t in mine if _is_catalog(t))
    unrelated = set(catalogs)
    if gold:
        linked = {b for a, b in foreign_keys(task.schema_sql, task.dialect) if a in gold}
        linked |= {a for a, b in foreign_keys(task.schema_sql, task.dialect) if b in gold}
        unrelated |= {t for t in mine if t not in gold and t not in linked}
    if unrelated:
        flags.append(flag("reads_unrelated_tables", tables=sorted(unrelated)[:10]))
    return flags
