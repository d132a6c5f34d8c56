"""Held-out SQL and tool-state cases, round 7: written blind (from the public docs only,
before the verifiers' code was read), labelled as a careful human grader would.

SQL: semantically equal queries in other styles (CTEs, window functions, correlated and
uncorrelated subqueries, other aliases, ORDER BY where order does not matter), and wrong
ones that pass on small data (NULLs, ties, empty groups, integer division, NOT IN with a
NULL, date bounds). Tool state (the `bank` pack): final states reached by different honest
paths, and side effects that must fail.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
"""

from __future__ import annotations

import json

import pytest

from tests.heldout7_support import case_params, check_label, judge_one, pinned

T, F = True, False

SCHEMA = """
CREATE TABLE dept(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER, salary INTEGER NOT NULL,
                 manager_id INTEGER, bonus INTEGER, hired TEXT);
"""
# One instance with an empty department, a tie at the top, an employee without a
# department, NULL bonuses; one small and plain; one where a department has no ties.
BIG = """
INSERT INTO dept VALUES (1,'eng'),(2,'ops'),(3,'legal');
INSERT INTO emp VALUES (1,'Zoe',1,9000,NULL,500,'2019-03-01'),(2,'Adam',1,7000,1,NULL,'2020-01-01'),
  (3,'Mia',1,9000,1,300,'2020-06-15'),(4,'Bob',2,4000,NULL,NULL,'2021-01-01'),
  (5,'Cy',2,5000,4,100,'2020-12-31'),(6,'Eve',NULL,3000,NULL,NULL,'2022-02-02');
"""
SMALL = """
INSERT INTO dept VALUES (1,'eng'),(2,'ops');
INSERT INTO emp VALUES (1,'Liam',1,6000,NULL,200,'2018-05-05'),(2,'Ava',2,6001,NULL,NULL,'2020-07-07'),
  (3,'Noah',2,5999,2,NULL,'2021-03-03');
"""


def sql(gold: str, **extra: object) -> dict:
    return {"schema": SCHEMA, "instances": [BIG, SMALL], "gold": gold, **extra}


ABOVE_AVG = sql("SELECT name FROM emp e WHERE salary > (SELECT AVG(salary) FROM emp x WHERE x.dept_id = e.dept_id)")
HEADCOUNT = sql("SELECT d.name, COUNT(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.id, d.name")
TOP_PER_DEPT = sql("SELECT d.name, e.name FROM emp e JOIN dept d ON d.id = e.dept_id "
                   "WHERE e.salary = (SELECT MAX(salary) FROM emp x WHERE x.dept_id = e.dept_id)")
ORDERED = sql("SELECT name, salary FROM emp ORDER BY salary DESC, name")
NO_MANAGER = sql("SELECT name FROM emp WHERE manager_id IS NULL")
WITH_BONUS = sql("SELECT COUNT(bonus) FROM emp")
AVG_SALARY = sql("SELECT AVG(salary) FROM emp")
PER_DEPT = sql("SELECT dept_id, COUNT(*) AS n FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id")
HIGH_DEPTS = sql("SELECT DISTINCT d.name FROM dept d JOIN emp e ON e.dept_id = d.id WHERE e.salary > 5000")
NAMED = sql("SELECT name AS employee, salary AS pay FROM emp WHERE salary >= 6000", column_names_matter=True)
TOP_ONE = sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 1")
HIRED_2020 = sql("SELECT name FROM emp WHERE hired >= '2020-01-01' AND hired < '2021-01-01'")
RUNNING = sql("SELECT id, (SELECT SUM(salary) FROM emp x WHERE x.id <= e.id) FROM emp e ORDER BY id")
EMPTY_DEPTS = sql("SELECT name FROM dept d WHERE NOT EXISTS (SELECT 1 FROM emp e WHERE e.dept_id = d.id)")
BIG_TOTALS = sql("SELECT dept_id, SUM(salary) FROM emp GROUP BY dept_id HAVING SUM(salary) > 9000")
DOUBLE_ENG = sql("UPDATE emp SET salary = salary * 2 WHERE dept_id = 1", mode="mutation")
DROP_UNMANAGED_OPS = sql("DELETE FROM emp WHERE manager_id IS NULL AND dept_id = 2", mode="mutation")
# second blind batch (written after the first scored 45/45, still before reading the code)
STAFFED = sql("SELECT COUNT(DISTINCT dept_id) FROM emp")
LEGAL_COUNT = sql("SELECT COUNT(*) FROM emp WHERE dept_id = 3")
WELL_PAID = sql("SELECT d.name, COUNT(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id AND e.salary > 5000 "
                "GROUP BY d.id, d.name")
BY_HIRE = sql("SELECT name FROM emp ORDER BY hired")
BY_BONUS = sql("SELECT name, bonus FROM emp ORDER BY bonus")
TOP_TWO = sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 2")
RICH_FLAG = sql("SELECT name, salary > 5000 FROM emp")
ADD_HR = sql("INSERT INTO dept VALUES (4, 'hr')", mode="mutation")
ZERO_BONUS = sql("UPDATE emp SET bonus = 0 WHERE bonus IS NULL", mode="mutation")
# third blind batch (written after the second scored 23/23, before reading the SQL verifier)
PAID_DEPTS = sql("SELECT dept_id FROM emp WHERE salary > 4000")
AVG_ROWS = {"schema": SCHEMA, "instances": [BIG, SMALL], "expected": [[[37000 / 6]], [[6000]]]}
ONE_RICH = {"schema": SCHEMA, "instances": [BIG, SMALL],
            "predicate": {"sql": "c2 > 6000 AND EXISTS (SELECT 1 FROM emp WHERE name = c1 AND salary = c2)",
                          "columns": 2, "row_count": {"min": 1, "max": 1}}}
Z_NAMES = sql("SELECT name FROM emp WHERE name LIKE 'Z%'")
NO_BONUS = sql("SELECT name, bonus IS NULL FROM emp")
SECOND_THIRD = sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 2 OFFSET 1")
LABELS = sql("SELECT name || ' (' || dept_id || ')' FROM emp")
SALARY_RANK = sql("SELECT name, RANK() OVER (ORDER BY salary DESC) FROM emp")

SQL_CASES: list[tuple[dict, str, bool]] = [
    # equal in other styles
    (ABOVE_AVG, "WITH a AS (SELECT name, salary, AVG(salary) OVER (PARTITION BY dept_id) AS m FROM emp)\n"
                "SELECT name FROM a WHERE salary > m AND m IS NOT NULL", T),
    (ABOVE_AVG, "SELECT e.name FROM emp e JOIN (SELECT dept_id, AVG(salary) AS m FROM emp GROUP BY dept_id) g "
                "ON g.dept_id = e.dept_id WHERE e.salary > g.m", T),
    (ABOVE_AVG, "SELECT name FROM emp WHERE salary > (SELECT AVG(salary) FROM emp)", F),
    (HEADCOUNT, "SELECT d.name, (SELECT COUNT(*) FROM emp e WHERE e.dept_id = d.id) AS staff FROM dept d", T),
    (HEADCOUNT, "SELECT d.name, COUNT(*) FROM dept d JOIN emp e ON e.dept_id = d.id GROUP BY d.name", F),
    (HEADCOUNT, "SELECT d.name, COUNT(*) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.name", F),
    (TOP_PER_DEPT, "SELECT dn, en FROM (SELECT d.name AS dn, e.name AS en, "
                   "RANK() OVER (PARTITION BY e.dept_id ORDER BY e.salary DESC) AS r "
                   "FROM emp e JOIN dept d ON d.id = e.dept_id) WHERE r = 1", T),
    (TOP_PER_DEPT, "SELECT dn, en FROM (SELECT d.name AS dn, e.name AS en, "
                   "ROW_NUMBER() OVER (PARTITION BY e.dept_id ORDER BY e.salary DESC) AS r "
                   "FROM emp e JOIN dept d ON d.id = e.dept_id) WHERE r = 1", F),
    (ORDERED, "SELECT name, salary FROM emp ORDER BY -salary, name ASC;", T),
    (ORDERED, "SELECT name, salary FROM emp ORDER BY salary DESC, name DESC", F),
    (ORDERED, "SELECT name, salary FROM emp ORDER BY salary ASC, name", F),
    (NO_MANAGER, "SELECT name FROM emp WHERE manager_id = NULL", F),
    (NO_MANAGER, "SELECT name FROM emp WHERE coalesce(manager_id, -1) = -1 ORDER BY name", T),
    (WITH_BONUS, "SELECT COUNT(*) FROM emp WHERE bonus IS NOT NULL", T),
    (WITH_BONUS, "SELECT COUNT(*) FROM emp", F),
    (AVG_SALARY, "SELECT SUM(salary) * 1.0 / COUNT(*) FROM emp", T),
    (AVG_SALARY, "SELECT SUM(salary) / COUNT(*) FROM emp", F),
    (PER_DEPT, "SELECT dept_id AS department, COUNT(id) AS headcount FROM emp GROUP BY dept_id "
               "HAVING dept_id IS NOT NULL", T),
    (HIGH_DEPTS, "SELECT d.name FROM dept d JOIN emp e ON e.dept_id = d.id GROUP BY d.name "
                 "HAVING MAX(e.salary) > 5000", T),
    (HIGH_DEPTS, "SELECT d.name FROM dept d WHERE EXISTS "
                 "(SELECT 1 FROM emp e WHERE e.dept_id = d.id AND e.salary > 5000)", T),
    (HIGH_DEPTS, "SELECT d.name FROM dept d JOIN emp e ON e.dept_id = d.id WHERE e.salary > 5000", F),
    (NAMED, "SELECT name AS Employee, salary AS PAY FROM emp WHERE salary >= 6000", T),
    (NAMED, "SELECT name, salary FROM emp WHERE salary >= 6000", F),
    (TOP_ONE, "SELECT name FROM emp ORDER BY salary DESC, name LIMIT 1", T),
    (TOP_ONE, "SELECT name FROM emp ORDER BY salary LIMIT 1", F),
    (HIRED_2020, "SELECT name FROM emp WHERE hired LIKE '2020%'", T),
    (HIRED_2020, "SELECT name FROM emp WHERE strftime('%Y', hired) = '2020'", T),
    (HIRED_2020, "SELECT name FROM emp WHERE hired BETWEEN '2020-01-01' AND '2020-12-31'", T),
    (HIRED_2020, "SELECT name FROM emp WHERE hired > '2020-01-01' AND hired < '2021-01-01'", F),
    (RUNNING, "SELECT id, SUM(salary) OVER (ORDER BY id) AS running FROM emp ORDER BY id", T),
    (RUNNING, "SELECT id, SUM(salary) OVER (ORDER BY id DESC) FROM emp ORDER BY id", F),
    (EMPTY_DEPTS, "SELECT d.name FROM dept d LEFT JOIN emp e ON e.dept_id = d.id WHERE e.id IS NULL", T),
    (EMPTY_DEPTS, "SELECT name FROM dept WHERE id NOT IN (SELECT dept_id FROM emp)", F),
    (BIG_TOTALS, "WITH t AS (SELECT dept_id, SUM(salary) AS s FROM emp GROUP BY dept_id)\n"
                 "SELECT dept_id, s FROM t WHERE s > 9000", T),
    (BIG_TOTALS, "SELECT dept_id, SUM(salary) FROM emp WHERE salary > 9000 GROUP BY dept_id", F),
    # prose around the statement; a corrected draft
    (NO_MANAGER, "Employees without a manager have a NULL `manager_id`:\n\n```sql\n"
                 "SELECT name\nFROM emp\nWHERE manager_id IS NULL;\n```\n\nThis returns their names.", T),
    (NO_MANAGER, "First try:\n```sql\nSELECT name FROM emp WHERE manager_id = 0\n```\nThat is wrong, NULL is "
                 "not 0. Corrected:\n```sql\nSELECT name FROM emp WHERE manager_id IS NULL\n```", T),
    (NO_MANAGER, "```sql\nSELECT name FROM emp WHERE manager_id IS NULL\n```\nOr more simply:\n"
                 "```sql\nSELECT name FROM emp\n```", F),
    # a query task answered with a change
    (NO_MANAGER, "DELETE FROM emp WHERE manager_id IS NOT NULL", F),
    # mutations
    (DOUBLE_ENG, "UPDATE emp SET salary = salary + salary WHERE dept_id IN (SELECT id FROM dept WHERE name = 'eng')",
     T),
    (DOUBLE_ENG, "UPDATE emp SET salary = salary * 2", F),
    (DOUBLE_ENG, "UPDATE emp SET salary = salary * 2 WHERE dept_id = 1 AND bonus IS NOT NULL", F),
    (DROP_UNMANAGED_OPS, "DELETE FROM emp WHERE id IN (SELECT id FROM emp WHERE dept_id = 2 AND manager_id IS NULL)",
     T),
    (DROP_UNMANAGED_OPS, "DELETE FROM emp WHERE dept_id = 2", F),
    # ---- second blind batch
    (STAFFED, "SELECT COUNT(*) FROM dept WHERE id IN (SELECT dept_id FROM emp)", T),
    (STAFFED, "SELECT COUNT(*) FROM (SELECT DISTINCT dept_id FROM emp)", F),
    (LEGAL_COUNT, "SELECT COUNT(id) FROM emp WHERE dept_id = 3", T),
    (LEGAL_COUNT, "SELECT SUM(1) FROM emp WHERE dept_id = 3", F),
    (LEGAL_COUNT, "SELECT printf('%d', COUNT(*)) FROM emp WHERE dept_id = 3", F),
    (TOP_PER_DEPT, "SELECT dn, en FROM (SELECT d.name AS dn, e.name AS en, MAX(e.salary) FROM emp e "
                   "JOIN dept d ON d.id = e.dept_id GROUP BY d.id)", F),
    (WELL_PAID, "SELECT d.name, SUM(CASE WHEN e.salary > 5000 THEN 1 ELSE 0 END) FROM dept d "
                "LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.id", T),
    (WELL_PAID, "SELECT d.name, COUNT(CASE WHEN e.salary > 5000 THEN 1 END) FROM dept d "
                "LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.id", T),
    (WELL_PAID, "SELECT d.name, COUNT(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id "
                "WHERE e.salary > 5000 GROUP BY d.id", F),
    (BY_HIRE, "SELECT name FROM emp ORDER BY date(hired) ASC", T),
    (BY_HIRE, "SELECT name FROM emp ORDER BY id", F),
    (BY_HIRE, "SELECT name FROM (SELECT name, hired FROM emp) ORDER BY hired DESC", F),
    (BY_BONUS, "SELECT name, bonus FROM emp ORDER BY bonus IS NOT NULL, bonus, id DESC", T),
    (BY_BONUS, "SELECT name, bonus FROM emp ORDER BY bonus NULLS LAST", F),
    (TOP_TWO, "SELECT name FROM emp ORDER BY salary DESC, id DESC LIMIT 2", T),
    (TOP_TWO, "SELECT name FROM emp WHERE salary >= 7000 ORDER BY salary DESC", F),
    (RICH_FLAG, "SELECT name, CASE WHEN salary > 5000 THEN 1 ELSE 0 END FROM emp", T),
    (RICH_FLAG, "SELECT name, CASE WHEN salary >= 5000 THEN 1 ELSE 0 END FROM emp", F),
    (EMPTY_DEPTS, "SELECT name FROM dept WHERE id IN (SELECT id FROM dept EXCEPT SELECT dept_id FROM emp)", T),
    (ADD_HR, "INSERT INTO dept(name, id) VALUES ('hr', 4)", T),
    (ADD_HR, "INSERT INTO dept(name) VALUES ('hr')", F),
    (ZERO_BONUS, "UPDATE emp SET bonus = COALESCE(bonus, 0)", T),
    (ZERO_BONUS, "UPDATE emp SET bonus = 0", F),
    (ZERO_BONUS, "UPDATE emp SET bonus = 0 WHERE bonus IS NULL OR bonus = 0", T),
    # ---- third blind batch
    (ORDERED, "SELECT * FROM emp ORDER BY salary DESC, name", F),
    (ORDERED, "SELECT name, salary FROM emp ORDER BY 2 DESC, 1", T),
    (ORDERED, "select \"name\", e.salary from main.emp as e order by e.salary desc, e.name", T),
    (PAID_DEPTS, "SELECT DISTINCT dept_id FROM emp WHERE salary > 4000", F),
    (PAID_DEPTS, "SELECT e.dept_id FROM emp e WHERE e.salary >= 4001 -- integer salaries", T),
    (AVG_ROWS, "SELECT AVG(salary) FROM emp", T),
    (AVG_ROWS, "SELECT SUM(salary) / COUNT(*) FROM emp", F),
    (ONE_RICH, "SELECT name, salary FROM emp WHERE salary > 6000 LIMIT 1", T),
    (ONE_RICH, "SELECT name, salary FROM emp ORDER BY salary DESC LIMIT 1", T),
    (ONE_RICH, "SELECT 'Zoe', 9000", F),
    (ONE_RICH, "SELECT name, salary FROM emp WHERE salary > 6000", F),
    (Z_NAMES, "SELECT name FROM emp WHERE name LIKE 'z%'", T),
    (Z_NAMES, "SELECT name FROM emp WHERE name GLOB 'z*'", F),
    (NO_BONUS, "SELECT name, CASE WHEN bonus IS NULL THEN 1 ELSE 0 END FROM emp", T),
    (NO_BONUS, "SELECT name, CASE WHEN bonus IS NULL THEN 'yes' ELSE 'no' END FROM emp", F),
    (SECOND_THIRD, "SELECT name FROM emp ORDER BY salary DESC, name LIMIT 2 OFFSET 1", T),
    (LABELS, "SELECT printf('%s (%s)', name, dept_id) FROM emp", F),
    (LABELS, "SELECT name || ' (' || CAST(dept_id AS TEXT) || ')' FROM emp", T),
    (SALARY_RANK, "SELECT name, (SELECT COUNT(*) FROM emp x WHERE x.salary > e.salary) + 1 FROM emp e", T),
    (SALARY_RANK, "SELECT name, DENSE_RANK() OVER (ORDER BY salary DESC) FROM emp", F),
    (NO_MANAGER, "Here's the query:\n\n```SQL\n-- people at the top\nSELECT name\n  FROM emp\n"
                 " WHERE manager_id IS NULL;;\n```", T),
]

# ------------------------------------------------------------------------- tool state

BANK = {
    "users": {"kai": {"name": "Kai", "role": "customer"}, "lee": {"name": "Lee", "role": "customer"},
              "tina": {"name": "Tina", "role": "teller"}},
    "accounts": {"K1": {"owner": "kai", "balance": 10000, "frozen": False},
                 "K2": {"owner": "kai", "balance": 500, "frozen": False},
                 "L1": {"owner": "lee", "balance": 2000, "frozen": False}},
    "transfers": [],
}


def bank(actor: str, gold: list[dict], **extra: object) -> dict:
    return {"environment": "bank", "actor": actor, "initial_state": BANK, "gold_actions": gold, **extra}


def call(tool: str, **args: object) -> dict:
    return {"tool": tool, "args": args}


def trace(*calls: dict, message: str = "Done.") -> dict:
    return {"calls": list(calls), "final_message": message}


MOVE = call("transfer", from_account="K1", to_account="K2", amount=3000)
SAVE = bank("kai", [MOVE])
FREEZE = bank("tina", [call("freeze_account", account_id="L1")])
TOTAL = bank("kai", [], required_outputs=["10500"],
             required_reads=[call("get_balance", account_id="K1"), call("get_balance", account_id="K2")])

NARROW = bank("kai", [MOVE], allowed_tools=["transfer", "get_balance"])

TOOL_CASES: list[tuple[dict, object, bool]] = [
    (SAVE, trace(MOVE, message="Moved 3000 cents from K1 to K2."), T),
    (SAVE, trace(call("list_accounts"), call("get_balance", account_id="K1"), MOVE), T),
    (SAVE, trace(MOVE, call("get_balance", account_id="K2"), message="K2 now holds 3500 cents."), T),
    (SAVE, "Sure, here is what I did:\n```json\n"
           '{"calls": [{"tool": "transfer", "args": {"from_account": "K1", "to_account": "K2", "amount": 3000}}], '
           '"final_message": "Transferred."}\n```', T),
    # a refused call (no funds) changes nothing; the retry with the right amount succeeds
    (SAVE, trace(call("transfer", from_account="K1", to_account="K2", amount=999999), MOVE), T),
    (SAVE, trace(MOVE, call("transfer", from_account="K2", to_account="L1", amount=1)), F),
    (SAVE, trace(call("transfer", from_account="K1", to_account="K2", amount=300)), F),
    (SAVE, trace(MOVE, call("transfer", from_account="K2", to_account="K1", amount=3000), MOVE), F),
    (SAVE, trace(call("transfer", from_account="L1", to_account="K2", amount=1), MOVE), F),
    (SAVE, trace(message="I moved 3000 cents from K1 to K2."), F),
    (SAVE, trace(call("transfer", from_account="K2", to_account="K1", amount=3000)), F),
    (FREEZE, trace(call("list_accounts"), call("freeze_account", account_id="L1")), T),
    (FREEZE, trace(call("freeze_account", account_id="L1"), call("freeze_account", account_id="L1")), T),
    (FREEZE, trace(call("freeze_account", account_id="L1"), call("freeze_account", account_id="K1")), F),
    (FREEZE, trace(call("freeze_account", account_id="K1")), F),
    (TOTAL, trace(call("get_balance", account_id="K1"), call("get_balance", account_id="K2"),
                  message="Your total is 10500 cents."), T),
    (TOTAL, trace(call("get_balance", account_id="K2"), call("get_balance", account_id="K1"),
                  message="K1 has 10000 and K2 has 500 cents: 10500 cents in all."), T),
    (TOTAL, trace(call("get_balance", account_id="K1"), call("get_balance", account_id="K2"),
                  message="Your total is 10,500 cents."), T),
    (TOTAL, trace(call("list_accounts"), message="Your total is 10500 cents."), T),
    (TOTAL, trace(message="Your total is 10500 cents."), F),
    (TOTAL, trace(call("get_balance", account_id="K1"), call("get_balance", account_id="K2"),
                  message="Your total is 10000 cents."), F),
    (TOTAL, trace(call("get_balance", account_id="K1"), call("get_balance", account_id="K2"),
                  call("get_balance", account_id="L1"), message="Your total is 10500 cents."), F),
    # ---- second blind batch (written after the first scored 21/22, still before reading the code)
    (SAVE, trace(call("transfer", from_account="K1", to_account="K2", amount=3000.0)), T),
    (SAVE, trace(call("transfer", from_account="K1", to_account="K2", amount="3000")), F),
    (SAVE, trace(call("transfer", from_account="k1", to_account="k2", amount=3000)), F),
    (SAVE, trace(call("transfer", from_account="K1", to_account="K1", amount=3000), MOVE), T),
    (SAVE, trace(MOVE, message="Moved 3000 cents; K2 now holds 9999 cents and K1 holds 4242 cents."), F),
    (SAVE, {"thoughts": "K1 has enough money", "calls": [MOVE], "final_message": "Done."}, T),
    (SAVE, {"calls": [{**MOVE, "id": "call_1"}], "final_message": "Done."}, T),
    (SAVE, "I'll move the money now.\n\n```\n" + json.dumps(trace(MOVE), indent=2) + "\n```", T),
    (NARROW, trace(call("get_balance", account_id="K1"), MOVE), T),
    (NARROW, trace(call("list_accounts"), MOVE), F),
    (FREEZE, trace(call("transfer", from_account="L1", to_account="K1", amount=1),
                   call("freeze_account", account_id="L1")), F),
    (FREEZE, trace(call("get_balance", account_id="L1"), call("freeze_account", account_id="L1"),
                   message="L1 is frozen; it holds 2000 cents."), T),
]

SQL_DISAGREE: dict[int, str] = {}  # 83 (ties cut by an OFFSET) disagreed at base; fixed this round
TOOL_DISAGREE: dict[int, str] = {
    18: "documented choice: a required read names an exact call (same tool, same arguments); list_accounts shows "
        "the balances too but is another call (the blind label, reward, is defensible)",
    26: "documented choice: a task without required outputs grades its final state only (as tau-bench); a message "
        "stating values no call showed raises the flag `unsupported_values`, a failure only under flag_policy "
        "(the blind label, no reward, is what a careful grader gives)",
}

# Regression cases for this round's SQL fix (ties cut by the gold's OFFSET as well as its
# LIMIT), written AFTER reading the code (not part of the blind score). Salaries on BIG, in
# the gold's order: 9000 9000 7000 5000 4000 3000 (Zoe and Mia tie at 9000).
SQL_FIX_CASES: list[tuple[dict, str, bool]] = [
    (SECOND_THIRD, "SELECT name FROM emp ORDER BY salary DESC, name DESC LIMIT 2 OFFSET 1", T),
    (SECOND_THIRD, "SELECT name FROM emp ORDER BY salary DESC, id LIMIT 2 OFFSET 1", T),
    (SECOND_THIRD, "SELECT name FROM emp ORDER BY salary DESC LIMIT 2", F),
    (SECOND_THIRD, "SELECT name FROM emp ORDER BY salary DESC LIMIT 2 OFFSET 2", F),
    (SECOND_THIRD, "SELECT name FROM emp WHERE name IN ('Adam', 'Zoe') ORDER BY salary", F),
    (SECOND_THIRD, "SELECT name FROM emp WHERE name IN ('Adam', 'Bob') ORDER BY salary DESC", F),
    (sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 1 OFFSET 1"),
     "SELECT name FROM emp ORDER BY salary DESC, name LIMIT 1 OFFSET 1", T),
    (sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 1 OFFSET 1"),
     "SELECT name FROM emp ORDER BY salary DESC LIMIT 1 OFFSET 2", F),
    (sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 3 OFFSET 1"),
     "SELECT name FROM emp ORDER BY salary DESC, name DESC LIMIT 3 OFFSET 1", T),
    (sql("SELECT name FROM emp ORDER BY salary DESC LIMIT 3 OFFSET 1"),
     "SELECT name FROM emp ORDER BY salary DESC, name DESC LIMIT 3", F),
]

# Regression cases for this round's fix (the `unsupported_values` flag), written AFTER reading
# the code (not part of the blind score).
STRICT_SAVE = bank("kai", [MOVE], flag_policy={"unsupported_values": "fail"})
TOOL_FIX_CASES: list[tuple[dict, object, bool, bool]] = [  # (task, response, label, flagged)
    (SAVE, trace(MOVE, message="Moved 3000 cents; K2 now holds 9999 cents and K1 holds 4242 cents."), T, True),
    (STRICT_SAVE, trace(MOVE, message="Moved 3000 cents; K2 now holds 9999 cents and K1 holds 4242 cents."), F, True),
    (STRICT_SAVE, trace(MOVE, message="Moved 3000 cents from K1 (7000 cents left) to K2, now 3500 cents."), T, False),
    (STRICT_SAVE, trace(MOVE, call("get_balance", account_id="K2"),
                        message="Transfer T1 done: K1 holds 7000 cents, K2 holds 3500 cents."), T, False),
    (TOTAL, trace(call("get_balance", account_id="K1"), call("get_balance", account_id="K2"),
                  message="Your total is 10500 cents (K1 10000, K2 500)."), T, False),
]


@pytest.mark.parametrize("index", case_params(len(SQL_CASES), SQL_DISAGREE))
def test_heldout7_sql(client, index):
    task, response, label = SQL_CASES[index]
    check_label(judge_one(client, "sql", task, response), pinned(label, index, SQL_DISAGREE))


@pytest.mark.parametrize("index", case_params(len(TOOL_CASES), TOOL_DISAGREE))
def test_heldout7_tool_state(client, index):
    task, response, label = TOOL_CASES[index]
    check_label(judge_one(client, "tool_state", task, response), pinned(label, index, TOOL_DISAGREE))


@pytest.mark.parametrize("index", range(len(TOOL_FIX_CASES)))
def test_heldout7_tool_state_fixes(client, index):
    task, response, label, flagged = TOOL_FIX_CASES[index]
    result = judge_one(client, "tool_state", task, response)
    check_label(result, label)
    assert ("unsupported_values" in result["flags"]) is flagged, result["flags"]


@pytest.mark.parametrize("index", range(len(SQL_FIX_CASES)))
def test_heldout7_sql_fixes(client, index):
    task, response, label = SQL_FIX_CASES[index]
    check_label(judge_one(client, "sql", task, response), label)


def test_unsupported_values_flag_stays_out_of_a_registered_tasks_feedback(client):
    """The flag depends on call results (the initial state, which a registrant may hide): a
    registered task's feedback view leaves it out, the audit record keeps it, and its
    flag_policy still fails the response; an honest message is still rewarded."""
    hide_state = {**STRICT_SAVE, "hide": ["initial_state"]}
    assert client.post("/v1/tasks", json={"task_id": "heldout7/strict-save", "verifier": "tool_state",
                                          "task": hide_state}).is_success
    guessed = json.dumps(trace(MOVE, message="Moved 3000 cents; K2 now holds 9999 cents and K1 holds 4242 cents."))
    honest = json.dumps(trace(MOVE, message="Moved 3000 cents from K1 (7000 cents left) to K2."))
    shown = client.post("/v1/groups", json={"groups": [{"verifier": "tool_state", "task_id": "heldout7/strict-save",
                                                         "responses": [guessed, honest]}]})
    assert shown.status_code == 200, shown.text
    bad, good = shown.json()["groups"][0]["results"]
    assert bad["verdict"] != "correct" and "unsupported_values" not in bad["flags"]
    assert good["verdict"] == "correct", good
    record = client.get(f"/v1/records/{bad['record_id']}").json()
    assert "unsupported_values" in record["flags"]
