"""Moved to `service.testing.ui` (bench/ and scripts/ import it too); this name stays for
branches written before the move."""

from service.testing.ui import (  # noqa: F401
    CHROMIUM,
    CHROMIUM_ARGS,
    GOLD_MARKER,
    HOSTILE_EVAL_NAME,
    HOSTILE_GROUP_ID,
    HOSTILE_RESPONSES,
    HOSTILE_SQL_TASK,
    WATCH_SCRIPT,
    Populated,
    csrf_field,
    populate,
    sign_in,
)
