"""Finding the SQL in a response and classifying it with a real parser (sqlglot).

Classification decides what may run at all; it never relies on substrings. A query task
accepts exactly one read-only statement; a mutation task exactly one INSERT, UPDATE or
DELETE. Anything else, including what the parser cannot read, is not run.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from verifiers.fences import fenced_blocks

# sqlglot logs a warning whenever it falls back to a generic Command; that fallback is
# exactly what we refuse, so the warning is noise.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

# Where unfenced SQL may start: a line opening with a statement keyword (common English
# words such as SET or SHOW are left out: prose must not be mistaken for SQL).
_STATEMENT_START = re.compile(
    # Up to a few short leading block comments (bounded, so no input can make it backtrack far).
    r"^[ \t]*(?:/\*[^*]{0,500}\*+/\s*){0,5}"
    r"(?:\(|(?:SELECT|WITH|VALUES|INSERT|UPDATE|DELETE|REPLACE|MERGE|DROP|CREATE|ALTER|ATTACH|DETACH"
    r"|PRAGMA|VACUUM|COPY|GRANT|REVOKE|TRUNCATE|EXPLAIN|REINDEX)\b)",
    re.IGNORECASE | re.MULTILINE,
)
# Statement keywords that are also common English words: a run of text starting with one
# counts as SQL only when it parses.
_WEAK_START = re.compile(
    r"^[ \t]*(?:SET|RESET|SHOW|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|LOCK|LOAD|CALL|DO|EXECUTE|PREPARE"
    r"|DECLARE|DISCARD|LISTEN|NOTIFY|TABLE|ANALYZE|ANALYSE)\b",
    re.IGNORECASE | re.MULTILINE,
)
# SQL inside a sentence ("I would run SELECT ... ;"): a query keyword in capitals after a space or
# a colon. Prose says "select" in lower case; either way such a run counts only when it parses
# (as the weak starts), so a sentence is never taken for unparsable SQL (round 9).
_INLINE_START = re.compile(r"(?<=[ \t:`])(?:SELECT|WITH|VALUES|INSERT|UPDATE|DELETE)\b")
# Where an inline code span's statement ends (`SELECT ...`): its closing backtick.
_BACKTICK = re.compile(r"`")
# A line of prose after unfenced SQL ("This returns the Eng staff."): a capitalised word, then
# words without SQL's operators. The SQL before it is tried on its own (round 16: the line was
# read as part of the statement, which then failed to parse: `violation`).
_PROSE_LINE = re.compile(r"\n[ \t]*[A-Z][a-z]+\b[^=<>()*;\n]*(?:\n|$)")
# Where an inline statement may end: its first semicolon (the sentence may go on after it).
_SEMICOLON = re.compile(r";")
MAX_TRIAL_PARSE_CHARS = 20_000
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Fence tags that name SQL: the task's dialects, and other dialects' names a policy writes out of
# habit (```mysql, ```tsql); what runs is still parsed and judged in the task's dialect.
_SQL_TAGS = {"sql", "sqlite", "sqlite3", "postgres", "postgresql", "psql", "pgsql", "plpgsql",
             "mysql", "mariadb", "tsql", "t-sql", "mssql", "plsql", "sparksql", "hiveql", "bigquery", "duckdb"}

SQLGLOT_DIALECT = {"sqlite": "sqlite", "postgres": "postgres"}

# Node types that write, change schema or session state, or reach outside the database.
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterColumn", "TruncateTable",
        "Command", "Pragma", "Attach", "Detach", "Transaction", "Commit", "Rollback", "Set", "SetItem",
        "Into", "Lock", "Copy", "Grant", "Revoke", "Use", "LoadData", "Analyze", "Cache", "Uncache",
        "Refresh", "Describe", "Kill", "Execute", "Declare", "Summarize",
    )
    if hasattr(exp, name)
)
_DML = (exp.Insert, exp.Update, exp.Delete)

# Functions refused by name: file or extension access, session or server state, and
# sequence writes. The database-side guards refuse them too; this names the reason.
_FORBIDDEN_FUNCTIONS = frozenset(
    {
        "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
        "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "lo_import", "lo_export",
        "lo_from_bytea", "lo_put", "lo_create", "lo_unlink", "set_config", "pg_reload_conf",
        "pg_terminate_backend", "pg_cancel_backend", "pg_rotate_logfile", "pg_promote", "dblink",
        "dblink_exec", "nextval", "setval", "pg_advisory_lock", "pg_advisory_xact_lock",
        "pg_try_advisory_lock", "pg_notify", "query_to_xml", "txid_current", "pg_current_xact_id",
    }
)


def extract_sql(response: str, dialect: str = "sqlite") -> str | None:
    """The SQL a response offers: its last SQL-tagged fenced block, else its last
    untagged fenced block, else unfenced SQL in the text. None when there is none."""
    blocks = fenced_blocks(response)
    tagged = [body for tag, body in blocks if tag.lower() in _SQL_TAGS]
    untagged = [body for tag, body in blocks if not tag]
    if tagged:
        text = tagged[-1]
    elif untagged:
        text = untagged[-1]
    elif blocks:
        return None  # only code in some other language
    else:
        # Unfenced: the SQL starts at the first line that opens a statement; prose alone
        # is "no SQL", not unparsable SQL.
        found = _unfenced(response, dialect)
        if found is None:
            return None
        text = found
    text = text.strip()
    return text or None


def _unfenced(response: str, dialect: str) -> str | None:
    """The first statement-like run of text that parses, else the first candidate (which
    then fails classification as unparsable, and is never run)."""
    strong = [m.start() for m in _STATEMENT_START.finditer(response)][:4]
    weak = []
    for match in list(_WEAK_START.finditer(response))[:4]:
        # Written in capitals ("SET ROLE ...") it is meant as SQL; otherwise it may be prose.
        (strong if match.group(0).strip().isupper() else weak).append(match.start())
    inline = [m.start() for m in _INLINE_START.finditer(response)][:4]
    candidates: list[tuple[bool, str]] = []
    for start in sorted(set(strong + weak + inline)):
        rest = response[start:]
        blank = _BLANK_LINE.search(rest)
        ends = [rest] + ([rest[: blank.start()]] if blank else [])
        if start in inline and start not in strong and (semicolon := _SEMICOLON.search(rest)) is not None:
            ends.append(rest[: semicolon.end()])
        if start > 0 and response[start - 1] == "`" and (tick := _BACKTICK.search(rest)) is not None:
            ends.append(rest[: tick.start()])
        if (prose := _PROSE_LINE.search(rest)) is not None:
            ends.append(rest[: prose.start()])
        for text in ends:
            candidates.append((start in strong, text))
    for is_strong, text in candidates:
        if len(text) > MAX_TRIAL_PARSE_CHARS:
            continue  # trial parses are a convenience; a huge text gets one parse, in classify
        try:
            statements = parse_statements(text, dialect)
            # sqlglot reads almost any text as a generic Command: not evidence of SQL.
            if statements and (is_strong or not any(isinstance(st, exp.Command) for st in statements)):
                return text
        except (SqlglotError, ValueError, RecursionError):
            continue
    return next((text for is_strong, text in candidates if is_strong), None)


@dataclass(frozen=True)
class Classified:
    """The outcome of classifying one response. `text` is what runs: the statement
    itself, without what follows its last token (semicolons, comments), and with
    SQLite's `REPLACE INTO` spelt as its synonym `INSERT OR REPLACE INTO`, so that what
    runs is exactly what was classified."""

    ok: bool
    kind: str  # "query" | "mutation" | "unparsable" | "forbidden" | "empty"
    reason: str = ""
    statement: exp.Expression | None = field(default=None, repr=False)
    text: str = ""


# Schemas (Postgres) and name prefixes of the database's own catalog: never a data change's target.
_CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
_CATALOG_PREFIX = {"sqlite": "sqlite_", "postgres": "pg_"}


def prepare(sql: str, dialect: str) -> str:
    """The statement text to classify and run: cut after its last real token (so a
    comment or semicolon after the statement is not a second statement), and in SQLite
    `REPLACE INTO` rewritten as `INSERT OR REPLACE INTO` (the same statement there; the
    parser reads only the second). Raises what the tokenizer raises."""
    tokens = [t for t in Dialect.get_or_raise(SQLGLOT_DIALECT[dialect]).tokenize(sql)]
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        return ""
    text = sql[: tokens[-1].end + 1]
    if dialect != "sqlite":
        return text
    for i in reversed(range(len(tokens))):
        token = tokens[i]
        if token.token_type != TokenType.REPLACE or token.text.upper() != "REPLACE":
            continue
        # REPLACE as a statement (the tokenizer swallows the rest) or before INTO, but
        # not the conflict clause of INSERT OR REPLACE.
        after_or = i > 0 and tokens[i - 1].token_type == TokenType.OR
        starts = i == 0 or tokens[i - 1].token_type == TokenType.SEMICOLON
        into = i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.INTO
        if not after_or and (starts or into):
            text = text[: token.start] + "INSERT OR REPLACE" + text[token.end + 1 :]
    return text


def _catalog_target(root: exp.Expression, dialect: str) -> str | None:
    """The name of the catalog table a data change writes, if it writes one."""
    target = root.this
    if isinstance(target, exp.Schema):
        target = target.this
    if not isinstance(target, exp.Table):
        return None
    name, schema = target.name.casefold(), (target.db or "").casefold()
    if schema in _CATALOG_SCHEMAS or name.startswith(_CATALOG_PREFIX[dialect]):
        return f"{schema}.{name}" if schema else name
    return None


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return (node.sql_name() or "").lower()


@functools.lru_cache(maxsize=4096)
def _parse(sql: str, dialect: str) -> tuple[exp.Expression, ...]:
    parsed = sqlglot.parse(sql, read=SQLGLOT_DIALECT[dialect])
    # A comment on its own after a semicolon parses as an empty `Semicolon` statement.
    return tuple(s for s in parsed if s is not None and not isinstance(s, exp.Semicolon))


def parse_statements(sql: str, dialect: str) -> list[exp.Expression]:
    """Every statement in `sql` (empty statements and comments dropped); raises on
    anything the parser cannot read. Cached (extraction and classification both parse;
    callers never mutate the trees)."""
    return list(_parse(sql, dialect))


@functools.lru_cache(maxsize=4096)
def classify(sql: str, dialect: str, mode: str) -> Classified:
    """Classify one response (cached: parsing is the verifier's main host-side cost, and
    a group often repeats a response; the result is never mutated)."""
    try:
        text = prepare(sql, dialect)
        statements = parse_statements(text, dialect)
    except (SqlglotError, ValueError, RecursionError) as exc:
        return Classified(False, "unparsable", f"the SQL could not be parsed: {_ANSI.sub('', str(exc))[:300]}")
    if not statements:
        return Classified(False, "empty", "no SQL statement found")
    if len(statements) > 1:
        return Classified(False, "forbidden", f"exactly one statement is allowed, found {len(statements)}")
    statement = statements[0]
    root = statement
    while isinstance(root, exp.Subquery | exp.Paren):
        root = root.this
    if mode == "mutation" and isinstance(root, _DML):
        allowed_roots: tuple[type[exp.Expression], ...] = _DML
    else:
        allowed_roots = (exp.Query, exp.Values)
    if not isinstance(root, allowed_roots):
        wanted = "an INSERT, UPDATE or DELETE" if mode == "mutation" else "a read-only query"
        return Classified(False, "forbidden", f"{type(root).__name__} statement where {wanted} is required")
    for node in statement.walk():
        if node is root and isinstance(root, _DML):
            continue
        if isinstance(node, _FORBIDDEN_NODES):
            return Classified(False, "forbidden", f"{type(node).__name__} is not allowed in this task")
        if isinstance(node, exp.Func) and _function_name(node) in _FORBIDDEN_FUNCTIONS:
            return Classified(False, "forbidden", f"function {_function_name(node)}() is not allowed")
        if isinstance(node, exp.Select) and (node.args.get("into") or node.args.get("locks")):
            return Classified(False, "forbidden", "SELECT INTO / FOR UPDATE is not allowed")
    if isinstance(root, _DML):
        catalog = _catalog_target(root, dialect)
        if catalog is not None:
            return Classified(False, "forbidden", f"the statement writes the database catalog ({catalog[:60]})")
    kind = "mutation" if isinstance(root, _DML) else "query"
    return Classified(True, kind, statement=statement, text=text)


@functools.lru_cache(maxsize=1024)
def outermost_order_by(sql: str, dialect: str) -> bool:
    """Whether the statement's outermost query has an ORDER BY (found by parsing, so
    `ORDER\\nBY`, comments and nested subquery orderings are all handled right)."""
    statements = parse_statements(sql, dialect)
    if len(statements) != 1:
        return False
    root = statements[0]
    while isinstance(root, exp.Subquery | exp.Paren):
        if root.args.get("order"):
            return True
        root = root.this
    return bool(root.args.get("order"))


@functools.lru_cache(maxsize=1024)
def _column_number(term: exp.Literal, count: int) -> int | None:
    """The 0-based result column that `ORDER BY n` names, or None when n names none of `count`."""
    try:
        position = int(term.this)
    except ValueError:
        return None
    return position - 1 if 1 <= position <= count else None


def order_key_columns(sql: str, dialect: str) -> tuple[int, ...] | None:
    """The result columns (0-based) the outermost ORDER BY sorts on, when every key is a
    result column (by position, output alias, or the same expression); else None.

    Rows that tie on every key may come back in any order, so an ordered comparison
    should hold the response only to the order *between* tie blocks."""
    statements = parse_statements(sql, dialect)
    if len(statements) != 1:
        return None
    root = statements[0]
    while isinstance(root, exp.Subquery | exp.Paren) and not root.args.get("order"):
        root = root.this
    order = root.args.get("order")
    if order is None or not isinstance(root, exp.Query):
        return None
    selects = root.selects
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)) for e in selects):
        return None
    aliases = {e.alias.casefold(): i for i, e in enumerate(selects) if isinstance(e, exp.Alias)}
    bodies = {e.unalias().sql(dialect=SQLGLOT_DIALECT[dialect]): i for i, e in enumerate(selects)}
    keys: list[int] = []
    for ordered in order.expressions:
        term = ordered.this
        if isinstance(term, exp.Literal) and not term.is_string:
            index = _column_number(term, len(selects))
            if index is None:
                return None
            keys.append(index)
        elif isinstance(term, exp.Column) and not term.table and term.name.casefold() in aliases:
            keys.append(aliases[term.name.casefold()])
        elif term.sql(dialect=SQLGLOT_DIALECT[dialect]) in bodies:
            keys.append(bodies[term.sql(dialect=SQLGLOT_DIALECT[dialect])])
        else:
            return None
    return tuple(keys)


KEY_ALIAS = "assay_order_key_"


@functools.lru_cache(maxsize=1024)
def with_order_keys(sql: str, dialect: str) -> tuple[str, int, str | None] | None:
    """The query rewritten to also return the values of its outermost ORDER BY keys as
    extra trailing columns (so ties can be found even on keys the query does not return),
    the number of keys, and the same without its LIMIT and OFFSET when it has either (the
    rows that tie with the first or last one kept may stand in for them); None when the
    query has no such ORDER BY to rewrite.

    Only columns are added: the rows and their order stay the query's own (the caller
    checks that the leading columns still give the query's rows, and falls back to a
    strict order when they do not, e.g. under DISTINCT)."""
    statements = parse_statements(sql, dialect)
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        return None
    root = statements[0].copy()
    order = root.args.get("order")
    if order is None:
        return None
    selects = list(root.selects)
    aliases = {e.alias.casefold(): e.unalias() for e in selects if isinstance(e, exp.Alias)}
    keys: list[exp.Expression] = []
    for ordered in order.expressions:
        term = ordered.this
        if isinstance(term, exp.Literal) and not term.is_string:
            index = _column_number(term, len(selects))
            if index is None or isinstance(selects[index].unalias(), exp.Star):
                return None
            term = selects[index].unalias()
        elif isinstance(term, exp.Column) and not term.table and term.name.casefold() in aliases:
            term = aliases[term.name.casefold()]
        keys.append(exp.alias_(term.copy(), f"{KEY_ALIAS}{len(keys) + 1}"))
    root.set("expressions", selects + keys)
    keyed = root.sql(dialect=SQLGLOT_DIALECT[dialect])
    unlimited = None
    if root.args.get("limit") is not None or root.args.get("offset") is not None:
        root.set("limit", None)
        root.set("offset", None)
        unlimited = root.sql(dialect=SQLGLOT_DIALECT[dialect])
    return keyed, len(keys), unlimited
