"""Text a caller sent, stored whole on Postgres too.

Postgres `text` cannot hold U+0000 (psycopg refuses the whole statement), while JSON and
the API accept it: before this, one response containing a NUL made its whole group's
records unstorable, so the request was answered 503 (retried by every client, then an
`error` for every response of the group), and a label's note with one was a 500. The free
text columns (a record's `response`, a label's `note`) therefore store, on Postgres only, a
string that holds a NUL (or starts with the tag below) as the tag followed by the text with
U+FDD1 written as U+FDD1 U+FDD2 and U+0000 as U+FDD1 U+FDD3 (U+FDD0-U+FDD3 are Unicode
noncharacters); every read through the ORM gives back the text as sent, so hashes, the
audit chain, replay and the API see the original. Other strings a request carries
(identifiers, names) refuse NUL at the edge instead (`service/validation.py`).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Text
from sqlalchemy.types import TypeDecorator

TAG = "\ufdd0"
_ESCAPED = re.compile("\ufdd1([\ufdd2\ufdd3])")


def escape_nul(text: str) -> str:
    if "\x00" not in text and not text.startswith(TAG):
        return text
    return TAG + text.replace("\ufdd1", "\ufdd1\ufdd2").replace("\x00", "\ufdd1\ufdd3")


def unescape_nul(stored: str) -> str:
    if not stored.startswith(TAG):
        return stored
    return _ESCAPED.sub(lambda m: "\ufdd1" if m.group(1) == "\ufdd2" else "\x00", stored[1:])


class NulSafeText(TypeDecorator):
    """`Text` that holds U+0000 on Postgres as well (escaped there, as above)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return escape_nul(value) if isinstance(value, str) and dialect.name == "postgresql" else value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return unescape_nul(value) if isinstance(value, str) and dialect.name == "postgresql" else value
