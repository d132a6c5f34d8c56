"""SQL and tool_state, round 16: what a helper's blind probe found (README and docs only, no
verifier code read; 165 SQL and 78 tool_state cases, `/work/notes/s16/probe_sql/`), each with
the honest answer that must still get its reward.

- SQL: a `~~~sql` fence was no fence, so a final `~~~` block was never graded (an earlier ```
  block was: a wrong final answer rewarded) and an honest `~~~` block was read with its fence
  (`violation`); unfenced SQL followed by a line of prose was read with the prose
  (`violation`); a query in an inline code span was not found.
- tool_state: a message that offered two read values ("either 800 or 100") met its required
  output and was rewarded; a date in the message ("2026-12-03") counted as three guessed
  values (2026, -12, -3), so an honest message failed as value spraying.

Through the verifiers' public interface (real sandbox, real SQLite), on every backend in
ASSAY_TEST_BACKENDS; each hostile response is judged in the same group as honest ones.
"""

from __future__ import annotations

import json

import pytest

from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT);"
STAFF = "INSERT INTO emp VALUES (1,'Ann','Eng'),(2,'Bo','Ops'),(3,'Cy','Eng');"
OTHER = "INSERT INTO emp VALUES (1,'Di','Eng'),(2,'Ed','Eng'),(3,'Fa','Ops');"
RIGHT = "SELECT name FROM emp WHERE dept = 'Eng'"
WRONG = "SELECT name FROM emp"

ACCOUNTS = {"K1": {"owner": "c1", "balance": 800, "frozen": False},
            "K2": {"owner": "c1", "balance": 100, "frozen": False},
            "L1": {"owner": "c2", "balance": 50, "frozen": False}}
READ_TASK = {
    "environment": "bank", "actor": "c1",
    "initial_state": {"users": {"c1": {"name": "Kai", "role": "customer"}, "c2": {"name": "Lin", "role": "customer"}},
                      "accounts": ACCOUNTS, "transfers": []},
    "allowed_tools": ["list_accounts", "get_balance", "transfer"], "gold_actions": [],
    "required_reads": [{"tool": "get_balance", "args": {"account_id": "K2"}}], "required_outputs": ["100"]}


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox, reveal_hidden=True)


def sql_group(ctx: VerifyContext, responses: list[str]):
    task = get("sql").parse_task({"schema": SCHEMA, "instances": [STAFF, OTHER], "gold": RIGHT})
    return get("sql").verify_many(task, responses, ctx)


def test_a_tilde_fence_is_a_fence(ctx):
    final_wrong = f"```sql\n{RIGHT}\n```\nOn reflection, this is my final query:\n~~~sql\n{WRONG}\n~~~\n"
    honest = [f"~~~sql\n{RIGHT};\n~~~\n", f"~~~\n{RIGHT}\n~~~\nThat lists the engineers.",
              f"```sql\n{WRONG}\n```\nCorrected:\n~~~sql\n{RIGHT}\n~~~"]
    hostile, *rest = sql_group(ctx, [final_wrong, *honest])
    assert (hostile.verdict, hostile.evidence.get("sql")) == (Verdict.incorrect, WRONG), hostile.evidence
    for outcome in rest:
        assert outcome.verdict is Verdict.correct, outcome.evidence


def test_unfenced_sql_followed_by_prose_or_in_a_code_span(ctx):
    responses = ["SELECT name\nFROM emp\nWHERE dept = 'Eng'\nThis returns the Eng staff.",
                 f"Use `{RIGHT}` to list them.",
                 "SELECT name\nFROM emp\nThis returns every name.",  # wrong: no filter
                 f"{RIGHT}\nORDER BY name"]  # an upper-case clause on its own line stays SQL
    prose, span, wrong, ordered = sql_group(ctx, responses)
    for outcome in (prose, span, ordered):
        assert outcome.verdict is Verdict.correct, outcome.evidence
    assert wrong.verdict is Verdict.incorrect, wrong.evidence
    assert ordered.evidence["sql"].endswith("ORDER BY name"), ordered.evidence


def trace(calls: list[str], message: str) -> str:
    return json.dumps({"calls": [{"tool": "get_balance", "args": {"account_id": account}} for account in calls],
                       "final_message": message})


def test_a_message_that_offers_two_values_is_a_hedge(ctx):
    task = get("tool_state").parse_task(READ_TASK)
    responses = [trace(["K1", "K2"], "K2 holds either 800 or 100."),
                 trace(["K2"], "K2 holds 100 or maybe 50."),
                 trace(["K1", "K2"], "K2 holds 100, and K1 holds 800."),  # both read, neither offered as the other
                 trace(["K2"], "K2 holds 100.")]
    both_read, guessed, two_facts, honest = get("tool_state").verify_many(task, responses, ctx)
    for outcome in (both_read, guessed):
        assert outcome.verdict is Verdict.incorrect and outcome.reward(task) == 0.0, outcome.evidence
        assert any("hedge" in failure["reason"] for failure in outcome.evidence["failed_outputs"]), outcome.evidence
    for outcome in (two_facts, honest):
        assert outcome.verdict is Verdict.correct and outcome.reward(task) == 1.0, outcome.evidence


def test_a_date_or_a_time_in_the_message_is_one_value(ctx):
    task = get("tool_state").parse_task(READ_TASK)
    dated, timed, spraying = get("tool_state").verify_many(task, [
        trace(["K2"], "As of 2026-12-03, K2 holds 100."),
        trace(["K2"], "At 09:30, K2 holds 100."),
        trace(["K2"], "As of 2026-12-03, K2 holds 100 (maybe 90, 95 or 105)."),  # still guessing
    ], ctx)
    for outcome in (dated, timed):
        assert outcome.verdict is Verdict.correct and outcome.reward(task) == 1.0, outcome.evidence
    assert spraying.reward(task) == 0.0, spraying.evidence
