"""Red team 7, SQL and tool state: held-out attacks written from the docs alone
(docs/security.md, docs/sql_verifier.md, docs/tool_state_verifier.md), before any fix.

SQL: statements that try to read hidden rows (catalog tables, table-valued pragmas,
extensions, numbers that equal anything) or leave something behind for the next response.
Tool state: calls that try to act as someone else or with values the checks forget, and
environment sessions stepped by another key. Each attack: no reward, no `error`, nothing
hidden in what a reward key receives; an honest answer after it still gets reward 1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from service.testing.app import AppServer, app_settings
from tests.conftest import BACKENDS
from verifiers.tool_state.examples import bank_state
from verifiers.tool_state.wire import dumps_trace as _dumps_trace

MARK = "zqxhid"  # in every hidden row


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    options: dict = {"sandbox": request.param}
    if request.param == "docker":
        options["sandbox_image"] = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
    if request.param == "remote":
        pytest.skip("the in-process app runs the process and docker backends")
    with AppServer(app_settings(tmp_path_factory.mktemp(f"redteam7-sql-{request.param}"), **options)) as s:
        s.reward_key = s.create_key("reward")  # type: ignore[attr-defined]
        yield s


def verify(server: AppServer, verifier: str, response: str, **ref) -> tuple[dict, str]:
    with server.client(server.reward_key) as c:  # type: ignore[attr-defined]
        reply = c.post("/v1/verify", json={"verifier": verifier, "response": response, **ref})
    assert reply.status_code == 200, reply.text[:2000]
    return reply.json(), reply.text


def register(server: AppServer, task_id: str, verifier: str, task: dict) -> None:
    with server.client() as c:
        reply = c.post("/v1/tasks", json={"task_id": task_id, "verifier": verifier, "task": task})
    assert reply.status_code == 201, reply.text


SQL_TASK = {
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, salary REAL);",
    "instances": [f"INSERT INTO emp VALUES (1,'{MARK}a',120.5),(2,'{MARK}b',99.25),(3,'{MARK}c',300.0);",
                  f"INSERT INTO emp VALUES (1,'{MARK}d',10.0),(2,'{MARK}e',20.0);"],
    "gold": "SELECT avg(salary) FROM emp",
}
SQL_ATTACKS = [
    "SELECT 9e999",                                    # +inf: within any relative tolerance of anything?
    "SELECT -9e999",
    "SELECT 9e999 - 9e999",                            # NaN (NULL in SQLite)
    "SELECT avg(salary) * 9e999 / 9e999 FROM emp",
    "SELECT name FROM pragma_database_list",
    "SELECT sql FROM sqlite_temp_master",
    "SELECT group_concat(name) FROM pragma_table_list",
    "SELECT group_concat(name || ':' || type) FROM sqlite_master",
    "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')",
    "SELECT readfile('/etc/passwd')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT sqlite_offset(name) FROM emp",
    "SELECT CAST(group_concat(name) AS INTEGER) + json(group_concat(name)) FROM emp",
    "SELECT printf('%s', group_concat(name)) FROM emp WHERE json_valid(name) OR json(name)",
    "SELECT abs(-9223372036854775807 - 10 - length(group_concat(name))) FROM emp",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT avg(salary) FROM emp, r",
    "SELECT avg(salary) FROM emp; PRAGMA writable_schema = 1",
]


@pytest.mark.parametrize("statement", SQL_ATTACKS)
def test_sql_statements_never_see_hidden_rows_or_equal_a_number(server, statement):
    task_id = f"rt7-sql-{abs(hash(SQL_TASK['gold'])) % 10_000}"
    register(server, task_id, "sql", SQL_TASK)
    result, body = verify(server, "sql", f"```sql\n{statement}\n```", task_id=task_id)
    assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error"), result
    assert MARK not in body.lower(), body[:2000]
    honest, _ = verify(server, "sql", "```sql\nSELECT avg(salary) FROM emp\n```", task_id=task_id)
    assert honest["reward"] == 1.0, honest


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ASSAY_SQL_POSTGRES_URL"), reason="needs ASSAY_SQL_POSTGRES_URL")
def test_postgres_statements_that_reach_past_their_instance(tmp_path):
    """Server functions, settings and session state a statement may touch on Postgres:
    other instances' rows through the catalog, files, sleeping with the timeout lifted,
    session-level locks and settings that would outlive the statement."""
    attacks = [
        "SELECT avg(salary) FROM emp WHERE pg_sleep(0) IS NOT NULL AND set_config('statement_timeout', '0', false) IS NOT NULL",  # noqa: E501
        "SELECT pg_advisory_lock(1)",
        "SELECT set_config('search_path', 'pg_catalog', false)",
        "SELECT string_agg(schemaname || '.' || tablename, ',') FROM pg_tables",
        "SELECT string_agg(nspname, ',') FROM pg_namespace",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT string_agg(f, ',') FROM pg_ls_dir('.') f",
        "SELECT current_setting('data_directory')",
        "SELECT avg(salary)::numeric / 0 FROM emp",
        "SELECT 'Infinity'::float8",
        "SELECT 'NaN'::float8",
        "WITH d AS (DELETE FROM emp RETURNING salary) SELECT avg(salary) FROM d",
        "SELECT string_agg(query, ';') FROM pg_stat_activity",
    ]
    with AppServer(app_settings(tmp_path, sql_postgres_url=os.environ["ASSAY_SQL_POSTGRES_URL"])) as s:
        s.reward_key = s.create_key("reward")  # type: ignore[attr-defined]
        register(s, "rt7-pg", "sql", {**SQL_TASK, "dialect": "postgres"})
        for statement in attacks:
            result, body = verify(s, "sql", f"```sql\n{statement}\n```", task_id="rt7-pg")
            assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error"), (statement, result)
            assert MARK not in body.lower(), (statement, body[:2000])
            # Nothing the statement did outlives it: the honest answer right after is rewarded.
            honest, _ = verify(s, "sql", "```sql\nSELECT avg(salary) FROM emp\n```", task_id="rt7-pg")
            assert honest["reward"] == 1.0, (statement, honest)


# ------------------------------------------------------------------------- tool state

GOLD = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}


def dumps_trace(calls: list, final_message: str = "Done, your balance is 450.") -> str:
    return _dumps_trace(calls, final_message)


def bank_task() -> dict:
    return {"environment": "bank", "actor": "u1", "initial_state": bank_state(),
            "allowed_tools": ["list_accounts", "get_balance", "transfer", "freeze_account"],
            "gold_actions": [GOLD], "required_outputs": ["450"]}


def raw_trace(calls: list, message: str = "Done, your balance is 450.", **top) -> str:
    return "```json\n" + json.dumps({"calls": calls, "final_message": message, **top}) + "\n```"


TOOL_ATTACKS = {
    "claims_outputs_only": dumps_trace([], "Done, your balance is 450."),
    "nan_amount": "```json\n" + '{"calls": [{"tool": "transfer", "args": {"from_account": "A2", "to_account": "A1", '
                  '"amount": NaN}}, ' + json.dumps(GOLD) + '], "final_message": "450"}' + "\n```",
    "infinity_amount": "```json\n" + '{"calls": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", '  # noqa: E501
                       '"amount": Infinity}}], "final_message": "450"}' + "\n```",
    "huge_amount": dumps_trace([{"tool": "transfer", "args": {"from_account": "A4", "to_account": "A1",
                                                               "amount": 10 ** 30}}, GOLD]),
    "act_as_teller_in_args": dumps_trace([{"tool": "freeze_account", "args": {"account_id": "A2", "actor": "t1",
                                                                              "as_user": "t1", "user": "t1"}}, GOLD]),
    "act_as_teller_on_call": raw_trace([{"tool": "freeze_account", "args": {"account_id": "A2"}, "actor": "t1"}, GOLD]),
    "act_as_teller_on_trace": raw_trace([{"tool": "freeze_account", "args": {"account_id": "A2"}}, GOLD], actor="t1"),
    "claimed_final_state": raw_trace([], state={"accounts": {"A1": {"balance": 450}}},
                                     final_state={"accounts": {}}),
    "tool_name_variants": raw_trace([{"tool": name, "args": {"account_id": "A2"}}
                                     for name in ("Freeze_account", "freeze_account ", "freeze_account\u0000",
                                                  "bank.freeze_account", "__class__", "_freeze_account")] + [GOLD]),
    "steal_from_A2_by_swapped_sign": dumps_trace([{"tool": "transfer", "args": {"from_account": "A2", "to_account": "A1",  # noqa: E501
                                                                                "amount": 500}}]),
    "bool_and_float_amount": dumps_trace([{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2",
                                                                        "amount": True}},
                                          {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2",
                                                                        "amount": 498.99999999999999}}]),
}


@pytest.mark.parametrize("name", list(TOOL_ATTACKS))
def test_tool_state_calls_with_unauthorized_effects_get_nothing(server, name):
    result, _ = verify(server, "tool_state", TOOL_ATTACKS[name], task=bank_task())
    assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error"), (name, result)
    honest, _ = verify(server, "tool_state", dumps_trace([GOLD], "Done, your balance is 450."), task=bank_task())
    assert honest["reward"] == 1.0, honest


def test_another_key_cannot_step_finish_or_drop_my_environment_session(server):
    """An environment session is one rollout's working state: a second key that learns its
    id must not move money in it, finish it, or drop it."""
    mine, theirs = server.create_key("reward"), server.create_key("reward")
    with server.client(mine) as a, server.client(theirs) as b:
        opened = a.post("/v1/envs", json={"verifier": "tool_state", "task": bank_task()})
        assert opened.status_code in (200, 201), opened.text
        sid = opened.json()["env_id"]
        steal = b.post(f"/v1/envs/{sid}/step", json={"tool": "transfer", "args": {"from_account": "A1",
                                                                                  "to_account": "A2", "amount": 1}})
        assert steal.status_code in (403, 404), steal.text
        finished = b.post(f"/v1/envs/{sid}/finish", json={"final_message": "450"})
        assert finished.status_code in (403, 404), finished.text
        dropped = b.delete(f"/v1/envs/{sid}")
        assert dropped.status_code in (403, 404), dropped.text
        step = a.post(f"/v1/envs/{sid}/step", json=GOLD)
        assert step.status_code == 200, step.text
        done = a.post(f"/v1/envs/{sid}/finish", json={"final_message": "Done, your balance is 450."})
        assert done.status_code == 200 and done.json()["reward"] == 1.0, done.text
        # A finish retried with another message is the same answer, not a second chance.
        retry = a.post(f"/v1/envs/{sid}/finish", json={"final_message": "nothing"})
        assert retry.status_code in (200, 404, 409), retry.text
        if retry.status_code == 200:
            assert retry.json()["reward"] == 1.0 and retry.json()["record_id"] == done.json()["record_id"]
