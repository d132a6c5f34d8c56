"""One response at its limit beside honest ones, for every verifier family: the hostile
response gets `timeout` (never `error`, never a reward), the honest ones still get their
reward, and the group takes at most the honest group's time plus the hostile response's
own limit (plus a generous margin: CI is a loaded 2-core machine).

Each hostile response here would run far past its limit if nothing stopped it: an SQLite
function call doing quadratic work inside one VM step (about 20 s unstopped), a sympy
expansion, an endless loop, a 600,000-step proof, a maximal tool trace. The groups go
through each verifier's `verify_many` on the real sandbox, on every backend in
ASSAY_TEST_BACKENDS.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from verifiers.base import Outcome, Verdict, VerifyContext
from verifiers.registry import get
from verifiers.tool_state import runner as tool_state_runner
from verifiers.tool_state.examples import GOLD_TRANSFER, honest_response, transfer_task
from verifiers.tool_state.wire import dumps_trace

# Beyond the hostile response's own limit: process starts and kills, and a loaded machine.
MARGIN_S = 6.0
# Math kills the resident server that parsed the hostile answer; the next answer then
# waits for a fresh one (on docker under load, several seconds with sympy's warm-up).
RESTART_MARGIN_S = 15.0


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox, reveal_hidden=True)


def timed(run: Callable[[], list[Outcome]]) -> tuple[list[Outcome], float]:
    started = time.monotonic()
    outcomes = run()
    return outcomes, time.monotonic() - started


def check_isolated(verifier: str, task, hostile: str, honest: list[str], limit_s: float, ctx,
                   margin_s: float = MARGIN_S) -> None:
    judge = get(verifier)
    judge.verify_many(task, honest, ctx)  # warm pools, caches and the gold
    alone, honest_s = timed(lambda: judge.verify_many(task, honest, ctx))
    assert all(o.verdict is Verdict.correct for o in alone), [o.evidence for o in alone]
    # The hostile response in the middle of the group: responses after it are judged too.
    group = honest[:1] + [hostile] + honest[1:]
    outcomes, group_s = timed(lambda: judge.verify_many(task, group, ctx))
    bad = outcomes.pop(1)
    assert bad.verdict is Verdict.timeout, (bad.verdict, bad.evidence)
    assert bad.reward(task) == 0.0
    for outcome in outcomes:
        assert outcome.verdict is Verdict.correct and outcome.reward(task) == 1.0, outcome.evidence
    assert group_s <= honest_s + limit_s + margin_s, (group_s, honest_s, limit_s)


def test_sql_statement_stuck_in_one_sqlite_step(ctx):
    task = get("sql").parse_task({
        "schema": "CREATE TABLE t(id INTEGER PRIMARY KEY, word TEXT);",
        "instances": ["INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c');", "INSERT INTO t VALUES (1,'z');",
                      "INSERT INTO t VALUES (5,'q'),(6,'r');"],
        "gold": "SELECT word FROM t", "timeout_s": 0.5})
    # instr() on megabyte strings: quadratic work inside one call, where SQLite's own
    # deadline cannot fire. Its limit: 0.5 s plus the watchdog's grace, on one instance
    # (a statement that timed out is not run again on the others).
    hostile = "SELECT instr(printf('%.*c', 900000, 'q'), printf('%.*c', 400000, 'q') || 'z') FROM t"
    honest = ["SELECT word FROM t", "```sql\nSELECT t.word FROM t;\n```", "SELECT word FROM t WHERE id > 0 -- all"]
    check_isolated("sql", task, hostile, honest, 0.5 + 0.25, ctx)


def test_sql_two_stuck_statements_cost_their_own_limits_only(ctx):
    task = get("sql").parse_task({
        "schema": "CREATE TABLE t(id INTEGER PRIMARY KEY, word TEXT);",
        "instances": ["INSERT INTO t VALUES (1,'a');", "INSERT INTO t VALUES (2,'b');"],
        "gold": "SELECT word FROM t", "timeout_s": 0.5})
    stuck = "SELECT instr(printf('%.*c', 900000, 'q'), printf('%.*c', 400000, 'q') || '{}') FROM t"
    judge = get("sql")
    judge.verify_many(task, ["SELECT word FROM t"], ctx)
    outcomes, took = timed(lambda: judge.verify_many(
        task, [stuck.format("x"), "SELECT word FROM t", stuck.format("y"), "SELECT t.word FROM t"], ctx))
    assert [o.verdict for o in outcomes] == [Verdict.timeout, Verdict.correct, Verdict.timeout, Verdict.correct]
    assert took <= 2 * (0.5 + 0.25) + MARGIN_S, took


def test_math_answer_whose_parse_runs_to_its_limit(ctx):
    task = get("math").parse_task({"answer": "x^2+2x+1", "timeout_s": 0.25})
    # Within every size cap the parser checks first (powers, expansions), yet its comparison
    # runs to the limit: a quotient of differences of high powers.
    hostile = r"The answer is \boxed{\frac{(x+1)^{190}-(x+2)^{190}}{(x+3)^{190}-(x+4)^{190}}}"
    honest = [r"\boxed{(x+1)^2}", r"so \boxed{x^2 + 2x + 1}", r"\boxed{1+2x+x^2}"]
    check_isolated("math", task, hostile, honest, 0.25, ctx, RESTART_MARGIN_S)


def test_code_candidate_that_never_ends(ctx):
    task = get("code").parse_task({"entry_point": "add", "time_limit_s": 1.0,
                                   "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n"})
    hostile = "```python\ndef add(a, b):\n    while True:\n        pass\n```"
    honest = ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(x, y):\n    return y + x\n```"]
    check_isolated("code", task, hostile, honest, 1.0, ctx)


def test_proof_that_runs_to_its_checking_limit(ctx):
    task = get("proof").parse_task({"system": "metamath", "database": "set.mm", "theorem": "mp2",
                                    "timeout_s": 0.02, "max_proof_steps": 1_000_000})
    # 600,000 steps that each push a hypothesis: only the end would show the stack is wrong.
    hostile = "$= " + "wps " * 600_000 + "$."
    honest = ["```metamath\n( wi ax-mp ) BCEABCGDFHH\n```",
              "$= wps wch mp2.2 wph wps wch wi mp2.1 mp2.3 ax-mp ax-mp $."]
    check_isolated("proof", task, hostile, honest, 0.02, ctx)


def test_tool_state_trace_whose_replay_runs_to_its_limit(ctx, monkeypatch):
    task = get("tool_state").parse_task(transfer_task(max_calls=2000, max_message_chars=100_000))
    honest = [honest_response(), dumps_trace([{"tool": "list_accounts", "args": {}}, GOLD_TRANSFER], "450 left")]
    # The largest traces a task allows replay in a fraction of a second: measured here, the limit
    # is set between an honest trace's time and that hostile trace's, so that only the hostile one
    # hits it. One timing of each is not enough on a loaded machine: a hostile replay once timed
    # at twice its usual cost set the limit above it (CI, docker). So the limit is a third of the
    # hostile trace's fastest of three timings, and at least three times an honest trace's slowest.
    verifier = get("tool_state")
    message = " ".join(f"A{i} {i},{i:03d}.5" for i in range(9000))[:99_000]
    hostile = dumps_trace([{"tool": "list_accounts", "args": {}}] * 1999 + [GOLD_TRANSFER], message)
    verifier.verify_many(task, honest, ctx)
    per_honest = max(timed(lambda: verifier.verify_many(task, honest, ctx))[1] for _ in range(3)) / len(honest)
    hostile_s = min(timed(lambda: verifier.verify_many(task, [hostile], ctx))[1] for _ in range(3))
    limit = hostile_s / 3
    assert limit >= 3 * per_honest, (hostile_s, per_honest)
    monkeypatch.setattr(tool_state_runner, "RESPONSE_TIMEOUT_S", limit)
    check_isolated("tool_state", task, hostile, honest, limit, ctx)
