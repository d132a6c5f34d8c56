"""A call target that returns what it was given (standard library only).

The sandbox's own check of its call path, end to end: the payload goes in with the job,
the value comes back as the job's result frame, through every hop a verifier's result
takes (supervisor, worker, container or sandbox runner). Tests use it to send values of
any size both ways; an operator can use it as a smoke check of a backend.
"""

from __future__ import annotations

from typing import Any


def echo(payload: Any, channel: Any) -> Any:
    """`payload`, unchanged; the job then exits right after writing it."""
    return payload
