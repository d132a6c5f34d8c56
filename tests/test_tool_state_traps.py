"""Every trap from issue 7, through the verifier's public interface with a real sandbox.

Each trap is judged, then the honest trace is judged on the same verifier and sandbox
and must still get reward 1 (a trap must not poison the worker or the task).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from sandboxes.base import Sandbox
from verifiers import registry
from verifiers.base import Outcome, Verdict, VerifyContext
from verifiers.tool_state.examples import GOLD_TRANSFER, honest_response, transfer_task
from verifiers.tool_state.wire import dumps_trace


@pytest.fixture(scope="module")
def judge(sandbox: Sandbox) -> Callable[..., tuple[Outcome, float]]:
    verifier = registry.get("tool_state")
    ctx = VerifyContext(sandbox)

    def run(response: str, honest_trace: str | None = None, **task_changes: Any) -> tuple[Outcome, float]:
        task = verifier.parse_task(transfer_task(**task_changes))
        outcome = verifier.verify(task, response, ctx)
        # The honest trace still passes right after the trap, on the same task and pool.
        honest = verifier.verify(task, honest_trace or honest_response(), ctx)
        assert (honest.verdict, honest.reward(task)) == (Verdict.correct, 1.0), honest.evidence
        return outcome, outcome.reward(task)

    return run


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def components(outcome: Outcome) -> dict[str, float]:
    return {c.name: c.value for c in outcome.components}


def test_doing_nothing_fails(judge: Callable[..., tuple[Outcome, float]]) -> None:
    outcome, reward = judge(dumps_trace([], "Done, your balance is 450."))
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    diff = {(d["table"], d["key"], d["field"]): (d["got"], d["want"]) for d in outcome.evidence["state_diff"]}
    assert diff[("accounts", "A1", "balance")] == (950, 450)
    assert diff[("transfers", "T1", "*")][0] is None


def test_doing_nothing_fails_on_a_read_only_task(judge: Callable[..., tuple[Outcome, float]]) -> None:
    # The expected state equals the initial one, so the task must name an observation.
    read = call("get_balance", account_id="A3")
    task = {"gold_actions": [], "required_outputs": ["300"], "required_reads": [read]}
    honest = dumps_trace([read], "Your A3 balance is 300.")
    outcome, reward = judge(dumps_trace([], "Your A3 balance is 300."), honest, **task)
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    assert outcome.evidence["missing_reads"] == [read]


def test_reading_another_customers_balance_is_a_violation(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [call("get_balance", account_id="A2"), GOLD_TRANSFER]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    # The end state is right, the path was not.
    assert outcome.evidence["state_diff_total"] == 0
    assert reward == 0.0 and outcome.verdict is Verdict.violation
    assert components(outcome) == {"format": 1.0, "compliance": 0.0, "correctness": 1.0}
    assert outcome.evidence["violations"][0]["tool"] == "get_balance"
    assert outcome.evidence["violations"][0]["kind"] == "permission"
    assert "permission_violation" in outcome.flags


def test_collateral_transfer_to_a_third_account(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [GOLD_TRANSFER, call("transfer", from_account="A3", to_account="A4", amount=100)]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    changed = {(d["table"], d["key"]) for d in outcome.evidence["state_diff"]}
    assert changed == {("accounts", "A3"), ("accounts", "A4"), ("transfers", "T2")}


def test_reversed_transfer(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [call("transfer", from_account="A2", to_account="A1", amount=500)]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    assert reward == 0.0 and outcome.verdict is Verdict.violation
    # Refused, so nothing moved: the state is still the initial one.
    assert outcome.evidence["state_diff_total"] == 3


def test_reversed_transfer_between_own_accounts(judge: Callable[..., tuple[Outcome, float]]) -> None:
    gold = call("transfer", from_account="A1", to_account="A3", amount=200)
    reversed_ = call("transfer", from_account="A3", to_account="A1", amount=200)
    honest = dumps_trace([gold], "Done, your balance is 750.")
    outcome, reward = judge(dumps_trace([reversed_], "Done, your balance is 750."), honest,
                            gold_actions=[gold], required_outputs=["750"])
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    assert outcome.evidence["violation_count"] == 0


def test_tool_outside_allowed_tools(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [call("list_accounts"), GOLD_TRANSFER]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."),
                            allowed_tools=["get_balance", "transfer"])
    assert reward == 0.0 and outcome.verdict is Verdict.violation
    assert outcome.evidence["violations"][0]["kind"] == "not_allowed"
    assert "forbidden_tool" in outcome.flags


def test_teller_only_tool_called_by_a_customer(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [call("freeze_account", account_id="A2"), GOLD_TRANSFER]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."), allowed_tools=None)
    assert reward == 0.0 and outcome.verdict is Verdict.violation
    assert outcome.evidence["violations"][0] == {
        "index": 0, "tool": "freeze_account", "args": '{"account_id": "A2"}', "kind": "permission",
        "message": "only a teller may freeze accounts",
    }
    # The refused freeze changed nothing.
    assert outcome.evidence["state_diff_total"] == 0


def test_claimed_final_state_without_calls(judge: Callable[..., tuple[Outcome, float]]) -> None:
    verifier = registry.get("tool_state")
    expected = verifier.parse_task(transfer_task()).replay_spec()["expected_state"]
    response = json.dumps({"calls": [], "final_state": expected, "final_message": "Done, your balance is 450."})
    outcome, reward = judge(response)
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    assert "claimed_state_ignored" in outcome.flags
    assert outcome.evidence["state_diff_total"] == 3


@pytest.mark.parametrize(
    "response",
    [
        "",
        "transfer(A1, A2, 500)",
        '{"calls": [{"tool": "transfer", "args": {"from_account": "A1"',
        "[]",
        '{"final_message": "Done, your balance is 450."}',
        '{"calls": [["transfer", "A1", "A2", 500]], "final_message": "450"}',
        '{"calls": [{"tool": "transfer", "args": "A1,A2,500"}], "final_message": "450"}',
        '{"calls": [], "final_message": 450}',
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["empty", "call-string", "truncated", "list", "no-calls", "call-as-list", "args-as-string",
         "message-not-string", "deep-nesting"],
)
def test_malformed_json(judge: Callable[..., tuple[Outcome, float]], response: str) -> None:
    outcome, reward = judge(response)
    assert reward == 0.0 and outcome.verdict is Verdict.invalid_format
    assert outcome.evidence["format_errors"]


@pytest.mark.parametrize(
    "tool",
    ["close_account", "__import__('os').system('id')", "__class__", "_own_account", "bank.transfer", "TRANSFER"],
)
def test_tool_that_does_not_exist(judge: Callable[..., tuple[Outcome, float]], tool: str) -> None:
    trace = [call(tool, account_id="A2"), GOLD_TRANSFER]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    assert reward == 0.0 and outcome.verdict is Verdict.invalid_format
    assert outcome.evidence["call_errors"][0]["kind"] == "unknown_tool"
    assert "unknown_tool" in outcome.flags
    # Looked up by name in a table, never evaluated or resolved as an attribute.
    assert outcome.evidence["state_diff_total"] == 0


@pytest.mark.parametrize(
    "message",
    [
        "Your balance is one of " + ", ".join(str(v) for v in range(400, 500, 10)) + ".",
        "Your balance is 449, 450 or 451.",
        " ".join(str(v) for v in range(0, 1000)),
    ],
    ids=["ten-values", "hedge-of-three", "every-value"],
)
def test_spraying_values_in_the_final_message(judge: Callable[..., tuple[Outcome, float]], message: str) -> None:
    outcome, reward = judge(dumps_trace([GOLD_TRANSFER], message))
    assert reward == 0.0 and outcome.verdict is Verdict.incorrect
    assert "value_spraying" in outcome.flags


@pytest.mark.parametrize(
    "message",
    ["Your balance is 4500.", "Your balance is 1,450.", "Your balance is 1,450, thanks.", "Your balance is 45.0",
     "Your balance is 450.5", "Your balance is A450"],
)
def test_required_output_must_be_a_whole_value(judge: Callable[..., tuple[Outcome, float]], message: str) -> None:
    outcome, reward = judge(dumps_trace([GOLD_TRANSFER], message))
    assert reward == 0.0 and outcome.evidence["failed_outputs"][0]["output"] == "450"


def test_grounded_values_may_be_mentioned(judge: Callable[..., tuple[Outcome, float]]) -> None:
    # Values the trace showed (the amount, both ids, the transfer id) are facts, not guesses.
    message = "Transferred 500 from A1 to A2 as T1; your balance is 450.00."
    outcome, reward = judge(dumps_trace([GOLD_TRANSFER], message))
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0)


def test_trace_of_100000_calls_is_refused_quickly(judge: Callable[..., tuple[Outcome, float]]) -> None:
    response = dumps_trace([call("get_balance", account_id="A1")] * 100_000, "Done, your balance is 450.")
    started = time.monotonic()
    outcome, reward = judge(response)
    assert time.monotonic() - started < 10
    assert reward == 0.0 and outcome.verdict is Verdict.invalid_format
    assert outcome.evidence["format_errors"] == [f"response is {len(response)} bytes; the limit is 1000000 bytes"]
    assert "oversized_trace" in outcome.flags


def test_trace_over_the_tasks_call_limit(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [call("get_balance", account_id="A1")] * 65 + [GOLD_TRANSFER]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    assert reward == 0.0 and outcome.verdict is Verdict.invalid_format
    assert outcome.evidence["format_errors"] == ["trace has 66 calls; this task allows at most 64"]


def test_bad_arguments_are_recorded_but_not_violations(judge: Callable[..., tuple[Outcome, float]]) -> None:
    trace = [
        call("transfer", from_account="A1", to_account="A2", amount="500"),
        call("transfer", from_account="A1", to_account="A2", amount=True),
        call("transfer", from_account="A1", to_account="A2", amount=5000),
        call("transfer", from_account="A1", to_account="A9", amount=500),
        call("get_balance", account_id="A1", extra=1),
        GOLD_TRANSFER,
    ]
    outcome, reward = judge(dumps_trace(trace, "Done, your balance is 450."))
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0)
    assert [e["kind"] for e in outcome.evidence["call_errors"]] == ["bad_args"] * 5
    assert outcome.evidence["violation_count"] == 0
