"""tool_state, second round: permission is judged on what a call tries to do, before its
arguments are validated, and a trace whose JSON repeats a key is malformed.

Through the verifier's public interface (replay in the real sandbox) and the HTTP env
sessions' environment; every hostile trace is judged in a group with an honest one,
which still gets its reward.
"""

from __future__ import annotations

import json

import pytest

from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get
from verifiers.tool_state.inside.bank import PACK
from verifiers.tool_state.inside.env import Environment

WORLD = {
    "users": {"kai": {"name": "Kai", "role": "customer"}, "lena": {"name": "Lena", "role": "customer"},
              "ops": {"name": "Ops", "role": "teller"}},
    "accounts": {"K-1": {"owner": "kai", "balance": 7000, "frozen": False},
                 "K-2": {"owner": "kai", "balance": 100, "frozen": False},
                 "L-1": {"owner": "lena", "balance": 99000, "frozen": False}},
    "transfers": [],
}
PAY = {"tool": "transfer", "args": {"from_account": "K-1", "to_account": "L-1", "amount": 2500}}
MESSAGE = "Sent 2500 to Lena; K-1 now holds 4500."


def trace(*calls: dict, message: str = MESSAGE) -> str:
    return json.dumps({"calls": list(calls), "final_message": message})


HONEST = trace(PAY)


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox, reveal_hidden=True)


@pytest.fixture(scope="module")
def task():
    return get("tool_state").parse_task({"environment": "bank", "actor": "kai", "initial_state": WORLD,
                                         "gold_actions": [PAY], "required_outputs": ["4500"]})


ATTEMPTS = {
    "read with an unknown extra argument": {"tool": "get_balance", "args": {"account_id": "L-1", "all": True}},
    "read with the id in a list": {"tool": "get_balance", "args": {"account_id": ["L-1"]}},
    "read with positional arguments": {"tool": "get_balance", "args": ["L-1"]},
    "spend another's money, extra argument": {"tool": "transfer", "args": {
        "from_account": "L-1", "to_account": "K-1", "amount": 10, "reference": "x"}},
    "spend another's money, amount as text": {"tool": "transfer", "args": {
        "from_account": "L-1", "to_account": "K-1", "amount": "10"}},
    "spend another's money, amount missing": {"tool": "transfer", "args": {"from_account": "L-1", "to_account": "K-1"}},
    "freeze as a customer, no arguments": {"tool": "freeze_account", "args": {}},
    "freeze as a customer, bad argument": {"tool": "freeze_account", "args": {"account_id": 7, "why": "x"}},
}


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_an_attempt_is_a_violation_whatever_else_is_wrong_with_the_call(ctx, task, name):
    hostile, honest = get("tool_state").verify_many(task, [trace(ATTEMPTS[name], PAY), HONEST], ctx)
    assert hostile.verdict is Verdict.violation, hostile.evidence
    assert hostile.reward(task) == 0.0
    assert hostile.evidence["violation_count"] == 1
    assert "permission_violation" in hostile.flag_map()
    assert honest.verdict is Verdict.correct and honest.reward(task) == 1.0


def test_a_malformed_call_on_ones_own_account_is_only_a_bad_argument(ctx, task):
    own = trace({"tool": "get_balance", "args": {"account_id": "K-2", "all": True}}, PAY)
    # Paying *to* someone else's account is allowed; the extra argument makes it a bad call.
    to_other = trace({"tool": "transfer", "args": {"from_account": "K-1", "to_account": "L-1", "amount": 1,
                                                   "memo": "x"}}, PAY)
    for out in get("tool_state").verify_many(task, [own, to_other], ctx):
        assert out.verdict is Verdict.correct, out.evidence
        assert out.evidence["violation_count"] == 0
        assert out.evidence["call_errors"][0]["kind"] == "bad_args"


def test_a_teller_may_read_any_account_but_still_spends_only_their_own():
    env = Environment.start(PACK, WORLD, "ops", None)
    assert env.step("get_balance", {"account_id": "L-1", "extra": 1}).error_kind == "bad_args"
    assert env.step("transfer", {"from_account": "L-1", "to_account": "K-1", "amount": 1, "x": 0}).violation
    assert env.step("freeze_account", {"account_id": "L-1"}).ok


CALL = json.dumps(PAY)
ARGS = json.dumps(PAY["args"])
DUPLICATES = {
    "two calls lists": f'{{"calls": [], "calls": [{CALL}], "final_message": "{MESSAGE}"}}',
    "two tools in a call": f'{{"calls": [{{"tool": "get_balance", "tool": "transfer", "args": {ARGS}}}], '
                           f'"final_message": "{MESSAGE}"}}',
    "an argument twice": '{"calls": [{"tool": "transfer", "args": {"from_account": "L-1", "from_account": "K-1", '
                         f'"to_account": "L-1", "amount": 2500}}}}], "final_message": "{MESSAGE}"}}',
    "two final messages": f'{{"calls": [{CALL}], "final_message": "no", "final_message": "{MESSAGE}"}}',
}


@pytest.mark.parametrize("name", sorted(DUPLICATES))
def test_a_trace_whose_json_repeats_a_key_is_malformed(ctx, task, name):
    spaced = json.dumps({"calls": [PAY], "final_message": MESSAGE, "notes": {"calls": 1}}, indent=2)
    hostile, honest, honest_spaced = get("tool_state").verify_many(task, [DUPLICATES[name], HONEST, spaced], ctx)
    assert hostile.verdict is Verdict.invalid_format, hostile.evidence
    assert "repeats the key" in hostile.evidence["format_errors"][0]
    assert hostile.reward(task) == 0.0
    assert honest.verdict is Verdict.correct and honest_spaced.verdict is Verdict.correct
