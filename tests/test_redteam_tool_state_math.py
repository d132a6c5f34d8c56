"""Red team: no tool-state trace or math answer can turn its own verdict into `error`
(issue 17). Both verifiers hand untrusted text to our own code in the sandbox (a trace
replayer, a LaTeX parser and computer algebra): hostile input goes after its recursion,
memory, time and the encoding of what comes back. Each must get reward 0 and a verdict
other than `error`; an honest answer right after, on the same pools, must still be
rewarded. Runs on every backend in ASSAY_TEST_BACKENDS."""

from __future__ import annotations

import json

import pytest

from verifiers.base import Verdict
from verifiers.registry import get
from verifiers.tool_state.examples import GOLD_TRANSFER, honest_response, transfer_task

NEST = 100_000

TRACE_ATTACKS = {
    "nested_json_past_the_recursion_limit": "[" * NEST + "]" * NEST,
    "nested_args": json.dumps({"calls": [{"tool": "transfer", "args": {"from_account": "[" * 900 + "]" * 900}}],
                               "final_message": "450"}),
    "deep_args_object": '{"calls": [{"tool": "transfer", "args": ' + '{"a": ' * 5000 + "1" + "}" * 5000
                        + '}], "final_message": "450"}',
    "huge_integer_amount": json.dumps({"calls": [{**GOLD_TRANSFER, "args": {**GOLD_TRANSFER["args"],
                                                                          "amount": 10 ** 4000}}],
                                       "final_message": "450"}),
    "float_nan_and_infinity": '{"calls": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", '
                              '"amount": NaN}}, {"tool": "transfer", "args": {"amount": Infinity}}], '
                              '"final_message": "450"}',
    "lone_surrogate": json.dumps({"calls": [{"tool": "transfer\ud800", "args": {}}], "final_message": "\ud800"}),
    "nul_bytes": json.dumps({"calls": [{"tool": "transfer\x00", "args": {}}], "final_message": "\x00" * 1000}),
    "many_calls": json.dumps({"calls": [{"tool": "get_balance", "args": {"account_id": "A1"}}] * 100_000,
                              "final_message": "450"}),
    "not_json": "\xff\xfe" + "}{" * 1000,
    "duplicate_keys": '{"calls": [], "calls": [' + json.dumps(GOLD_TRANSFER) + '], "final_message": "no"}',
}

MATH_ATTACKS = {
    "power_tower": r"\boxed{9^{9^{9^{9^{9}}}}}",
    "huge_factorial": r"\boxed{(10^{10})!}",
    "memory_exhaustion_expansion": r"\boxed{(1+x)^{1000000}}",
    "nested_braces": r"\boxed{" + "{" * 50_000 + "1" + "}" * 50_000 + "}",
    "nested_fractions": r"\boxed{" + r"\frac{1}{" * 3000 + "2" + "}" * 3000 + "}",
    "nested_parentheses": r"\boxed{" + "(" * 50_000 + "1" + ")" * 50_000 + "}",
    "long_sum": r"\boxed{" + "+".join(["1"] * 200_000) + "}",
    "lone_surrogate": "\\boxed{\ud800}",
    "nul_and_control_bytes": "\\boxed{1\x00\x01\x1b[2J}",
    "huge_number_literal": r"\boxed{" + "9" * 200_000 + "}",
    "unclosed_box": r"\boxed{" * 2_000,
}


@pytest.mark.parametrize("name", sorted(TRACE_ATTACKS))
def test_tool_state_attack_is_never_error(ctx, name):
    verifier = get("tool_state")
    task = verifier.parse_task(transfer_task())
    # In a group with the honest trace (one shared replay), then alone.
    attack, honest = verifier.verify_many(task, [TRACE_ATTACKS[name], honest_response()], ctx)
    assert attack.verdict is not Verdict.error and attack.reward(task) == 0.0, (attack.verdict, attack.evidence)
    assert (honest.verdict, honest.reward(task)) == (Verdict.correct, 1.0), honest.evidence
    alone = verifier.verify(task, TRACE_ATTACKS[name], ctx)
    assert alone.verdict is not Verdict.error and alone.reward(task) == 0.0, (alone.verdict, alone.evidence)


@pytest.mark.parametrize("name", sorted(MATH_ATTACKS))
def test_math_attack_is_never_error(ctx, name):
    verifier = get("math")
    task = verifier.parse_task({"answer": "2", "timeout_s": 1.0})
    attack, honest = verifier.verify_many(task, [MATH_ATTACKS[name], r"so \boxed{2}"], ctx)
    assert attack.verdict is not Verdict.error and attack.reward(task) == 0.0, (attack.verdict, attack.evidence)
    assert (honest.verdict, honest.reward(task)) == (Verdict.correct, 1.0), honest.evidence
