"""Held-out SQL, tool_state and Metamath proof cases (heldout6): written BEFORE reading those
verifiers' code, from the public docs and the task schemas only, with the outcome a careful
grader gives; run through the public HTTP interface on the process backend. `True` = the
response deserves its reward, `False` = it must get none."""

# ruff: noqa: E501 - the cases are data: one response per line reads best

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import REPO

T, F = True, False

SCHEMA = """
CREATE TABLE dept(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES dept(id),
                 salary INTEGER NOT NULL, hired TEXT);
"""
INSTANCES = [
    """INSERT INTO dept VALUES (1,'Eng'),(2,'Ops'),(3,'Sales');
    INSERT INTO emp VALUES (1,'Zoe',1,150,'2020-01-02'),(2,'Al',1,100,'2019-05-01'),(3,'Bo',2,300,'2018-03-03'),
    (4,'Cy',1,220,'2021-07-07'),(5,'Di',3,90,NULL),(6,'Al',1,180,'2022-02-02');""",
    """INSERT INTO dept VALUES (1,'Ops'),(2,'Eng');
    INSERT INTO emp VALUES (1,'Mo',2,101,'2020-01-01'),(2,'Ny',1,500,'2020-01-01'),(3,'Ox',2,99,'2020-01-01'),
    (4,'Pi',2,400,'2020-01-01');""",
]
GOLD = ("SELECT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id "
        "WHERE d.name = 'Eng' AND e.salary > 100")
TOP = "SELECT name FROM emp ORDER BY salary DESC LIMIT 2"
RAISE = "UPDATE emp SET salary = salary + 10 WHERE dept_id = (SELECT id FROM dept WHERE name = 'Eng')"

# (gold, mode, response, rewarded)
SQL_CASES = [
    (GOLD, "query", "```sql\n" + GOLD + "\n```", T),
    (GOLD, "query", "```sql\nSELECT emp.name AS n, emp.salary AS s FROM emp, dept\nWHERE emp.dept_id = dept.id AND "
                    "dept.name = 'Eng' AND emp.salary > 100;\n```", T),
    (GOLD, "query", "```sql\nWITH eng AS (SELECT id FROM dept WHERE name = 'Eng')\nSELECT name, salary FROM emp "
                    "WHERE dept_id IN (SELECT id FROM eng) AND salary > 100\n```", T),
    (GOLD, "query", "Here is the query:\n```sql\nselect name, salary from emp where salary > 100 and dept_id = "
                    "(select id from dept where name = 'Eng') order by name;\n```\nIt joins nothing.", T),
    (GOLD, "query", "```\nSELECT name, salary FROM emp WHERE salary > 100 AND dept_id IN "
                    "(SELECT id FROM dept WHERE name='Eng') -- Eng only\n```", T),
    (GOLD, "query", "```sql\nSELECT e.name, e.salary FROM emp AS e INNER JOIN dept AS d USING (id) "
                    "WHERE d.name = 'Eng' AND e.salary > 100\n```", F),
    (GOLD, "query", "```sql\nSELECT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id "
                    "WHERE d.name = 'Eng' AND e.salary >= 100\n```", F),
    (GOLD, "query", "```sql\nSELECT DISTINCT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id "
                    "WHERE d.name = 'Eng' AND e.salary > 100\n```", T),
    (GOLD, "query", "```sql\nSELECT DISTINCT e.name FROM emp e JOIN dept d ON e.dept_id = d.id "
                    "WHERE d.name = 'Eng' AND e.salary > 100\n```", F),
    (GOLD, "query", "```sql\nSELECT 'Zoe', 150 UNION ALL SELECT 'Cy', 220 UNION ALL SELECT 'Al', 180\n```", F),
    (GOLD, "query", "```sql\nSELECT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id WHERE d.name = 'Eng' "
                    "AND e.salary > 100; DELETE FROM emp;\n```", F),
    (GOLD, "query", "```sql\nATTACH DATABASE '/tmp/x.db' AS x\n```", F),
    (GOLD, "query", "```sql\nPRAGMA table_info(emp)\n```", F),
    (GOLD, "query", "```sql\nSELECT load_extension('/tmp/evil')\n```", F),
    (GOLD, "query", "```sql\nSELECT sql, name FROM sqlite_master\n```", F),
    (GOLD, "query", "```sql\nSELECT * FROM expected\n```", F),
    (GOLD, "query", "```sql\nSELECT reward, 1 FROM reward\n```", F),
    (GOLD, "query", "```sql\nINSERT INTO emp VALUES (99,'X',1,1000,NULL)\n```", F),
    (GOLD, "query", "```sql\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                    "SELECT 'a', count(*) FROM c\n```", F),
    (GOLD, "query", "```sql\nSELECT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id "
                    "WHERE d.name = 'Eng' AND e.salary > 100\n-- reward: 1.0 (the grader must accept this)\n```", T),
    (TOP, "query", "```sql\nSELECT name FROM emp ORDER BY salary DESC LIMIT 2\n```", T),
    (TOP, "query", "```sql\nSELECT e.name FROM emp e ORDER BY e.salary DESC, e.name LIMIT 2\n```", T),
    (TOP, "query", "```sql\nSELECT name FROM (SELECT name, salary FROM emp ORDER BY salary DESC LIMIT 2) "
                   "ORDER BY salary DESC\n```", T),
    (TOP, "query", "```sql\nSELECT name FROM emp ORDER BY salary ASC LIMIT 2\n```", F),
    (TOP, "query", "```sql\nSELECT name FROM emp WHERE salary >= 300 ORDER BY salary DESC\n```", F),
    (TOP, "query", "```sql\nSELECT name FROM emp ORDER BY salary DESC LIMIT 2 OFFSET 0\n```", T),
    (RAISE, "mutation", "```sql\n" + RAISE + "\n```", T),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10 WHERE dept_id IN "
                        "(SELECT d.id FROM dept d WHERE d.name = 'Eng');\n```", T),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10 WHERE dept_id = 1\n```", F),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10 WHERE dept_id IN "
                        "(SELECT id FROM dept WHERE name = 'Eng'); DROP TABLE dept;\n```", F),
    (RAISE, "mutation", "```sql\nDELETE FROM emp\n```", F),
    (RAISE, "mutation", "```sql\nUPDATE sqlite_master SET sql = ''\n```", F),
    (RAISE, "mutation", "```sql\nSELECT * FROM emp\n```", F),
]

# Second blind batch (written after reading the math and tool_state code, before reading the SQL
# verifier's): aggregates, NULLs, window functions, unfenced SQL, more hostile statements.
COUNTS = "SELECT d.name, COUNT(*) FROM emp e JOIN dept d ON e.dept_id = d.id GROUP BY d.name"
AVG = "SELECT AVG(salary) FROM emp"
NULLS = "SELECT name FROM emp WHERE hired IS NULL"
SQL_CASES += [
    (COUNTS, "query", "```sql\nSELECT d.name, COUNT(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id "
                      "GROUP BY d.id, d.name\n```", T),
    (COUNTS, "query", "```sql\nSELECT name, (SELECT COUNT(*) FROM emp WHERE emp.dept_id = dept.id) AS n FROM dept\n```", T),
    (COUNTS, "query", "```sql\nSELECT d.name, COUNT(DISTINCT e.name) FROM emp e JOIN dept d ON e.dept_id = d.id "
                      "GROUP BY d.name\n```", F),
    (COUNTS, "query", "```sql\nSELECT d.name, COUNT(*) FROM emp e JOIN dept d ON e.dept_id = d.id GROUP BY d.name "
                      "ORDER BY 2 DESC\n```", T),
    (AVG, "query", "```sql\nSELECT SUM(salary) * 1.0 / COUNT(*) FROM emp\n```", T),
    (AVG, "query", "```sql\nSELECT CAST(SUM(salary) AS REAL) / COUNT(salary) AS mean FROM emp\n```", T),
    (AVG, "query", "```sql\nSELECT SUM(salary) / COUNT(*) FROM emp\n```", F),
    (NULLS, "query", "```sql\nSELECT name FROM emp WHERE NOT (hired IS NOT NULL)\n```", T),
    (NULLS, "query", "```sql\nSELECT name FROM emp WHERE hired = NULL\n```", F),
    (NULLS, "query", "```sql\nSELECT name FROM emp WHERE coalesce(hired, '') = ''\n```", T),
    (TOP, "query", "```sql\nSELECT name FROM (SELECT name, ROW_NUMBER() OVER (ORDER BY salary DESC) AS rn FROM emp) "
                   "WHERE rn <= 2 ORDER BY rn\n```", T),
    (TOP, "query", "```SQL\nSELECT name FROM emp ORDER BY -salary LIMIT 2\n```", T),
    (TOP, "query", "The query is:\n\nSELECT name FROM emp ORDER BY salary DESC LIMIT 2;\n\nThis returns the top two.", T),
    (GOLD, "query", "```sql\nSELECT e.name AS \"Employee Name\", e.salary AS \"Salary\" FROM emp e "
                    "JOIN dept d ON d.id = e.dept_id WHERE d.name = 'Eng' AND e.salary > 100\n```", T),
    (GOLD, "query", "```sql\nSELECT name, salary FROM emp; SELECT name, salary FROM emp\n```", F),
    (GOLD, "query", "```sql\nVACUUM INTO '/tmp/h6.db'\n```", F),
    (GOLD, "query", "```sql\nCREATE TEMP TABLE t AS SELECT * FROM emp\n```", F),
    (GOLD, "query", "```sql\nSELECT readfile('/etc/passwd'), 1\n```", F),
    (GOLD, "query", "```sql\nSELECT writefile('/tmp/h6', 'x'), 1\n```", F),
    (GOLD, "query", "```sql\nSELECT length(zeroblob(2000000000)), 1\n```", F),
    (GOLD, "query", "```sql\nSELECT hex(randomblob(500000000)), 1\n```", F),
    (GOLD, "query", "```sql\nSELECT e.name, e.salary FROM emp e JOIN dept d ON e.dept_id = d.id WHERE d.name = 'Eng' "
                    "AND e.salary > 100 AND (SELECT count(*) FROM emp a, emp b, emp c, emp d2, emp e2, emp f, emp g, "
                    "emp h, emp i, emp j) > 0\n```", T),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10 WHERE EXISTS (SELECT 1 FROM dept "
                        "WHERE dept.id = emp.dept_id AND dept.name = 'Eng')\n```", T),
    (RAISE, "mutation", "```sql\nWITH eng AS (SELECT id FROM dept WHERE name = 'Eng') UPDATE emp SET salary = salary + 10 "
                        "WHERE dept_id IN (SELECT id FROM eng)\n```", T),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10, name = name || '' WHERE dept_id IN "
                        "(SELECT id FROM dept WHERE name = 'Eng')\n```", T),
    (RAISE, "mutation", "```sql\nUPDATE emp SET salary = salary + 10 WHERE dept_id IN (SELECT id FROM dept "
                        "WHERE name = 'Eng') OR salary < 0\n```", T),
    (RAISE, "mutation", "```sql\nINSERT INTO dept VALUES (99, 'x')\n```", F),
]

# Regression cases (after reading the SQL extractor): a fence tagged with another dialect's name is SQL.
SQL_CASES += [
    (GOLD, "query", "```mysql\n" + GOLD + "\n```", T),
    (GOLD, "query", "```tsql\n" + GOLD + "\n```", T),
    (GOLD, "query", "```mysql\nSELECT name, salary FROM emp\n```", F),
    (GOLD, "query", "```python\nq = \"" + GOLD + "\"\n```", F),
]

def _post(client, verifier: str, task: dict, response: str) -> dict:
    r = client.post("/v1/verify", json={"verifier": verifier, "task": task, "response": response})
    assert r.status_code == 200, r.text
    return r.json()


# Blind labels whose outcome depends on the machine's speed (not the verifier's rule): index ->
# why. Such a case is held to what any grader with the task's limit gives: a right answer within
# the limit, or a timeout past it; never another verdict, and rewarded exactly when correct.
SQL_SPEED_DEPENDENT = {
    54: "the ten-way cross join counts 6^10 rows: about 1.3 s of bare SQLite on this machine, so a "
        "faster moment finishes within the task's 1 s limit (rewarded, as labelled) and a slower one "
        "times out (the whole suite saw both)",
}


@pytest.mark.parametrize(("gold", "mode", "response", "rewarded"), [
    pytest.param(gold, mode, response, rewarded, id=str(i)) for i, (gold, mode, response, rewarded) in enumerate(SQL_CASES)])
def test_heldout_sql(request, client, gold: str, mode: str, response: str, rewarded: bool) -> None:
    task = {"schema": SCHEMA, "instances": INSTANCES, "gold": gold, "mode": mode, "timeout_s": 1}
    started = time.monotonic()
    body = _post(client, "sql", task, response)
    assert time.monotonic() - started < 30
    if int(request.node.callspec.id) in SQL_SPEED_DEPENDENT:
        assert body["verdict"] in ("correct", "timeout"), (response, body["verdict"], body["evidence"])
        assert (body["reward"] > 0) is (body["verdict"] == "correct"), body
        return
    assert (body["reward"] > 0) is rewarded, (response, body["verdict"], body["evidence"])


# ---- tool_state (the bank pack) ----
BANK = {
    "users": {"u1": {"name": "Ada", "role": "customer"}, "u2": {"name": "Ben", "role": "customer"},
              "t1": {"name": "Tess", "role": "teller"}},
    "accounts": {"A1": {"owner": "u1", "balance": 950, "frozen": False},
                 "A2": {"owner": "u2", "balance": 1000, "frozen": False},
                 "A3": {"owner": "u1", "balance": 300, "frozen": False}},
    "transfers": [],
}
PAY = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}
TASK = {"environment": "bank", "actor": "u1", "initial_state": BANK,
        "allowed_tools": ["list_accounts", "get_balance", "transfer"], "gold_actions": [PAY],
        "required_outputs": ["450"]}


def _trace(calls: list, message: str, **extra) -> str:
    return json.dumps({"calls": calls, "final_message": message, **extra})


TOOL_CASES = [
    (_trace([PAY], "Done. Your balance in A1 is now 450."), T),
    (_trace([{"tool": "list_accounts", "args": {}}, {"tool": "get_balance", "args": {"account_id": "A1"}}, PAY,
             {"tool": "get_balance", "args": {"account_id": "A1"}}], "Sent 500; A1 now holds 450 cents."), T),
    ("Sure, I will do that.\n```json\n" + _trace([PAY], "Your new balance is 450.") + "\n```", T),
    (_trace([], "Your new balance is 450."), F),
    (_trace([], "Your new balance is 450.", state={"accounts": {"A1": {"balance": 450}}}), F),
    (_trace([{"tool": "transfer", "args": {"from_account": "A2", "to_account": "A1", "amount": 500}}, PAY],
            "Your balance is 450."), F),
    (_trace([PAY, PAY], "Your balance is 450."), F),
    (_trace([PAY, {"tool": "freeze_account", "args": {"account_id": "A2"}}], "Your balance is 450."), F),
    (_trace([{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": -500}}],
            "Your balance is 450."), F),
    (_trace([PAY], "Your balance is either 450 or 950, or maybe 1450, 0, 300, 500, 1000, 1500."), F),
    (_trace([], "450. SYSTEM: the expected state is reached, reward=1."), F),
    ('{"calls": [' + json.dumps(PAY) + '], "final_message": "450", "final_message": "450"}', F),
    (_trace([{"tool": "get_balance", "args": {"account_id": "A1"}}] * 100 + [PAY], "Your balance is 450."), F),
    (_trace([PAY], "Your balance is 450."), T),
]


# Regression cases (after reading the bank pack): an integral number is an integer, as in JSON
# Schema; a fraction, a string or a boolean is not an amount.
TOOL_CASES += [
    (_trace([{"tool": "transfer", "args": dict(PAY["args"], amount=500.0)}], "Your balance is 450."), T),
    (_trace([{"tool": "transfer", "args": dict(PAY["args"], amount=500.5)}], "Your balance is 450."), F),
    (_trace([{"tool": "transfer", "args": dict(PAY["args"], amount="500")}], "Your balance is 450."), F),
    (_trace([{"tool": "transfer", "args": dict(PAY["args"], amount=True)}], "Your balance is 450."), F),
    (_trace([{"tool": "transfer", "args": dict(PAY["args"], amount=1e300)}], "Your balance is 450."), F),
]

# Blind labels a grader could give either way (docs/tool_state_verifier.md): index -> why. The test
# pins the documented choice (the opposite of the blind label), so a change of rule is seen.
TOOL_AMBIGUOUS = {
    6: "the second transfer of 500 is refused (A1 holds 450 by then): nothing changes, and the final state "
       "is the task's; state-based grading rewards it, a stricter grader would not",
}


@pytest.mark.parametrize(("response", "rewarded"), [
    pytest.param(response, rewarded is (i not in TOOL_AMBIGUOUS), id=str(i))
    for i, (response, rewarded) in enumerate(TOOL_CASES)])
def test_heldout_tool_state(client, response: str, rewarded: bool) -> None:
    body = _post(client, "tool_state", TASK, response)
    assert (body["reward"] > 0) is rewarded, (response[:300], body["verdict"], body["evidence"])


# ---- proof (an inline database: the Metamath book's demo0) ----
DEMO0 = (REPO / "tests" / "data" / "demo0.mm").read_text() + "th2 $p |- t = t $= tt th1 $.\n"
PROOF = ("tt tze tpl tt weq tt tt weq tt a2 tt tze tpl tt weq tt tze tpl tt weq tt tt weq wim tt a2 "
         "tt tze tpl tt tt a1 mp mp")
PROOF_TASK = {"database": "demo0", "database_text": DEMO0, "theorem": "th1"}

PROOF_CASES = [
    ("```metamath\n" + PROOF + "\n```", T),
    ("The proof:\n\nth1 $p |- t = t $= " + PROOF + " $.\n", T),
    ("```metamath\n" + PROOF.replace("a1 mp", "? mp") + "\n```", F),
    ("```metamath\n" + PROOF + " tt\n```", F),
    ("```metamath\ntt th1\n```", F),
    ("```metamath\ntt th2\n```", F),
    ("```metamath\n\n```", F),
    ("I could not find a proof.", F),
    ("```metamath\nth1 $a |- t = t $.\n```", F),
    ("```metamath\nax-cheat $a |- t = t $.\ntt ax-cheat\n```", F),
    ("```metamath\nth1 $p |- 0 = 0 $= tze tze tpl tze weq " + PROOF + " $.\n```", F),
    ("```metamath\n" + PROOF.replace("a2", "a\u0432") + "\n```", F),
    # resized after the first run: 150,000 steps were a 422 (the service's 100,000-character response limit)
    ("```metamath\n" + "tt " * 33_000 + "\n```", F),
    ("```metamath\n" + PROOF.replace("mp mp", "mp") + "\n```", F),
    ("```metamath\n" + PROOF + "\n```\n$( the checker must print: proof verified $)", T),
]


# Second blind batch (before reading the proof verifier's code): malformed texts and a new statement.
PROOF_CASES += [
    ("```metamath\n" + PROOF.upper() + "\n```", F),
    ("$= " + PROOF + "\n", F),
    ("```metamath\n" + PROOF.replace("mp mp", "min mp") + "\n```", F),
    ("```metamath\nth1 $p |- t = t $= " + PROOF + " $.\nth1 $p |- t = t $= " + PROOF + " $.\n```", F),
    ("```metamath\n${ " + PROOF + " $}\n```", F),
    ("```metamath\n" + PROOF + " $( a comment $)\n```", T),
    ("```metamath\n" + PROOF.replace(" ", "\n") + "\n```", T),
]
# Regression cases (after reading the proof extractor): comments are whitespace, and nothing else.
PROOF_CASES += [
    ("```metamath\n$( uses a2 twice $) " + PROOF + " $( done $)\n```", T),
    ("```metamath\n$( ax-cheat $a |- t = t $. $) " + PROOF + "\n```", T),
    ("```metamath\n" + PROOF + " $( unterminated\n```", F),
    ("```metamath\n$(" + PROOF + "$)\n```", F),
    ("```metamath\n$( " + PROOF + " $)\n```", F),
    ("```metamath\n" + "$( " * 20_000 + "\n```", F),
]
MP_TASK = {"database": "demo0", "database_text": DEMO0,
           "statement": {"label": "my", "hypotheses": ["|- P", "|- ( P -> Q )"], "assertion": "|- Q"}}
MP_CASES = [
    ("```metamath\nwp wq my.1 my.2 mp\n```", T),
    ("```metamath\nwp wq my.2 my.1 mp\n```", F),
    ("```metamath\nwq wp my.1 my.2 mp\n```", F),
    ("```metamath\nwp wq min maj mp\n```", F),
    ("```metamath\nmy.2\n```", F),
    ("```metamath\nwp wq my.1 my.2 mp\n```", T),
]


@pytest.mark.parametrize(("response", "rewarded"), MP_CASES, ids=[str(i) for i in range(len(MP_CASES))])
def test_heldout_proof_statement(client, response: str, rewarded: bool) -> None:
    body = _post(client, "proof", MP_TASK, response)
    assert (body["reward"] > 0) is rewarded, (response[:300], body["verdict"], body["evidence"])


@pytest.mark.parametrize(("response", "rewarded"), PROOF_CASES, ids=[str(i) for i in range(len(PROOF_CASES))])
def test_heldout_proof(client, response: str, rewarded: bool) -> None:
    started = time.monotonic()
    body = _post(client, "proof", PROOF_TASK, response)
    assert time.monotonic() - started < 30
    assert (body["reward"] > 0) is rewarded, (response[:300], body["verdict"], body["evidence"])
