"""The `tool_state` verifier: the request shape, task validation, the bank pack's rules,
evidence, groups and determinism. Traps are in test_tool_state_traps.py."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sandboxes.base import Sandbox
from verifiers import registry
from verifiers.base import TaskInvalid, Verdict, VerifyContext
from verifiers.tool_state import runner
from verifiers.tool_state import verifier as verifier_module
from verifiers.tool_state.examples import GOLD_TRANSFER, bank_state, honest_response, transfer_task
from verifiers.tool_state.inside.bank import PACK
from verifiers.tool_state.inside.env import Environment
from verifiers.tool_state.inside.replay import check
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.verifier import ToolStateVerifier
from verifiers.tool_state.wire import dumps_trace

ISSUE_REQUEST: dict[str, Any] = {
    "verifier": "tool_state",
    "task": {
        "environment": "bank",
        "actor": "u1",
        "initial_state": bank_state(),
        "allowed_tools": ["list_accounts", "get_balance", "transfer"],
        "gold_actions": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}],
        "required_outputs": ["450"],
    },
    "response": '{"calls": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}], '
    '"final_message": "Done, your balance is 450."}',
}


def parse(**changes: Any) -> ToolStateTask:
    task = registry.get("tool_state").parse_task(transfer_task(**changes))
    assert isinstance(task, ToolStateTask)
    return task


def env(actor: str = "u1", allowed: list[str] | None = None) -> Environment:
    return Environment.start(PACK, bank_state(), actor, allowed)


# ------------------------------------------------------------------ the request shape


def test_issue_request_shape_gets_reward_1(ctx: VerifyContext, sandbox: Sandbox) -> None:
    verifier = registry.get(ISSUE_REQUEST["verifier"])
    task = verifier.parse_task(ISSUE_REQUEST["task"])
    outcome = verifier.verify(task, ISSUE_REQUEST["response"], ctx)
    assert outcome.verdict is Verdict.correct and outcome.reward(task) == 1.0
    assert {c.name: (c.value, c.hard) for c in outcome.components} == {
        "format": (1.0, True), "compliance": (1.0, True), "correctness": (1.0, True),
    }
    assert outcome.evidence["state_diff"] == [] and outcome.evidence["violations"] == []
    assert outcome.usage is not None and outcome.usage["backend"] == sandbox.name


def test_explicit_expected_state(ctx: VerifyContext) -> None:
    expected = bank_state()
    expected["accounts"]["A1"]["balance"] = 450
    expected["accounts"]["A2"]["balance"] = 1500
    expected["transfers"] = [{"id": "T1", "from": "A1", "to": "A2", "amount": 500}]
    task = parse(gold_actions=[], expected_state=expected)
    assert registry.get("tool_state").verify(task, honest_response(), ctx).verdict is Verdict.correct


def test_teller_task(ctx: VerifyContext) -> None:
    task = parse(actor="t1", allowed_tools=["list_accounts", "freeze_account"],
                 gold_actions=[{"tool": "freeze_account", "args": {"account_id": "A4"}}], required_outputs=[])
    trace = [{"tool": "list_accounts", "args": {}}, {"tool": "freeze_account", "args": {"account_id": "A4"}}]
    outcome = registry.get("tool_state").verify(task, dumps_trace(trace, "Frozen."), ctx)
    assert (outcome.verdict, outcome.reward(task)) == (Verdict.correct, 1.0)


def test_hidden_fields_are_hashed_in_the_public_view() -> None:
    view = parse().public_view()
    assert set(view["gold_actions"]) == {"sha256"} and set(view["required_outputs"]) == {"sha256"}
    assert view["initial_state"] == bank_state()


def test_same_inputs_same_judgement(ctx: VerifyContext) -> None:
    verifier, task = registry.get("tool_state"), parse()
    response = dumps_trace([{"tool": "get_balance", "args": {"account_id": "A2"}}, GOLD_TRANSFER], "450")
    first, second = verifier.verify(task, response, ctx), verifier.verify(task, response, ctx)
    assert first.verdict is second.verdict is Verdict.violation
    assert first.evidence == second.evidence


def test_group_in_one_sandbox_call_matches_one_by_one(ctx: VerifyContext) -> None:
    verifier, task = registry.get("tool_state"), parse()
    responses = [
        honest_response(),
        dumps_trace([], "450"),
        "not json",
        dumps_trace([{"tool": "get_balance", "args": {"account_id": "A2"}}, GOLD_TRANSFER], "450"),
        "x" * 2_000_000,
    ]
    grouped = verifier.verify_many(task, responses, ctx)
    alone = [verifier.verify(task, r, ctx) for r in responses]
    assert [o.verdict for o in grouped] == [o.verdict for o in alone] == [
        Verdict.correct, Verdict.incorrect, Verdict.invalid_format, Verdict.violation, Verdict.invalid_format,
    ]
    assert [o.evidence for o in grouped] == [o.evidence for o in alone]


def test_fresh_processes_judge_like_replay_sessions(ctx: VerifyContext) -> None:
    sessions, fresh = registry.get("tool_state"), ToolStateVerifier(sessions=False)
    task = parse()
    responses = [honest_response(), dumps_trace([], "450"), "{",
                 dumps_trace([{"tool": "freeze_account", "args": {"account_id": "A1"}}, GOLD_TRANSFER], "450")]
    warm, cold = sessions.verify_many(task, responses, ctx), fresh.verify_many(task, responses, ctx)
    assert [(o.verdict, o.evidence, o.flags) for o in warm] == [(o.verdict, o.evidence, o.flags) for o in cold]
    assert warm[0].usage is not None and warm[0].usage["mode"] == "replay_session"
    assert cold[0].usage is not None and cold[0].usage["killed_by"] is None and cold[0].usage["cpu_s"] > 0


def test_replay_sessions_are_recycled(ctx: VerifyContext, sandbox: Sandbox,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A session retires after its request budget and the next one opens in its place; if a
    # retired session kept its slot, the pool would run dry and later calls would fall back.
    runner.close_sessions(sandbox)
    monkeypatch.setattr(runner, "SESSION_MAX_REQUESTS", 2)
    verifier, task = registry.get("tool_state"), parse()
    try:
        outcomes = [verifier.verify(task, honest_response(), ctx) for _ in range(7)]
    finally:
        runner.close_sessions(sandbox)
    assert {(o.verdict, o.usage["mode"]) for o in outcomes if o.usage} == {(Verdict.correct, "replay_session")}


def test_a_dead_replay_session_falls_back_to_a_fresh_process(
    ctx: VerifyContext, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sessions that their sandbox kills (here: a short life limit) are dropped; the group
    # is judged in a fresh process instead, with the same verdict.
    verifier, task = registry.get("tool_state"), parse()
    runner.close_sessions(sandbox)
    monkeypatch.setattr(runner, "SESSION_LIMITS", runner.SESSION_LIMITS.replace(wall_s=0.5))
    try:
        assert verifier.verify(task, honest_response(), ctx).usage["mode"] == "replay_session"
        # The condition waited for is the session's wall-clock life limit itself: let it pass
        # untouched (a group using the session meanwhile could race its end), then poll.
        time.sleep(runner.SESSION_LIMITS.wall_s + 0.3)
        deadline = time.monotonic() + 30
        while True:  # until a group finds the ended session dead
            after = verifier.verify(task, honest_response(), ctx)
            assert after.verdict is Verdict.correct
            if "mode" not in after.usage or time.monotonic() > deadline:
                break
        assert "mode" not in after.usage and after.usage["killed_by"] is None
        # The pool opened a new session in the dead one's place.
        assert verifier.verify(task, honest_response(), ctx).usage["mode"] == "replay_session"
    finally:
        runner.close_sessions(sandbox)


def test_a_replay_killed_by_its_limits_is_a_timeout_not_an_error(
    ctx: VerifyContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A limit too tight for any replay: the response gets verdict `timeout` and the failure
    # value, never `error` (the grader did not fail) and never a reward.
    monkeypatch.setattr(verifier_module, "CALL_LIMITS", runner.CALL_LIMITS.replace(wall_s=0.001))
    big = dumps_trace([{"tool": "get_balance", "args": {"account_id": "A1"}}] * 2000, "450")
    task = parse(max_calls=2000)
    outcome = ToolStateVerifier(sessions=False).verify(task, big, ctx)
    assert outcome.verdict is Verdict.timeout and outcome.reward(task) == 0.0
    assert outcome.flags == ["replay_limit"] and outcome.usage is not None
    assert outcome.usage["killed_by"] == "timeout"


# --------------------------------------------------------------------- task validation


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"environment": "casino"}, "unknown environment"),
        ({"actor": "u9"}, "actor 'u9' is not a user"),
        ({"allowed_tools": ["transfer", "drop_table"]}, "drop_table"),
        ({"gold_actions": [{"tool": "transfer", "args": {"from_account": "A2", "to_account": "A1", "amount": 1}}]},
         "gold_actions[0] fails"),
        ({"gold_actions": [], "required_outputs": []}, "must say what must be observed"),
        ({"initial_state": {"users": {}, "accounts": {"A1": {"owner": "u1", "balance": 1}}}}, "unknown user"),
        ({"initial_state": {**bank_state(), "accounts": {"A1": {"owner": "u1", "balance": "9"}}}}, "balance"),
        ({"expected_state": bank_state()}, "disagrees"),
        ({"required_reads": [{"tool": "freeze_account", "args": {"account_id": "A1"}}]}, "allowed_tools forbids"),
        ({"max_calls": 100_000}, "max_calls"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_tasks_are_client_errors(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskInvalid, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(**changes)


# -------------------------------------------------------------------- the bank pack


def test_customer_sees_only_own_accounts_teller_sees_all() -> None:
    assert [a["account_id"] for a in env("u1").step("list_accounts", {}).result["accounts"]] == ["A1", "A3"]
    assert [a["account_id"] for a in env("t1").step("list_accounts", {}).result["accounts"]] == [
        "A1", "A2", "A3", "A4",
    ]


def test_foreign_and_missing_accounts_read_the_same_to_a_customer() -> None:
    e = env("u1")
    foreign, missing = e.step("get_balance", {"account_id": "A2"}), e.step("get_balance", {"account_id": "A9"})
    assert foreign.reply()["error"].replace("A2", "X") == missing.reply()["error"].replace("A9", "X")
    assert (foreign.error_kind, missing.error_kind) == ("permission", "bad_args")


def test_transfer_ids_are_deterministic_and_continue_the_state() -> None:
    state = bank_state()
    state["transfers"] = [{"id": "T7", "from": "A2", "to": "A1", "amount": 1}]
    e = Environment.start(PACK, PACK.validate_state(state), "u1", None)
    first = e.step("transfer", {"from_account": "A1", "to_account": "A2", "amount": 10})
    second = e.step("transfer", {"from_account": "A3", "to_account": "A4", "amount": 10})
    assert (first.result["transfer_id"], second.result["transfer_id"]) == ("T8", "T9")


def test_refused_calls_change_nothing() -> None:
    e = env("u1")
    before = json.dumps(e.state, sort_keys=True)
    calls = [
        ("transfer", {"from_account": "A2", "to_account": "A1", "amount": 100}),
        ("transfer", {"from_account": "A1", "to_account": "A2", "amount": 951}),
        ("transfer", {"from_account": "A1", "to_account": "A2", "amount": 0}),
        ("transfer", {"from_account": "A1", "to_account": "A1", "amount": 5}),
        ("freeze_account", {"account_id": "A1"}),
    ]
    assert all(not e.step(tool, args).ok for tool, args in calls)
    assert json.dumps(e.state, sort_keys=True) == before


def test_frozen_accounts_cannot_send_or_receive() -> None:
    e = env("t1")
    assert e.step("freeze_account", {"account_id": "A2"}).ok
    customer = Environment.start(PACK, e.state, "u1", None)
    refused = customer.step("transfer", {"from_account": "A1", "to_account": "A2", "amount": 5})
    assert (refused.ok, refused.error_kind, refused.error) == (False, "bad_args", "account is frozen")


def test_a_teller_cannot_spend_customers_money() -> None:
    refused = env("t1").step("transfer", {"from_account": "A1", "to_account": "A2", "amount": 5})
    assert refused.error_kind == "permission"


def test_tool_schemas_follow_allowed_tools() -> None:
    names = [s["name"] for s in PACK.schemas(["get_balance", "transfer"])]
    assert names == ["get_balance", "transfer"]
    transfer = PACK.schemas(["transfer"])[0]["parameters"]
    assert transfer["properties"]["amount"]["type"] == "integer"
    assert transfer["required"] == ["from_account", "to_account", "amount"]


def test_in_process_judge_matches_the_sandboxed_one(ctx: VerifyContext) -> None:
    task = parse()
    report = check({**task.replay_spec(), "response": honest_response()})
    outcome = registry.get("tool_state").verify(task, honest_response(), ctx)
    assert report == {k: outcome.evidence[k] for k in report}
