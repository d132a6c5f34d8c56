"""A record's export line (issue 27): one field list, derived from `RecordOut`, rendered two ways.

The export writes each record as one JSON object: RecordOut's fields, in its order, each from
the stored column(s) named here. `line_fields(RecordOut)` is the one definition of that list;
from it come the Python line builder (SQLite, the archive) and the SQL expression PostgreSQL
builds lines with. A field is derived from its annotation and the column of the same name
(str, int, float, bool, datetime, a Literal of strings, a dict or list of stored JSON), unless
`SPECIAL` says otherwise. A RecordOut field with no column of its name, no `SPECIAL` entry, or a
type not known here raises `RecordFormatError` when this module is imported, naming the field:
a new field flows into both export paths or stops the service from starting, never one of them.

The two renderings give the same JSON value; their bytes differ only inside stored JSON
columns (PostgreSQL writes the stored text as it is, Python re-encodes it compactly).
"""

from __future__ import annotations

import enum
import json
import operator
import types
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from service.schemas import RecordOut
from service.tables import RecordRow

Kind = Literal["text", "int", "float", "bool", "time", "json", "list_or_empty", "object_or_empty", "components",
               "run"]


class RecordFormatError(TypeError):
    """A RecordOut field the export cannot derive (no column of its name, or a type not known here)."""


@dataclass(frozen=True)
class LineField:
    name: str  # the key in the line (RecordOut's field)
    kind: Kind  # how the value is written
    columns: tuple[str, ...]  # the stored columns it is read from
    optional: bool  # RecordOut allows null


# Fields whose value is not simply the column of their name: (kind, columns).
SPECIAL: dict[str, tuple[Kind, tuple[str, ...]]] = {
    "task": ("json", ("task_public",)),  # only the public part of a task is ever shown
    "components": ("components", ("components",)),  # each {"value": float, "hard": bool}
    "flags": ("list_or_empty", ("flags",)),  # a stored null is no flag
    "flag_evidence": ("object_or_empty", ("flag_evidence",)),
    "run": ("run", ("run_id", "run_step")),  # {"id", "step"} when both are set, else null
}
_PLAIN: dict[Any, Kind] = {str: "text", int: "int", float: "float", bool: "bool", datetime: "time",
                           dict: "json", list: "json"}
_COLUMNS = RecordRow.__table__.columns


def _unwrapped(annotation: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed) of `X | None`, `Optional[X]` or `X`."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def _kind_of(name: str, annotation: Any) -> Kind:
    base = get_origin(annotation) or annotation
    if base is Literal and all(isinstance(a, str) for a in get_args(annotation)):
        return "text"
    if isinstance(base, type) and issubclass(base, str) and issubclass(base, enum.Enum):
        return "text"  # stored as its value
    if base in _PLAIN:
        return _PLAIN[base]
    raise RecordFormatError(f"RecordOut.{name}: the export does not know how to write {annotation!r}; "
                            "add it to service/record_line.py")


def line_fields(model: type[BaseModel]) -> list[LineField]:
    """The export line's fields for `model` (RecordOut), in its field order."""
    fields = []
    for name, info in model.model_fields.items():
        annotation, optional = _unwrapped(info.annotation)
        kind, columns = SPECIAL.get(name) or (_kind_of(name, annotation), (name,))
        missing = [c for c in columns if c not in _COLUMNS]
        if missing:
            raise RecordFormatError(f"RecordOut.{name}: no stored column {missing[0]!r} to export it from; "
                                    "name a column in service/record_line.py SPECIAL")
        fields.append(LineField(name, kind, columns, optional))
    return fields


def columns_of(fields: list[LineField]) -> list[str]:
    """The stored columns the fields are read from, each once, `seq` first."""
    out = ["seq"]
    for f in fields:
        out += [c for c in f.columns if c not in out]
    return out


# -- Python: a row (anything with the columns as attributes) -> the line ----------------------

def iso(moment: datetime) -> str:
    """As pydantic writes a datetime: ISO 8601, `Z` for UTC."""
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _getter(f: LineField) -> Callable[[Any], Any]:
    get = operator.attrgetter(f.columns[0])
    if f.kind in ("text", "int", "json"):
        return get
    if f.kind in ("float", "bool", "time"):
        convert = {"float": float, "bool": bool, "time": iso}[f.kind]
        if f.optional:
            return lambda r: None if (v := get(r)) is None else convert(v)
        return lambda r: convert(get(r))
    if f.kind == "list_or_empty":
        return lambda r: get(r) or []
    if f.kind == "object_or_empty":
        return lambda r: get(r) or {}
    if f.kind == "components":
        return lambda r: {k: {"value": float(c["value"]), "hard": bool(c["hard"])} for k, c in get(r).items()}
    run_id, run_step = (operator.attrgetter(c) for c in f.columns)
    return lambda r: ({"id": run_id(r), "step": run_step(r)}
                      if run_id(r) is not None and run_step(r) is not None else None)


def python_line(fields: list[LineField]) -> Callable[[Any], str]:
    """A function: row -> its line. Raises ValueError for a non-finite float (pydantic writes
    null there; the caller falls back to the model) and TypeError/KeyError/AttributeError for a
    stored shape it does not know."""
    getters = [(f.name, _getter(f)) for f in fields]
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    return lambda r: dumps({name: get(r) for name, get in getters})


# -- SQL: the same line, built by PostgreSQL from the `records` row ---------------------------

def _number(column: str) -> str:
    """A float8 as JSON the way pydantic writes a float: `1.0` (not `1`), `-0.0`, `1e-05`,
    `1e+20`, `null` if not finite. PostgreSQL writes the shortest exact digits as Python does,
    in plain digits below 1e15, so a whole number there only lacks the `.0` (a numeric cast
    made the number half a line's cost)."""
    return (f"CASE WHEN abs({column}) >= 1e15 THEN CASE WHEN {column} IN ('NaN', 'Infinity', '-Infinity') "
            f"THEN 'null' ELSE {column}::text END "
            f"WHEN {column} = trunc({column}) THEN {column}::text || '.0' ELSE {column}::text END")


def _sql_value(f: LineField, table: str) -> str:
    c = [f"{table}.{name}" for name in f.columns]
    if f.kind == "run":
        return (f"CASE WHEN {c[0]} IS NOT NULL AND {c[1]} IS NOT NULL THEN '{{\"id\":' || to_json({c[0]})::text "
                f"|| ',\"step\":' || {c[1]}::text || '}}' ELSE 'null' END")
    if f.kind in ("list_or_empty", "object_or_empty"):
        empty = "[]" if f.kind == "list_or_empty" else "{}"
        return f"CASE WHEN {c[0]} IS NULL OR {c[0]}::text = 'null' THEN '{empty}' ELSE {c[0]}::text END"
    if f.kind == "bool":
        null = f"WHEN {c[0]} IS NULL THEN 'null' " if f.optional else ""  # else NULL is false, as bool(None)
        return f"CASE {null}WHEN {c[0]} THEN 'true' ELSE 'false' END"
    if f.kind == "time":
        # A whole second has no fraction, as pydantic writes it.
        iso_sql = (f"to_char({c[0]} AT TIME ZONE 'UTC', "
                   f"CASE WHEN mod(extract(microseconds FROM {c[0]})::bigint, 1000000) = 0 "
                   f"THEN 'YYYY-MM-DD\"T\"HH24:MI:SS' ELSE 'YYYY-MM-DD\"T\"HH24:MI:SS.US' END)")
        value = f"'\"' || {iso_sql} || 'Z\"'"
    elif f.kind == "text":
        value = f"to_json({c[0]})::text"
    elif f.kind == "float":
        value = _number(c[0])
    else:  # int, json, components: PostgreSQL's text of the value is its JSON
        value = f"{c[0]}::text"
    return f"coalesce({value}, 'null')" if _COLUMNS[f.columns[0]].nullable else value


def sql_line(fields: list[LineField], table: str = "records") -> str:
    """The SQL expression of a row's whole line. One concat() copies each piece once; a chain
    of || copies the growing line at each step (a third slower)."""
    pieces = ", ".join(f"'{'{' if i == 0 else ','}\"{f.name}\":', {_sql_value(f, table)}"
                       for i, f in enumerate(fields))
    return f"concat({pieces}, '}}')"


FIELDS = line_fields(RecordOut)
COLUMNS = columns_of(FIELDS)
export_line = python_line(FIELDS)
LINE_SQL = sql_line(FIELDS)
