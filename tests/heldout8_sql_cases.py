"""Round 8's held-out SQL answers, written blind from docs/sql_verifier.md and the README.

Two instances with different data (department ids swapped, ties, NULLs, mixed-case text),
so a statement fitted to one instance's rows fails on the other.
"""

from __future__ import annotations

from typing import Any

# X: incorrect (a wrong answer)
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"

SCHEMA = """
CREATE TABLE dept(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES dept(id),
                 salary INTEGER NOT NULL, manager_id INTEGER, city TEXT);
CREATE TABLE sales(id INTEGER PRIMARY KEY, emp_id INTEGER NOT NULL, amount REAL, day TEXT NOT NULL);
"""

INSTANCE_1 = """
INSERT INTO dept VALUES (1, 'Eng'), (2, 'Ops'), (3, 'Legal');
INSERT INTO emp VALUES (1, 'Ann', 1, 100, NULL, 'Paris'), (2, 'Bob', 1, 80, 1, 'paris'),
  (3, 'Cid', 2, 80, 1, 'London'), (4, 'Dee', NULL, 70, 3, NULL), (5, 'Eve', 2, 120, 1, 'London'),
  (6, 'Fay', 1, 80, 2, 'Berlin');
INSERT INTO sales VALUES (1, 2, 10.5, '2024-01-01'), (2, 2, 20.25, '2024-01-02'), (3, 3, 5.0, '2024-01-01'),
  (4, 5, NULL, '2024-01-03'), (5, 3, 5.0, '2024-01-05');
"""

INSTANCE_2 = """
INSERT INTO dept VALUES (1, 'Ops'), (2, 'Eng');
INSERT INTO emp VALUES (1, 'Gus', 2, 95, NULL, 'Rome'), (2, 'Hal', 1, 90, 1, 'ROME'), (3, 'Ivy', 1, 90, 1, NULL);
INSERT INTO sales VALUES (1, 1, 1.1, '2024-02-01'), (2, 1, 2.2, '2024-02-01'), (3, 3, 0.1, '2024-02-02'),
  (4, 3, 0.2, '2024-02-03');
"""


def task(gold: str, **changes: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "instances": [INSTANCE_1, INSTANCE_2], "gold": gold, **changes}


def sql(statement: str) -> str:
    return f"Here is the query.\n\n```sql\n{statement}\n```\n"


JOIN = "SELECT e.name, d.name FROM emp e JOIN dept d ON d.id = e.dept_id"
PER_DEPT = "SELECT d.name, COUNT(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.id"
TOP_PER_DEPT = (
    "SELECT d.name, e.name, e.salary FROM emp e JOIN dept d ON d.id = e.dept_id "
    "WHERE e.salary = (SELECT MAX(x.salary) FROM emp x WHERE x.dept_id = e.dept_id)"
)
CITIES_LOWER = "SELECT DISTINCT lower(city) FROM emp WHERE city IS NOT NULL"
SALES_PER_EMP = "SELECT emp_id, ROUND(SUM(amount), 2) FROM sales GROUP BY emp_id"
ABOVE_MANAGER = "SELECT e.name FROM emp e JOIN emp m ON m.id = e.manager_id WHERE e.salary > m.salary"
BY_SALARY_NAME = "SELECT name, salary FROM emp ORDER BY salary DESC, name"
BY_SALARY = "SELECT name FROM emp ORDER BY salary DESC"
TOP_TWO = "SELECT name, salary FROM emp ORDER BY salary DESC LIMIT 2"
NOT_ENG = "SELECT name FROM emp WHERE dept_id <> (SELECT id FROM dept WHERE name = 'Eng') OR dept_id IS NULL"
EMPTY_DEPTS = "SELECT name FROM dept d WHERE NOT EXISTS (SELECT 1 FROM emp e WHERE e.dept_id = d.id)"
CITIES = "SELECT DISTINCT city FROM emp WHERE city IS NOT NULL"
AVG_SALARY = "SELECT dept_id, AVG(salary) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"
HEADCOUNT = "SELECT COUNT(*) FROM emp"
PARIS = "SELECT name FROM emp WHERE lower(city) = 'paris'"
RUNNING = "SELECT id, SUM(amount) OVER (ORDER BY id) FROM sales ORDER BY id"
BIG_DEPTS = "SELECT dept_id FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id HAVING COUNT(*) > 1"
MANAGERS_OR_SELLERS = "SELECT manager_id FROM emp WHERE manager_id IS NOT NULL UNION SELECT emp_id FROM sales"
LABELS = "SELECT name || ' (' || city || ')' FROM emp WHERE city IS NOT NULL"
PER_DAY = "SELECT day, COUNT(*) FROM sales GROUP BY day ORDER BY day"
RAISE_OPS = "UPDATE emp SET salary = salary * 11 / 10 WHERE dept_id = (SELECT id FROM dept WHERE name = 'Ops')"

SQL_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("join_comma_where", task(JOIN), sql("SELECT emp.name, dept.name FROM emp, dept WHERE emp.dept_id = dept.id"), C),
    ("join_inner_ordered_unasked", task(JOIN),
     sql("SELECT e.name AS employee, d.name AS department\n"
         "FROM emp AS e INNER JOIN dept AS d ON e.dept_id = d.id\nORDER BY e.name;"), C),
    ("join_left_keeps_null", task(JOIN),
     sql("SELECT e.name, d.name FROM emp e LEFT JOIN dept d ON d.id = e.dept_id"), X),
    ("join_columns_swapped", task(JOIN), sql("SELECT d.name, e.name FROM emp e JOIN dept d ON d.id = e.dept_id"), X),
    ("count_correlated", task(PER_DEPT),
     sql("SELECT name, (SELECT COUNT(*) FROM emp WHERE emp.dept_id = dept.id) FROM dept"), C),
    ("count_star_left_join", task(PER_DEPT),
     sql("SELECT d.name, COUNT(*) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id GROUP BY d.name"), X),
    ("count_inner_join_drops_empty", task(PER_DEPT),
     sql("SELECT d.name, COUNT(*) FROM dept d JOIN emp e ON e.dept_id = d.id GROUP BY d.name"), X),
    ("top_rank_cte", task(TOP_PER_DEPT),
     sql("WITH r AS (SELECT e.*, RANK() OVER (PARTITION BY dept_id ORDER BY salary DESC) AS rk FROM emp e)\n"
         "SELECT d.name, r.name, r.salary FROM r JOIN dept d ON d.id = r.dept_id WHERE rk = 1"), C),
    ("top_row_number_drops_tie", task(TOP_PER_DEPT),
     sql("WITH r AS (SELECT e.*, ROW_NUMBER() OVER (PARTITION BY dept_id ORDER BY salary DESC) AS rn FROM emp e)\n"
         "SELECT d.name, r.name, r.salary FROM r JOIN dept d ON d.id = r.dept_id WHERE rn = 1"), X),
    ("cities_group_by_lower", task(CITIES_LOWER),
     sql("SELECT LOWER(city) c FROM emp WHERE city IS NOT NULL GROUP BY c"), C),
    ("cities_case_kept", task(CITIES_LOWER), sql("SELECT DISTINCT city FROM emp WHERE city IS NOT NULL"), X),
    ("cities_null_kept", task(CITIES_LOWER), sql("SELECT DISTINCT lower(city) FROM emp"), X),
    ("sales_subquery_round", task(SALES_PER_EMP),
     sql("SELECT emp_id, round(total, 2) FROM (SELECT emp_id, SUM(amount) AS total FROM sales GROUP BY emp_id) t"), C),
    ("sales_total_for_null_group", task(SALES_PER_EMP),
     sql("SELECT emp_id, ROUND(TOTAL(amount), 2) FROM sales GROUP BY emp_id"), X),
    ("sales_unrounded_float_noise", task(SALES_PER_EMP),
     sql("SELECT emp_id, SUM(amount) FROM sales GROUP BY emp_id"), C),
    ("manager_exists", task(ABOVE_MANAGER),
     sql("SELECT name FROM emp e WHERE EXISTS "
         "(SELECT 1 FROM emp m WHERE m.id = e.manager_id AND e.salary > m.salary)"), C),
    ("manager_greater_equal", task(ABOVE_MANAGER),
     sql("SELECT e.name FROM emp e JOIN emp m ON m.id = e.manager_id WHERE e.salary >= m.salary"), X),
    ("order_positional", task(BY_SALARY_NAME), sql("SELECT name, salary FROM emp ORDER BY 2 DESC, 1"), C),
    ("order_ascending", task(BY_SALARY_NAME), sql("SELECT name, salary FROM emp ORDER BY salary, name"), X),
    ("order_ties_other_tiebreak", task(BY_SALARY), sql("SELECT name FROM emp ORDER BY salary DESC, name DESC"), C),
    ("limit_tie_other_row", task(TOP_TWO),
     sql("SELECT name, salary FROM emp ORDER BY salary DESC, id DESC LIMIT 2"), C),
    ("limit_dense_rank_more_rows", task(TOP_TWO),
     sql("SELECT name, salary FROM (SELECT name, salary, DENSE_RANK() OVER (ORDER BY salary DESC) AS dr FROM emp) "
         "WHERE dr <= 2 ORDER BY salary DESC"), X),
    ("null_coalesce", task(NOT_ENG),
     sql("SELECT name FROM emp WHERE COALESCE(dept_id, -1) != (SELECT id FROM dept WHERE name = 'Eng')"), C),
    ("null_dropped_by_not_equal", task(NOT_ENG),
     sql("SELECT name FROM emp WHERE dept_id != (SELECT id FROM dept WHERE name = 'Eng')"), X),
    ("hard_coded_dept_id", task(NOT_ENG), sql("SELECT name FROM emp WHERE dept_id IS NOT 1"), X),
    ("empty_left_join_null", task(EMPTY_DEPTS),
     sql("SELECT d.name FROM dept d LEFT JOIN emp e ON e.dept_id = d.id WHERE e.id IS NULL"), C),
    ("empty_not_in_with_null", task(EMPTY_DEPTS),
     sql("SELECT name FROM dept WHERE id NOT IN (SELECT dept_id FROM emp)"), X),
    ("empty_not_in_filtered", task(EMPTY_DEPTS),
     sql("SELECT name FROM dept WHERE id NOT IN (SELECT dept_id FROM emp WHERE dept_id IS NOT NULL)"), C),
    ("duplicates_dropped", task(CITIES), sql("SELECT city FROM emp WHERE city IS NOT NULL GROUP BY city"), C),
    ("duplicates_kept", task(CITIES), sql("SELECT city FROM emp WHERE city IS NOT NULL"), X),
    ("avg_integer_division", task(AVG_SALARY),
     sql("SELECT dept_id, SUM(salary) / COUNT(*) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), X),
    ("avg_real_division", task(AVG_SALARY),
     sql("SELECT dept_id, SUM(salary) * 1.0 / COUNT(salary) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), C),
    ("count_as_real", task(HEADCOUNT), sql("SELECT CAST(COUNT(*) AS REAL) FROM emp"), C),
    ("count_as_text", task(HEADCOUNT), sql("SELECT CAST(COUNT(*) AS TEXT) FROM emp"), X),
    ("nocase_collation", task(PARIS), sql("SELECT name FROM emp WHERE city = 'Paris' COLLATE NOCASE"), C),
    ("like_case_insensitive", task(PARIS), sql("SELECT name FROM emp WHERE city LIKE 'paris'"), C),
    ("case_sensitive_equals", task(PARIS), sql("SELECT name FROM emp WHERE city = 'Paris'"), X),
    ("running_total_subquery", task(RUNNING),
     sql("SELECT s.id, (SELECT SUM(t.amount) FROM sales t WHERE t.id <= s.id) FROM sales s ORDER BY s.id"), C),
    ("running_total_unordered_window", task(RUNNING),
     sql("SELECT id, SUM(amount) OVER (ORDER BY id DESC) FROM sales ORDER BY id"), X),
    ("having_without_null_filter", task(BIG_DEPTS),
     sql("SELECT dept_id FROM emp GROUP BY dept_id HAVING COUNT(*) > 1"), C),
    ("having_at_least_one", task(BIG_DEPTS),
     sql("SELECT dept_id FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id HAVING COUNT(*) >= 1"), X),
    ("union_all_duplicates", task(MANAGERS_OR_SELLERS),
     sql("SELECT manager_id FROM emp WHERE manager_id IS NOT NULL UNION ALL SELECT emp_id FROM sales"), X),
    ("union_spelled_in", task(MANAGERS_OR_SELLERS),
     sql("SELECT DISTINCT id FROM emp WHERE id IN (SELECT manager_id FROM emp) "
         "OR id IN (SELECT emp_id FROM sales)"), C),
    ("printf_labels", task(LABELS), sql("SELECT printf('%s (%s)', name, city) FROM emp WHERE city IS NOT NULL"), C),
    ("per_day_positional", task(PER_DAY), sql("SELECT day, COUNT(*) AS n FROM sales GROUP BY 1 ORDER BY 1"), C),
    ("per_day_descending", task(PER_DAY), sql("SELECT day, COUNT(*) FROM sales GROUP BY day ORDER BY day DESC"), X),
    ("draft_then_final_block", task(JOIN),
     "First try:\n```sql\nSELECT name FROM emp\n```\nThat misses departments. Final:\n```sql\n" + JOIN + ";\n```", C),
    ("query_then_drop", task(JOIN), sql(JOIN + "; DROP TABLE emp;"), V),
    ("query_task_delete", task(JOIN), sql("DELETE FROM emp WHERE dept_id IS NULL"), V),
    ("raise_in_subquery", task(RAISE_OPS, mode="mutation"),
     sql("UPDATE emp SET salary = salary + salary / 10 WHERE dept_id IN (SELECT id FROM dept WHERE name = 'Ops')"), C),
    ("raise_hard_coded_id", task(RAISE_OPS, mode="mutation"),
     sql("UPDATE emp SET salary = salary * 11 / 10 WHERE dept_id = 2"), X),
    ("raise_float_multiplier", task(RAISE_OPS, mode="mutation"),
     sql("UPDATE emp SET salary = salary * 1.1 WHERE dept_id = (SELECT id FROM dept WHERE name = 'Ops')"), C),
    ("raise_two_statements", task(RAISE_OPS, mode="mutation"),
     sql(RAISE_OPS + ";\nUPDATE emp SET salary = 0 WHERE dept_id IS NULL;"), V),
]


# A second blind batch, Postgres dialect (written before any SQL verifier code was read).
def pg_task(gold: str, **changes: Any) -> dict[str, Any]:
    return task(gold, dialect="postgres", **changes)


PG_SALES = "SELECT emp_id, ROUND(SUM(amount)::numeric, 2) FROM sales GROUP BY emp_id"
PG_HIGH = ("SELECT dept_id, SUM(CASE WHEN salary >= 90 THEN 1 ELSE 0 END) FROM emp "
           "WHERE dept_id IS NOT NULL GROUP BY dept_id")
PG_NULLS_FIRST = "SELECT name, manager_id FROM emp ORDER BY manager_id NULLS FIRST, name"
PG_FLAG = "SELECT name, salary > 85 FROM emp"
PG_AVG = "SELECT dept_id, AVG(salary) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"

PG_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("pg_ilike", pg_task(PARIS), sql("SELECT name FROM emp WHERE city ILIKE 'paris'"), C),
    ("pg_distinct_on_drops_tie", pg_task(TOP_PER_DEPT),
     sql("SELECT DISTINCT ON (e.dept_id) d.name, e.name, e.salary FROM emp e JOIN dept d ON d.id = e.dept_id "
         "ORDER BY e.dept_id, e.salary DESC"), X),
    ("pg_float_average", pg_task(PG_AVG),
     sql("SELECT dept_id, SUM(salary)::float / COUNT(*) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), C),
    ("pg_numeric_average", pg_task(PG_AVG),
     sql("SELECT dept_id, SUM(salary)::numeric / COUNT(*) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), C),
    ("pg_rounded_average", pg_task(PG_AVG),
     sql("SELECT dept_id, ROUND(AVG(salary), 2) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), X),
    ("pg_integer_average", pg_task(PG_AVG),
     sql("SELECT dept_id, SUM(salary) / COUNT(*) FROM emp WHERE dept_id IS NOT NULL GROUP BY dept_id"), X),
    ("pg_unrounded_float_sum", pg_task(PG_SALES), sql("SELECT emp_id, SUM(amount) FROM sales GROUP BY emp_id"), C),
    ("pg_filter_clause", pg_task(PG_HIGH),
     sql("SELECT dept_id, COUNT(*) FILTER (WHERE salary >= 90) FROM emp WHERE dept_id IS NOT NULL GROUP BY 1"), C),
    ("pg_nulls_default_last", pg_task(PG_NULLS_FIRST),
     sql("SELECT name, manager_id FROM emp ORDER BY manager_id, name"), X),
    ("pg_nulls_first_by_boolean", pg_task(PG_NULLS_FIRST),
     sql("SELECT name, manager_id FROM emp ORDER BY manager_id IS NOT NULL, manager_id, name"), C),
    ("pg_boolean_as_integer", pg_task(PG_FLAG),
     sql("SELECT name, CASE WHEN salary > 85 THEN 1 ELSE 0 END FROM emp"), X),
    ("pg_boolean_spelled_case", pg_task(PG_FLAG),
     sql("SELECT name, CASE WHEN salary > 85 THEN true ELSE false END FROM emp"), C),
    ("pg_update_from", pg_task(RAISE_OPS, mode="mutation"),
     sql("UPDATE emp SET salary = salary * 11 / 10 FROM dept WHERE dept.id = emp.dept_id AND dept.name = 'Ops'"), C),
    ("pg_delete_in_cte", pg_task(JOIN),
     sql("WITH gone AS (DELETE FROM emp WHERE dept_id IS NULL RETURNING id) "
         "SELECT e.name, d.name FROM emp e JOIN dept d ON d.id = e.dept_id"), V),
    ("pg_string_concat_function", pg_task(LABELS),
     sql("SELECT concat(name, ' (', city, ')') FROM emp WHERE city IS NOT NULL"), C),
    ("pg_concat_function_keeps_null_rows", pg_task(LABELS),
     sql("SELECT concat(name, ' (', city, ')') FROM emp"), X),
]
