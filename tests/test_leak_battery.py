"""The leak battery (issue 20): registered tasks whose hidden data holds unique markers and
low-entropy values (small integers, short words), and responses written to get them out.

Whatever a `reward` key receives (results of /v1/verify, /v1/groups, environment finish,
errors, the task's public view) must hold no marker, no low-entropy hidden value the
response did not state itself, and no unkeyed hash of either; an `audit` key reads the full
evidence from the record. Every family's attacks are followed by an honest answer that
still gets its reward. Runs a server per backend in ASSAY_TEST_BACKENDS (process, docker).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from tests.conftest import BACKENDS
from verifiers.base import sha256_json
from verifiers.registry import get
from verifiers.tool_state.examples import bank_state
from verifiers.tool_state.wire import dumps_trace

# Unique markers: a string no uuid, hash or timing can hold by chance.
SQL_MARKER, CODE_MARKER, CODE_OUT_MARKER, MATH_MARKER = "zqsqlmark", "zqcodemark", "zqoutmark", "zqhidemark"
# Low-entropy hidden values: a policy could guess them, so they must not be confirmed either.
LOW_INT, LOW_WORD, LOW_WORD2 = "7", "ox", "fig"


class Reader:
    """The app, a `reward` key, an `audit` key and the admin key; `tag` keeps task ids apart."""

    def __init__(self, server: AppServer, tag: str) -> None:
        self.server = server
        self.tag = tag
        self.reward = server.create_key("reward")
        self.audit = server.create_key("audit")

    def client(self, key: str | None = None) -> httpx.Client:
        return self.server.client(key)


@pytest.fixture(scope="module", params=BACKENDS)
def reader(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    options = {"sandbox": request.param}
    if request.param == "docker":
        options["sandbox_image"] = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
    with AppServer(app_settings(tmp_path_factory.mktemp(f"leaks-{request.param}"), **options)) as server:
        yield Reader(server, request.param)


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in re.findall(r"[A-Za-z0-9_]+", text)}


def _hashes(values: list[Any]) -> set[str]:
    out = set()
    for value in values:
        out.add(sha256_json(value))
        if isinstance(value, str):
            out.add(hashlib.sha256(value.encode()).hexdigest())
    return out


def assert_no_leak(body: str, response: str, markers: list[str], low: list[str], hidden: list[Any]) -> None:
    """`body`: all a reward key received. Markers nowhere; low-entropy values not in the
    decision's text unless the response states them; no unkeyed hash of a hidden value."""
    lowered = body.lower()
    for marker in markers:
        assert marker.lower() not in lowered, f"marker {marker!r} leaked: {body[:2000]}"
    for digest in _hashes([*markers, *low, *hidden]):
        assert digest not in body, "an unkeyed hash of hidden data leaked"
    data = json.loads(body)
    results = data["groups"][0]["results"] if "groups" in data else [data]
    for result in results:
        text = json.dumps({k: result.get(k) for k in ("evidence", "feedback", "flag_evidence", "flags")})
        stated = _tokens(response)
        for value in low:
            if value.lower() not in stated:
                assert value.lower() not in _tokens(text), f"low-entropy {value!r} leaked: {text[:2000]}"


def register(r: Reader, task_id: str, verifier: str, task: dict[str, Any], **extra: Any) -> dict[str, Any]:
    with r.client() as c:
        reply = c.post("/v1/tasks", json={"task_id": task_id, "verifier": verifier, "task": task, **extra})
    assert reply.status_code == 201, reply.text  # also for the same content again (created: false)
    return reply.json()


def attack(r: Reader, verifier: str, task_id: str, response: str, markers: list[str], low: list[str],
           hidden: list[Any]) -> dict[str, Any]:
    """Send the response as /v1/verify and as /v1/groups with a reward key; check both."""
    with r.client(r.reward) as c:
        one = c.post("/v1/verify", json={"verifier": verifier, "task_id": task_id, "response": response})
        group = c.post("/v1/groups", json={"groups": [{"verifier": verifier, "task_id": task_id,
                                                       "responses": [response]}]})
    assert one.status_code == 200 and group.status_code == 200, (one.text, group.text)
    for body in (one.text, group.text):
        assert_no_leak(body, response, markers, low, hidden)
    result = one.json()
    assert result["evidence"] == result["feedback"], "a registered task's evidence is the feedback"
    return result


def audit_record(r: Reader, record_id: str) -> dict[str, Any]:
    with r.client(r.audit) as c:
        reply = c.get(f"/v1/records/{record_id}")
    assert reply.status_code == 200
    return reply.json()


# ---------------------------------------------------------------------------------- SQL

SQL_TASK = {
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, salary INTEGER, code TEXT);",
    "instances": [f"INSERT INTO emp VALUES (1,'{SQL_MARKER}1',{LOW_INT},'{LOW_WORD}'),"
                  f"(2,'{SQL_MARKER}2',250,'{LOW_WORD2}'),(3,'{SQL_MARKER}3',300,'{LOW_WORD2}');"],
    "gold": "SELECT name FROM emp WHERE salary > 100",
    "show_expected": True,  # the registrant's wish; a registered task's rows stay hidden anyway
}
SQL_ATTACKS = [
    "SELECT * FROM emp",
    "SELECT name || '|' || salary || '|' || code FROM emp",
    "SELECT name FROM emp",
    "SELECT name FROM emp UNION SELECT 'const'",
    "SELECT a.name, b.code FROM emp a CROSS JOIN emp b",
    "SELECT CAST(name AS INTEGER) + salary FROM emp",
    "SELECT json(name) FROM emp",
    "SELECT json_extract('{}', name) FROM emp",
    "SELECT json_extract('{}', code) FROM emp ORDER BY salary",
    "SELECT name FROM emp WHERE salary < 10",
    "SELECT group_concat(code) FROM emp",
    "SELECT nosuchcolumn FROM emp",
    "SELECT name FROM emp WHERE code = (SELECT code FROM emp ORDER BY salary LIMIT 1)",
    # As many rows as a hidden number: the response's own row count would read it (round 15).
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < (SELECT salary FROM emp "
    "WHERE id = 1)) SELECT n FROM r",
]
SQL_MARKERS = [f"{SQL_MARKER}1", f"{SQL_MARKER}2", f"{SQL_MARKER}3", SQL_MARKER]


@pytest.mark.parametrize("statement", SQL_ATTACKS)
def test_sql_attacks_get_counts_never_rows(reader: Reader, statement: str):
    task_id = f"leak/sql/{reader.tag}"
    register(reader, task_id, "sql", SQL_TASK)
    response = f"```sql\n{statement}\n```"
    result = attack(reader, "sql", task_id, response, SQL_MARKERS, [LOW_INT, LOW_WORD, LOW_WORD2],
                    [SQL_TASK["instances"], SQL_TASK["gold"], SQL_TASK["instances"][0]])
    assert result["reward"] == 0.0
    for instance in result["feedback"].get("instances", []):
        assert "expected_rows" in instance or "error" in instance or "failure" in instance
    if statement == "SELECT name FROM emp":
        # The auditor reads the rows the response got.
        assert SQL_MARKER in json.dumps(audit_record(reader, result["record_id"])["evidence"])
    if statement == "SELECT nosuchcolumn FROM emp":
        # The response's own error is shown.
        assert "nosuchcolumn" in json.dumps(result["feedback"])


def test_sql_honest_answer_after_attacks(reader: Reader):
    task_id = f"leak/sql/{reader.tag}"
    register(reader, task_id, "sql", SQL_TASK)
    result = attack(reader, "sql", task_id, "```sql\nSELECT name FROM emp WHERE salary > 100\n```", SQL_MARKERS,
                    [LOW_WORD, LOW_WORD2], [SQL_TASK["instances"]])
    assert result["reward"] == 1.0 and result["verdict"] == "correct"


# Counts a response steers with the hidden rows, in a mutation and a predicate task (round 15: the
# rows it added, and the rows failing the predicate, were shown as numbers).
COUNT_TO_HIDDEN = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < (SELECT salary FROM emp " \
                  "WHERE id = 1))"
STEERED_COUNTS = [
    ("mutation", {"mode": "mutation", "gold": "DELETE FROM emp WHERE salary > 100"},
     f"INSERT INTO emp(name) {COUNT_TO_HIDDEN} SELECT 'x' FROM r", "DELETE FROM emp WHERE salary > 100"),
    ("predicate", {"gold": None, "predicate": {"sql": "result.c1 > 1000", "row_count": {"min": 1, "max": 2}}},
     f"{COUNT_TO_HIDDEN} SELECT n FROM r", "SELECT 2000"),
]


@pytest.mark.parametrize(("mode", "fields", "attack_sql", "honest_sql"), STEERED_COUNTS,
                         ids=[case[0] for case in STEERED_COUNTS])
def test_sql_counts_a_response_steers_are_never_shown(reader: Reader, mode: str, fields: dict[str, Any],
                                                      attack_sql: str, honest_sql: str):
    task_id = f"leak/sql-{mode}/{reader.tag}"
    task = {key: value for key, value in {**SQL_TASK, **fields}.items() if value is not None}
    register(reader, task_id, "sql", task)
    result = attack(reader, "sql", task_id, f"```sql\n{attack_sql}\n```", SQL_MARKERS,
                    [LOW_INT, LOW_WORD, LOW_WORD2], [SQL_TASK["instances"]])
    assert result["reward"] == 0.0
    assert json.dumps(audit_record(reader, result["record_id"])["evidence"]).count(LOW_INT), \
        "the auditor still reads the response's counts"
    honest = attack(reader, "sql", task_id, f"```sql\n{honest_sql}\n```", SQL_MARKERS, [LOW_INT, LOW_WORD, LOW_WORD2],
                    [SQL_TASK["instances"]])
    assert honest["reward"] == 1.0, honest


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("ASSAY_SQL_POSTGRES_URL"), reason="needs ASSAY_SQL_POSTGRES_URL")
def test_postgres_errors_quoting_values_are_masked(tmp_path: Path):
    """Postgres quotes the value a cast tripped on; the feedback masks what the response did not write."""
    server = AppServer(app_settings(tmp_path, sql_postgres_url=os.environ["ASSAY_SQL_POSTGRES_URL"])).start()
    try:
        r = Reader(server, "pg")
        register(r, "leak/pg", "sql", {**SQL_TASK, "dialect": "postgres"})
        audited: list[str] = []
        for statement in ("SELECT CAST(name AS INTEGER) FROM emp", "SELECT code::int FROM emp",
                          "SELECT make_date(salary, 13, 1) FROM emp", "SELECT name::regclass FROM emp"):
            response = f"```sql\n{statement}\n```"
            result = attack(r, "sql", "leak/pg", response, SQL_MARKERS, [LOW_INT, LOW_WORD, LOW_WORD2],
                            [SQL_TASK["instances"]])
            assert result["verdict"] in ("incorrect", "error") or result["reward"] == 0.0
            if result["feedback"].get("instances"):
                assert result["feedback"]["instances"][0].get("failure"), result["feedback"]
            audited.append(json.dumps(audit_record(r, result["record_id"])["evidence"]))
        # The auditor reads the database's own messages, values included.
        assert SQL_MARKER in " ".join(audited) and f'\\"{LOW_WORD}\\"' in " ".join(audited)
        honest = attack(r, "sql", "leak/pg", "```sql\nSELECT name FROM emp WHERE salary > 100\n```", SQL_MARKERS,
                        [], [])
        assert honest["reward"] == 1.0
    finally:
        server.stop()


# --------------------------------------------------------------------------------- code

CODE_IO_TASK = {
    "io_cases": [{"stdin": f"{CODE_MARKER}1 {LOW_INT}\n", "stdout": f"{CODE_OUT_MARKER}1 {LOW_WORD}\n"},
                 {"stdin": f"{CODE_MARKER}2 3\n", "stdout": f"{CODE_OUT_MARKER}2 {LOW_WORD2}\n"}],
    "visible_io_cases": [{"stdin": "visible 1\n", "stdout": "shown 1\n", "name": "visible-one"}],
    "partial_credit": True,
}
ANSWER_TABLE = {f"{CODE_MARKER}1": f"{CODE_OUT_MARKER}1 {LOW_WORD}",
                f"{CODE_MARKER}2": f"{CODE_OUT_MARKER}2 {LOW_WORD2}"}
CODE_IO_ATTACKS = {
    "exception_carrying_input": "import sys\nraise ValueError(sys.stdin.read())",
    "echo_input": "print(input())",
    "stderr_dump_then_exit": "import sys\nsys.stderr.write(sys.stdin.read())\nsys.exit(3)",
    "syntax_error_from_input": "exec(input())",
    "output_differs_on_hidden_value": "x = input().split()\nprint('a' if x[-1] == '7' else 'b')",
    "keyerror_with_input": "d = {}\nd[input()]",
}
CODE_ASSERT_TASK = {
    "entry_point": "f",
    "tests": (f"def check(candidate):\n    assert candidate('{CODE_MARKER}3') == '{LOW_WORD}', "
              f"'expected {LOW_WORD} for {CODE_MARKER}3'\n    assert candidate({LOW_INT}) == 49\n"),
    "visible_tests": "def check(candidate):\n    assert candidate('vis') == 'VIS', 'visible: wanted VIS'\n",
}
CODE_ASSERT_ATTACKS = {
    "exception_carrying_argument": "def f(x):\n    if x == 'vis':\n        return 'VIS'\n    raise Exception(repr(x))",
    "identity_trips_assertion_message": "def f(x):\n    return 'VIS' if x == 'vis' else x",
    "assert_false_with_argument": "def f(x):\n    assert x == 'vis', x\n    return 'VIS'",
    "stderr_print": ("import sys\ndef f(x):\n    print('ARG', x, file=sys.stderr)\n    "
                     "return 'VIS' if x == 'vis' else None"),
    "type_of_exception_by_value": ("def f(x):\n    if x == 'vis':\n        return 'VIS'\n    "
                                   "raise [KeyError, ValueError][len(str(x)) % 2](str(x))"),
}
CODE_LOW = [LOW_WORD, LOW_WORD2, "49"]


@pytest.mark.parametrize("name", list(CODE_IO_ATTACKS))
def test_code_io_attacks_get_counts_only(reader: Reader, name: str):
    task_id = f"leak/code-io/{reader.tag}"
    register(reader, task_id, "code", CODE_IO_TASK)
    response = f"```python\n{CODE_IO_ATTACKS[name]}\n```"
    result = attack(reader, "code", task_id, response, [CODE_MARKER, CODE_OUT_MARKER], CODE_LOW,
                    [CODE_IO_TASK["io_cases"]])
    assert result["reward"] == 0.0
    feedback = result["feedback"]
    assert feedback["hidden_total"] == 2 and feedback["hidden_passed"] == 0
    # The visible case is shown with its expected output.
    assert feedback["visible_total"] == 1
    if name == "echo_input":
        assert "shown 1" in json.dumps(feedback["visible_failures"])
        # The auditor sees every test the response ran, hidden ones included (by index).
        audited = audit_record(reader, result["record_id"])["evidence"]["tests"]
        assert [t["name"] for t in audited if t["hidden"]] == ["case[0]", "case[1]"]


def test_code_io_honest_answer_after_attacks(reader: Reader):
    task_id = f"leak/code-io/{reader.tag}"
    register(reader, task_id, "code", CODE_IO_TASK)
    code = ("x = input().split()[0]\nprint({'visible': 'shown 1', "
            + ", ".join(f"{k!r}: {v!r}" for k, v in ANSWER_TABLE.items()) + "}[x])")
    result = attack(reader, "code", task_id, f"```python\n{code}\n```", [], [], [])
    assert result["reward"] == 1.0, result["feedback"]


@pytest.mark.parametrize("name", list(CODE_ASSERT_ATTACKS))
def test_code_assert_attacks_get_counts_only(reader: Reader, name: str):
    task_id = f"leak/code-assert/{reader.tag}"
    register(reader, task_id, "code", CODE_ASSERT_TASK)
    response = f"```python\n{CODE_ASSERT_ATTACKS[name]}\n```"
    result = attack(reader, "code", task_id, response, [CODE_MARKER], CODE_LOW, [CODE_ASSERT_TASK["tests"]])
    assert result["reward"] == 0.0
    assert result["feedback"]["hidden_passed"] == 0 and result["feedback"]["visible_passed"] == 1
    if name == "exception_carrying_argument":
        # The auditor sees the hidden test's failure kind, which the feedback leaves out (a
        # hidden test's own text never leaves the grader: docs/code_verifier.md).
        audited = audit_record(reader, result["record_id"])["evidence"]["tests"]
        assert audited[-1]["hidden"] and audited[-1]["type"] == "Exception"
        assert "type" not in json.dumps(result["feedback"])


def test_code_visible_failure_and_load_error_are_shown(reader: Reader):
    task_id = f"leak/code-assert/{reader.tag}"
    register(reader, task_id, "code", CODE_ASSERT_TASK)
    wrong = attack(reader, "code", task_id, "```python\ndef f(x):\n    return 'nope'\n```", [CODE_MARKER], CODE_LOW,
                   [])
    assert "visible: wanted VIS" in json.dumps(wrong["feedback"]["visible_failures"])
    broken = attack(reader, "code", task_id, "```python\nimport nosuchmodule_zz\n```", [CODE_MARKER], CODE_LOW, [])
    assert "nosuchmodule_zz" in json.dumps(broken["feedback"]["load_error"])
    honest = attack(reader, "code", task_id,
                    "```python\ndef f(x):\n    if isinstance(x, int):\n        return x * x\n"
                    f"    return {{'vis': 'VIS', '{CODE_MARKER}3': '{LOW_WORD}'}}[x]\n```", [], [], [])
    assert honest["reward"] == 1.0, honest["feedback"]


# --------------------------------------------------------------------------- tool state

def tool_task() -> dict[str, Any]:
    gold = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": int(LOW_INT)}}
    return {"environment": "bank", "actor": "u1", "initial_state": bank_state(),
            "allowed_tools": ["list_accounts", "get_balance", "transfer"], "gold_actions": [gold],
            "required_outputs": [str(950 - int(LOW_INT))]}


TOOL_LOW = [LOW_INT, str(950 - int(LOW_INT)), str(1000 + int(LOW_INT))]
TOOL_ATTACKS = {
    "wrong_amount": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 5}}],
    "read_everything": [{"tool": "list_accounts", "args": {}}, {"tool": "get_balance", "args": {"account": "A1"}}],
    "refused_call": [{"tool": "transfer", "args": {"from_account": "A2", "to_account": "A1", "amount": 1}}],
    "forbidden_tool": [{"tool": "freeze_account", "args": {"account": "A1"}}],
    "nothing": [],
}


@pytest.mark.parametrize("name", list(TOOL_ATTACKS))
def test_tool_state_attacks_never_see_expected_values(reader: Reader, name: str):
    task_id = f"leak/tool/{reader.tag}"
    register(reader, task_id, "tool_state", tool_task())
    response = dumps_trace(TOOL_ATTACKS[name], "Done. Balance is 945 or 950 or 1005.")
    result = attack(reader, "tool_state", task_id, response, [], TOOL_LOW,
                    [tool_task()["gold_actions"], tool_task()["required_outputs"], ["943"]])
    assert result["reward"] == 0.0
    if name in ("refused_call", "forbidden_tool"):
        refused = result["feedback"]["refused_calls"]
        assert refused and refused[0]["index"] == 0 and refused[0]["kind"], result["feedback"]
    if name == "wrong_amount":
        wants = {d["want"] for d in audit_record(reader, result["record_id"])["evidence"]["state_diff"]}
        assert 950 - int(LOW_INT) in wants  # the auditor sees the expected values


def test_tool_state_session_finish_shows_feedback_only(reader: Reader):
    """An agent loop's finish answers with the feedback view, even for an inline task."""
    with reader.client(reader.reward) as c:
        opened = c.post("/v1/envs", json={"verifier": "tool_state", "task": tool_task()})
        assert opened.status_code == 201, opened.text
        env_id = opened.json()["env_id"]
        step = c.post(f"/v1/envs/{env_id}/step", json={"tool": "transfer", "args": {
            "from_account": "A1", "to_account": "A2", "amount": 5}})
        assert step.status_code == 200
        finish = c.post(f"/v1/envs/{env_id}/finish", json={"final_message": "Done."})
    assert finish.status_code == 200, finish.text
    assert_no_leak(finish.text, "Done.", [], [str(950 - int(LOW_INT))], [])
    assert finish.json()["evidence"] == finish.json()["feedback"]


def test_tool_state_honest_answer_after_attacks(reader: Reader):
    task_id = f"leak/tool/{reader.tag}"
    register(reader, task_id, "tool_state", tool_task())
    honest = dumps_trace(tool_task()["gold_actions"], f"Done, your balance is {950 - int(LOW_INT)}.")
    result = attack(reader, "tool_state", task_id, honest, [], [], [])
    assert result["reward"] == 1.0, result["feedback"]


# --------------------------------------------------------------------------------- math

MATH_ATTACKS = ["\\boxed{8}", "I do not know", "\\boxed{1} or \\boxed{2}", "\\boxed{x+1}", "The answer is 6."]


def test_math_answer_stays_hidden(reader: Reader):
    task_id = f"leak/math/{reader.tag}"
    shown = register(reader, task_id, "math", {"answer": LOW_INT, "prompt": f"Compute it. {MATH_MARKER}"},
                     hide=["prompt"])
    shown = register(reader, task_id, "math", {"answer": LOW_INT, "prompt": f"Compute it. {MATH_MARKER}"},
                     hide=["prompt"])  # the same again: no conflict
    with reader.client(reader.reward) as c:
        public = c.get(f"/v1/tasks/{task_id}")
    for body in (json.dumps(shown), public.text):
        assert MATH_MARKER not in body and '"answer": "7"' not in body
        assert sha256_json(LOW_INT) not in body
        assert set(json.loads(body)["task"]["answer"]) == {"hmac_sha256"}
    for response in MATH_ATTACKS:
        result = attack(reader, "math", task_id, response, [MATH_MARKER], [LOW_INT], [LOW_INT])
        assert result["reward"] == 0.0
        assert "gold_normalised" not in result["evidence"]
    honest = attack(reader, "math", task_id, "\\boxed{7}", [MATH_MARKER], [], [])
    assert honest["reward"] == 1.0 and honest["feedback"]["extracted"] == "7"
    assert audit_record(reader, honest["record_id"])["evidence"]["gold_normalised"] == "7"


# ------------------------------------------------------------------ views, hide, fingerprints

def test_full_evidence_needs_audit_for_registered_tasks(reader: Reader):
    task_id = f"leak/view/{reader.tag}"
    register(reader, task_id, "sql", SQL_TASK)
    body = {"verifier": "sql", "task_id": task_id, "response": "```sql\nSELECT name FROM emp\n```", "evidence": "full"}
    with reader.client(reader.reward) as c:
        refused = c.post("/v1/verify", json=body)
        grouped = c.post("/v1/groups", json={"groups": [{"verifier": "sql", "task_id": task_id, "evidence": "full",
                                                         "responses": ["```sql\nSELECT 1\n```"]}]})
    assert refused.status_code == 403 and "evidence" in refused.json()["detail"]
    assert grouped.status_code == 403 and "groups[0].evidence" in grouped.json()["detail"]
    with reader.client() as c:  # the admin key holds audit
        full = c.post("/v1/verify", json=body)
        inline = c.post("/v1/verify", json={"verifier": "sql", "task": SQL_TASK, "evidence": "feedback",
                                            "response": "```sql\nSELECT name FROM emp\n```"})
    assert full.status_code == 200 and SQL_MARKER in json.dumps(full.json()["evidence"])
    assert inline.status_code == 200 and SQL_MARKER not in inline.text


def test_hide_on_registration_is_followed_and_checked(reader: Reader):
    task_id = f"leak/hide/{reader.tag}"
    task = {"schema": f"CREATE TABLE {SQL_MARKER}t(a INTEGER);",
            "instances": [f"INSERT INTO {SQL_MARKER}t VALUES (1),(2);"],
            "gold": f"SELECT a FROM {SQL_MARKER}t WHERE a > 1"}
    shown = register(reader, task_id, "sql", task, hide=["schema"])
    assert SQL_MARKER not in json.dumps(shown) and set(shown["task"]["schema"]) == {"hmac_sha256"}
    # A response that guesses nothing gets an error naming no hidden table.
    result = attack(reader, "sql", task_id, "```sql\nSELECT * FROM nosuch\n```", [SQL_MARKER], [], [])
    assert result["reward"] == 0.0
    with reader.client() as c:
        bad = c.post("/v1/tasks", json={"task_id": task_id + "x", "verifier": "sql", "task": task,
                                        "hide": ["no_such_field"]})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("hide")


def test_task_hashes_are_keyed_and_stable(reader: Reader):
    task_id = f"leak/hash/{reader.tag}"
    shown = register(reader, task_id, "sql", SQL_TASK)
    task = get("sql").parse_task(SQL_TASK)
    assert shown["task_hash"] != task.task_hash(), "the task hash is keyed, not a plain SHA-256"
    assert shown["task"]["instances"]["hmac_sha256"] != sha256_json(SQL_TASK["instances"])
    key_file = Path(reader.server.db_url.removeprefix("sqlite:///")).parent / "fingerprint.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    with reader.client(reader.reward) as c:
        result = c.post("/v1/verify", json={"verifier": "sql", "task_id": task_id,
                                            "response": "```sql\nSELECT name FROM emp WHERE salary > 100\n```"})
    with reader.client(reader.audit) as c:
        by_hash = c.get("/v1/records", params={"task_hash": shown["task_hash"]}).json()["records"]
        replayed = c.post(f"/v1/records/{result.json()['record_id']}/replay")
    assert result.json()["task_hash"] == shown["task_hash"]
    # The same content under other ids shares the hash: the filter finds this record among them.
    assert result.json()["record_id"] in [r["id"] for r in by_hash]
    assert {r["task_hash"] for r in by_hash} == {shown["task_hash"]}
    assert replayed.status_code == 200 and replayed.json()["same_verdict"]


def test_tasks_registered_before_keyed_fingerprints_keep_working(reader: Reader):
    """A task registered under its plain SHA-256 (before this change): registering the same
    content again is no conflict, and its records, filters and replay keep the old hash."""
    from service.store import AuditStore

    task = get("math").parse_task({"answer": "12"})
    plain = task.task_hash()
    task_id = f"leak/old/{reader.tag}"
    store = AuditStore(reader.server.db_url)
    try:
        assert store.register_task(task_id, "math", plain, task.model_dump(mode="json"))
    finally:
        store.engine.dispose()
    again = register(reader, task_id, "math", {"answer": "12"})
    assert again["created"] is False and again["task_hash"] == plain
    with reader.client(reader.reward) as c:
        result = c.post("/v1/verify", json={"verifier": "math", "task_id": task_id, "response": "\\boxed{12}"})
    assert result.json()["reward"] == 1.0 and result.json()["task_hash"] == plain
    with reader.client(reader.audit) as c:
        listed = c.get("/v1/records", params={"task_hash": plain}).json()["records"]
        replayed = c.post(f"/v1/records/{result.json()['record_id']}/replay").json()
    assert [r["id"] for r in listed] == [result.json()["record_id"]] and replayed["same_verdict"]
