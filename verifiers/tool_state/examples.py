"""A worked `bank` task: the issue's request shape, used by tests, the benchmark and docs."""

from __future__ import annotations

import copy
from typing import Any

from verifiers.tool_state.wire import dumps_trace

BANK_STATE: dict[str, Any] = {
    "users": {
        "u1": {"name": "Ada", "role": "customer"},
        "u2": {"name": "Ben", "role": "customer"},
        "u3": {"name": "Cy", "role": "customer"},
        "t1": {"name": "Tess", "role": "teller"},
    },
    "accounts": {
        "A1": {"owner": "u1", "balance": 950, "frozen": False},
        "A2": {"owner": "u2", "balance": 1000, "frozen": False},
        "A3": {"owner": "u1", "balance": 300, "frozen": False},
        "A4": {"owner": "u3", "balance": 200, "frozen": False},
    },
    "transfers": [],
}


def bank_state() -> dict[str, Any]:
    return copy.deepcopy(BANK_STATE)


def transfer_task(**changes: Any) -> dict[str, Any]:
    """u1 sends 500 cents from A1 to A2 and reports the new balance, 450."""
    task = {
        "environment": "bank",
        "actor": "u1",
        "initial_state": bank_state(),
        "allowed_tools": ["list_accounts", "get_balance", "transfer"],
        "gold_actions": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}],
        "required_outputs": ["450"],
    }
    task.update(changes)
    return task


GOLD_TRANSFER = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}


def honest_response() -> str:
    return dumps_trace([GOLD_TRANSFER], "Done, your balance is 450.")
