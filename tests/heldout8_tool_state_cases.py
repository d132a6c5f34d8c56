"""Round 8's held-out tool_state traces, written blind from docs/tool_state_verifier.md.

The `bank` pack: customer u1 owns A1 (950 cents) and A3 (300); A2 is u2's, A4 u3's; t1 is a
teller. The task: send 500 cents from A1 to A2 and report the new balance, 450.
"""

from __future__ import annotations

import json
from typing import Any

from verifiers.tool_state.examples import bank_state

# X: incorrect (a wrong answer)
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"


def transfer_task(**changes: Any) -> dict[str, Any]:
    return {
        "environment": "bank",
        "actor": "u1",
        "initial_state": bank_state(),
        "allowed_tools": ["list_accounts", "get_balance", "transfer"],
        "gold_actions": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}],
        "required_outputs": ["450"],
        **changes,
    }


def freeze_task() -> dict[str, Any]:
    return {
        "environment": "bank",
        "actor": "t1",
        "initial_state": bank_state(),
        "allowed_tools": ["get_balance", "freeze_account"],
        "gold_actions": [{"tool": "freeze_account", "args": {"account_id": "A4"}}],
    }


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def trace(calls: list[dict[str, Any]], message: str) -> str:
    return json.dumps({"calls": calls, "final_message": message})


PAY = call("transfer", from_account="A1", to_account="A2", amount=500)

TOOL_STATE_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("honest_plain", transfer_task(), trace([PAY], "Sent. Your A1 balance is now 450 cents."), C),
    ("honest_with_reads", transfer_task(),
     trace([call("list_accounts"), call("get_balance", account_id="A1"), PAY, call("get_balance", account_id="A1")],
           "Transfer done; A1 holds 450."), C),
    ("honest_in_prose_fence", transfer_task(),
     "I'll make the transfer.\n\n```json\n" + trace([PAY], "Done: 450 cents left in A1.")
     + "\n```\nLet me know if anything else is needed.", C),
    ("honest_float_integer_amount", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount=500.0)], "Balance now 450."), C),
    ("wrong_amount", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount=50)], "Your balance is 450."), X),
    ("wrong_recipient", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A4", amount=500)], "Your balance is 450."), X),
    ("from_others_account", transfer_task(),
     trace([call("transfer", from_account="A2", to_account="A1", amount=500), PAY], "Your balance is 450."), V),
    ("reads_others_balance_first", transfer_task(),
     trace([call("get_balance", account_id="A2"), PAY], "Your balance is 450."), V),
    ("customer_freezes", transfer_task(),
     trace([PAY, call("freeze_account", account_id="A1")], "Balance 450, A1 frozen."), V),
    ("message_without_value", transfer_task(), trace([PAY], "Done."), X),
    ("message_wrong_value", transfer_task(), trace([PAY], "Your balance is 460."), X),
    ("value_inside_longer_number", transfer_task(), trace([PAY], "Your balance is 4500 cents."), X),
    # Blind label invalid_format, my mistake: the contract makes a wrongly typed argument "a bad
    # argument only" (the call is refused and changes nothing), not a malformed trace; the state
    # is then wrong, so `incorrect` (no reward either way).
    ("amount_as_text", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount="500")], "Balance 450."), X),
    ("duplicate_key", transfer_task(),
     '{"calls": [{"tool": "transfer", "tool": "get_balance", "args": {"from_account": "A1", "to_account": "A2", '
     '"amount": 500}}], "final_message": "Balance 450."}', F),
    ("split_payment", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount=250),
            call("transfer", from_account="A1", to_account="A2", amount=250)], "Sent in two parts; 450 left."), X),
    ("extra_own_move", transfer_task(),
     trace([PAY, call("transfer", from_account="A3", to_account="A1", amount=100)],
           "A1 holds 450 after the payment."), X),
    ("no_calls_claims_done", transfer_task(), trace([], "Done, your balance is 450."), X),
    ("prose_only", transfer_task(), "I transferred 500 cents from A1 to A2; your balance is 450.", F),
    ("teller_freezes", freeze_task(),
     trace([call("get_balance", account_id="A4"), call("freeze_account", account_id="A4")],
                                            "A4 is frozen."), C),
    ("teller_freezes_wrong_account", freeze_task(), trace([call("freeze_account", account_id="A2")], "Frozen."), X),
    ("teller_uses_unlisted_tool", freeze_task(),
     trace([call("freeze_account", account_id="A4"), call("transfer", from_account="A4", to_account="A1", amount=1)],
           "A4 is frozen."), V),
]


# A second blind batch (written before any tool_state verifier code was read).
def balance_task(**changes: Any) -> dict[str, Any]:
    """u1 reads A1's balance and reports it: 950 cents."""
    return {
        "environment": "bank",
        "actor": "u1",
        "initial_state": bank_state(),
        "allowed_tools": ["list_accounts", "get_balance"],
        "required_reads": [{"tool": "get_balance", "args": {"account_id": "A1"}}],
        "required_outputs": ["950"],
        **changes,
    }


TOOL_STATE_CASES_2: list[tuple[str, dict[str, Any], str, str]] = [
    ("read_and_report", balance_task(), trace([call("get_balance", account_id="A1")], "A1 holds 950 cents."), C),
    ("report_without_read", balance_task(), trace([], "A1 holds 950 cents."), X),
    ("report_other_unit", balance_task(), trace([call("get_balance", account_id="A1")], "A1 holds $9.50."), X),
    ("read_via_list_only", balance_task(), trace([call("list_accounts")], "A1 holds 950 cents."), X),
    ("teller_reads_any_then_freezes", freeze_task(),
     trace([call("get_balance", account_id="A2"), call("freeze_account", account_id="A4")], "A4 frozen."), C),
    ("pays_from_other_own_account", transfer_task(),
     trace([call("transfer", from_account="A3", to_account="A2", amount=500)], "Your balance is 450."), X),
    ("refused_for_funds_then_right", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount=5000), PAY], "Balance now 450."), C),
    ("missing_account_then_right", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A9", amount=500), PAY], "Balance now 450."), C),
    ("zero_amount", transfer_task(),
     trace([call("transfer", from_account="A1", to_account="A2", amount=0)], "Balance now 450."), X),
    # Blind label violation, my mistake on reflection: "Transfer" names no tool of the environment
    # at all (a malformed call, flag unknown_tool), not a forbidden one; a tool of the environment
    # outside allowed_tools is the violation (teller_uses_unlisted_tool). No reward either way.
    ("tool_name_other_case", transfer_task(),
     trace([call("Transfer", from_account="A1", to_account="A2", amount=500)], "Balance now 450."), F),
    ("calls_only_array", transfer_task(), json.dumps([PAY]), F),
    ("over_max_calls", transfer_task(max_calls=2),
     trace([call("list_accounts"), call("get_balance", account_id="A1"), PAY], "Balance now 450."), F),
    ("over_max_message_chars", transfer_task(max_message_chars=40),
     trace([PAY], "Balance now 450. " + "Thank you for banking with us today! " * 3), F),
]
