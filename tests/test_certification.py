"""Task certification (POST /v1/tasks/certify, `assay tasks certify`) and the verifier release
gate (`assay verifier diff`, /v1/verifiers/{name}/diff), through HTTP and the CLI.

Each family: a sound task is certified; a broken one (a gold that cannot be parsed, tests that
`pass` satisfies, a flaky test, a gold that `SELECT 1` matches, no way to reach the state) is
quarantined with the reason, and the sound task beside it in the same request still certifies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from service.testing.ui import sign_in
from tests.conftest import REPO
from verifiers.tool_state.examples import transfer_task

ADD_TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n"
ADD_REFERENCE = "```python\ndef add(a, b):\n    return a + b\n```"
# Half the time the hidden test fails whatever the code does: a flaky task.
FLAKY_TESTS = ("import os\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
               "    assert os.urandom(1)[0] < 128\n")
EMP_SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, salary INT);"
EMP_ROWS = ["INSERT INTO emp VALUES (1,'ann',200),(2,'bob',50),(3,'cy',300),(4,'dan',120);",
            "INSERT INTO emp VALUES (1,'eve',10),(2,'fay',500);"]
# The Metamath book's demo0 database: th1 proves t = t.
DEMO0 = (REPO / "tests" / "data" / "demo0.mm").read_text()


@pytest.fixture(scope="module")
def client(app_server: AppServer) -> Iterator[httpx.Client]:
    with app_server.client() as c:
        yield c


def certify(client: httpx.Client, tasks: list[dict[str, Any]], runs: int = 2) -> list[dict[str, Any]]:
    response = client.post("/v1/tasks/certify", json={"tasks": tasks, "runs": runs})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["certified"] + body["quarantined"] == len(tasks)
    return body["certificates"]


def probe(cert: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in cert["probes"] if p["name"] == name)


def test_math_sound_golds_certify_and_an_unparseable_gold_is_quarantined(client: httpx.Client) -> None:
    half, zero, broken = certify(client, [
        {"verifier": "math", "task": {"answer": "\\frac{1}{2}"}},
        {"verifier": "math", "task": {"answer": "0", "prompt": "What is 3 - 3?"}},
        {"verifier": "math", "task": {"answer": "\\frac{1}{"}},
    ])
    assert half["status"] == "certified", half["reasons"]
    assert [r["verdict"] for r in half["reference_runs"]] == ["correct", "correct"]
    assert {p["name"] for p in half["probes"]} >= {"empty", "wrong_value", "hedge", "constant_0", "constant_1"}
    assert all(p["reward"] == 0.0 for p in half["probes"])
    assert probe(half, "hedge")["verdict"] == "invalid_format"
    # The constant 0 is the gold itself here: excused, not counted against the task.
    assert zero["status"] == "certified", zero["reasons"]
    assert probe(zero, "constant_0")["excused"] is True
    assert probe(zero, "prompt_copied")["reward"] == 0.0
    assert broken["status"] == "quarantined"
    assert broken["reasons"][0].startswith("task_invalid: task.answer")


def test_code_tests_that_pass_satisfies_or_that_flake_are_quarantined(client: httpx.Client) -> None:
    sound, hollow, flaky, missing = certify(client, [
        {"verifier": "code", "task": {"entry_point": "add", "tests": ADD_TESTS,
                                      "visible_tests": "def check(candidate):\n    assert candidate(2, 2) == 4\n"},
         "reference": ADD_REFERENCE},
        {"verifier": "code", "task": {"entry_point": "add", "tests": "def check(candidate):\n    candidate(1, 2)\n"},
         "reference": ADD_REFERENCE},
        {"verifier": "code", "task": {"entry_point": "add", "tests": FLAKY_TESTS}, "reference": ADD_REFERENCE},
        {"verifier": "code", "task": {"entry_point": "add", "tests": ADD_TESTS}},
    ], runs=12)
    assert sound["status"] == "certified", sound["reasons"]
    assert {p["name"] for p in sound["probes"]} == {"pass", "sys_exit", "os_exit", "raise_system_exit",
                                                     "always_equal", "visible_examples_hardcoded"}
    assert all(p["reward"] == 0.0 for p in sound["probes"]), sound["probes"]
    assert hollow["status"] == "quarantined"
    assert "probe_rewarded: pass earned 1 (correct)" in hollow["reasons"]
    # 12 runs of a coin flip: all alike once in 2,048.
    assert flaky["status"] == "quarantined"
    assert any(r.startswith(("flaky", "reference_failed")) for r in flaky["reasons"]), flaky
    assert missing["status"] == "quarantined"
    assert missing["reasons"] == ["no_reference: the code family needs a `reference` for this task"]


def test_a_reference_that_needs_most_of_the_time_limit_is_quarantined(client: httpx.Client) -> None:
    slow = "```python\nimport time\n\ndef add(a, b):\n    time.sleep(1.6)\n    return a + b\n```"
    (cert,) = certify(client, [{"verifier": "code", "reference": slow, "task": {
        "entry_point": "add", "tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "time_limit_s": 2}}])
    assert cert["status"] == "quarantined"
    assert [r["verdict"] for r in cert["reference_runs"]] == ["correct", "correct"]
    assert cert["reasons"][0].startswith("slow_reference: the reference took"), cert["reasons"]


def test_io_task_with_visible_examples_only_hardcoded_is_certified(client: httpx.Client) -> None:
    (cert,) = certify(client, [{"verifier": "code", "task": {
        "io_cases": [{"stdin": "3 4\n", "stdout": "7\n"}, {"stdin": "10 -2\n", "stdout": "8\n"}],
        "visible_io_cases": [{"stdin": "1 1\n", "stdout": "2\n"}]},
        "reference": "```python\na, b = map(int, input().split())\nprint(a + b)\n```"}])
    assert cert["status"] == "certified", cert["reasons"]
    assert probe(cert, "visible_examples_hardcoded")["verdict"] == "incorrect"


def test_sql_gold_that_select_1_matches_and_untestable_order_are_quarantined(client: httpx.Client) -> None:
    sound, constant, order = certify(client, [
        {"verifier": "sql", "task": {"schema": EMP_SCHEMA, "instances": EMP_ROWS,
                                     "gold": "SELECT name FROM emp WHERE salary > 100 ORDER BY salary DESC"}},
        {"verifier": "sql", "task": {"schema": EMP_SCHEMA, "instances": EMP_ROWS, "gold": "SELECT 1"}},
        # Rows were inserted in id order: a query without the ORDER BY returns them the same way.
        {"verifier": "sql", "task": {"schema": EMP_SCHEMA, "instances": EMP_ROWS,
                                     "gold": "SELECT name FROM emp ORDER BY id"}},
    ])
    assert sound["status"] == "certified", sound["reasons"]
    assert {p["name"] for p in sound["probes"]} == {"select_1", "select_all_emp", "gold_without_order"}
    assert constant["status"] == "quarantined"
    assert any(r.startswith("probe_rewarded: select_1") for r in constant["reasons"])
    assert order["status"] == "quarantined"
    assert any(r.startswith("probe_rewarded: gold_without_order") for r in order["reasons"])


def frozen_a3() -> dict[str, Any]:
    """A state the task states but gives no actions for (a customer cannot freeze accounts)."""
    state = transfer_task()["initial_state"]
    state["accounts"]["A3"]["frozen"] = True
    return state


def test_tool_state_reference_from_gold_actions_and_a_state_without_a_way(client: httpx.Client) -> None:
    sound, no_way = certify(client, [
        {"verifier": "tool_state", "task": transfer_task()},
        {"verifier": "tool_state", "task": transfer_task(gold_actions=[], expected_state=frozen_a3())},
    ])
    assert sound["status"] == "certified", sound["reasons"]
    assert probe(sound, "no_calls")["reward"] == 0.0
    assert probe(sound, "reference_reads_only")["reward"] == 0.0
    assert no_way["status"] == "quarantined"
    assert no_way["reasons"][0].startswith(("no_reference", "task_invalid"))


def test_proof_own_proof_certifies_and_probes_fail(client: httpx.Client) -> None:
    (cert,) = certify(client, [{"verifier": "proof", "task": {"database": "demo0.mm", "database_text": DEMO0,
                                                                "theorem": "th1"}}])
    assert cert["status"] == "certified", cert["reasons"]
    assert {p["name"] for p in cert["probes"]} == {"empty_proof", "unknown_step", "incomplete_proof"}
    assert all(p["reward"] == 0.0 for p in cert["probes"])


def test_bad_requests_name_the_field(client: httpx.Client) -> None:
    r = client.post("/v1/tasks/certify", json={"tasks": [{"verifier": "math", "task": {"answer": "1"}}], "runs": 1})
    assert r.status_code == 422 and "runs" in r.text
    r = client.post("/v1/tasks/certify", json={"tasks": [{"verifier": "math", "task": {"answr": "1"}}]})
    assert r.status_code == 422 and "tasks[0].task.answr" in r.text
    r = client.post("/v1/tasks/certify", json={"tasks": [{"verifier": "math", "task_id": "nope/never"}]})
    assert r.status_code == 404 and "tasks[0].task_id" in r.text


def test_registered_task_certificate_is_shown_and_hides_the_gold(app_server: AppServer,
                                                                 client: httpx.Client) -> None:
    marker = "zq_marker_7730911"
    task = {"schema": EMP_SCHEMA, "instances": EMP_ROWS,
            "gold": f"SELECT name FROM emp WHERE salary > 100 AND name <> '{marker}' ORDER BY salary DESC"}
    r = client.post("/v1/tasks", json={"task_id": "cert/emp", "verifier": "sql", "task": task, "certify": True})
    assert r.status_code == 201, r.text
    assert r.json()["certificate"]["status"] == "certified"
    reward_key = app_server.create_key("reward")
    with app_server.client(reward_key) as trainer:
        shown = trainer.get("/v1/tasks/cert/emp")
        again = trainer.post("/v1/tasks/certify", json={"tasks": [{"verifier": "sql", "task_id": "cert/emp"}]})
    assert shown.status_code == 200 and again.status_code == 200
    assert shown.json()["certificate"]["status"] == "certified"
    for text in (shown.text, again.text, r.text):
        assert marker not in text
    stats = client.get("/v1/tasks/stats", params={"task_id": "cert/emp"})
    assert stats.status_code == 200


@pytest.mark.slow
def test_service_refuses_uncertified_registered_tasks_when_told(tmp_path: Path) -> None:
    server = AppServer(app_settings(tmp_path, require_certified_tasks=True)).start()
    try:
        with server.client() as c:
            good = {"entry_point": "add", "tests": ADD_TESTS}
            hollow = {"entry_point": "add", "tests": "def check(candidate):\n    pass\n"}
            assert c.post("/v1/tasks", json={"task_id": "t/good", "verifier": "code", "task": good}).status_code == 201
            assert c.post("/v1/tasks", json={"task_id": "t/hollow", "verifier": "code", "task": hollow,
                                             "certify": True, "reference": ADD_REFERENCE}).status_code == 201
            body = {"groups": [{"verifier": "code", "task_id": "t/good", "responses": [ADD_REFERENCE]}]}
            refused = c.post("/v1/groups", json=body)
            assert refused.status_code == 422 and "groups[0].task" in refused.text and "not certified" in refused.text
            quarantined = c.post("/v1/groups", json={"groups": [{"verifier": "code", "task_id": "t/hollow",
                                                                 "responses": [ADD_REFERENCE]}]})
            assert quarantined.status_code == 422
            done = certify(c, [{"verifier": "code", "task_id": "t/good", "reference": ADD_REFERENCE}])
            assert done[0]["status"] == "certified"
            accepted = c.post("/v1/groups", json=body)
            assert accepted.status_code == 200 and accepted.json()["groups"][0]["rewards"] == [1.0]
            stats = c.get("/v1/tasks/stats").json()["tasks"]
            assert {s["task_id"]: s["certificate"] for s in stats}["t/good"] == "certified"
            # A `reward` key's certificate of a shared task is kept but does not count: it cannot quarantine it.
            wrong = "```python\ndef add(a, b):\n    return a * b\n```"
            with server.client(server.create_key("reward")) as trainer:
                mine = certify(trainer, [{"verifier": "code", "task_id": "t/good", "reference": wrong}])
            assert mine[0]["status"] == "quarantined" and mine[0]["counts"] is False
            assert c.get("/v1/tasks/t/good").json()["certificate"]["status"] == "certified"
            assert c.post("/v1/groups", json=body).status_code == 200
    finally:
        server.stop()


def cli_in_subprocess(server: AppServer, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `assay` as its own process (unlike service.testing.cli.run_cli, which runs it in-process)."""
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=server.env(), cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_cli_certify_reports_each_task_and_exits_4_when_any_is_quarantined(fresh_app: AppServer,
                                                                           tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(t) for t in [
        {"verifier": "math", "task": {"answer": "42"}},
        {"verifier": "sql", "task": {"schema": EMP_SCHEMA, "instances": EMP_ROWS, "gold": "SELECT count(*) FROM emp"}},
    ]) + "\n")
    done = cli_in_subprocess(fresh_app, "tasks", "certify", str(tasks))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["status"] for line in done.stdout.splitlines()] == ["certified", "certified"]
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"tasks": 2, "certified": 2, "quarantined": 0}
    tasks.write_text(json.dumps({"verifier": "math", "task": {"answer": "\\sqrt{"}}) + "\n")
    done = cli_in_subprocess(fresh_app, "tasks", "certify", str(tasks), "--out", str(tmp_path / "report.jsonl"))
    assert done.returncode == 4, done.stderr
    assert json.loads((tmp_path / "report.jsonl").read_text())["status"] == "quarantined"
    tasks.write_text("{not json\n")
    assert cli_in_subprocess(fresh_app, "tasks", "certify", str(tasks)).returncode == 2


@pytest.mark.slow
def test_verifier_diff_finds_no_flip_when_nothing_changed_and_flips_on_a_flaky_task(
        fresh_app: AppServer) -> None:
    with fresh_app.client() as c:
        wrong = "```python\ndef add(a, b):\n    return a - b\n```"
        steady = {"groups": [{"verifier": "code", "task": {"entry_point": "add", "tests": ADD_TESTS},
                              "responses": [ADD_REFERENCE, wrong, "no code here"]}]}
        assert c.post("/v1/groups", json=steady).status_code == 200
        done = cli_in_subprocess(fresh_app, "verifier", "diff", "--verifier", "code", "--sample", "50")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["replayed"] == 3 and report["reward_flips"] == 0 and report["verdict_flips"] == 0
        assert {(t["logged"], t["replayed"]) for t in report["transitions"]} == {
            ("correct", "correct"), ("incorrect", "incorrect"), ("invalid_format", "invalid_format")}
        # 24 coin flips logged, 24 replayed: every one the same once in 16 million.
        flaky = {"groups": [{"verifier": "code", "task": {"entry_point": "add", "tests": FLAKY_TESTS},
                             "responses": [ADD_REFERENCE] * 24}]}
        assert c.post("/v1/groups", json=flaky).status_code == 200
        done = cli_in_subprocess(fresh_app, "verifier", "diff", "--verifier", "code", "--sample", "100")
        assert done.returncode == 5, done.stderr
        report = json.loads(done.stdout)
        assert report["reward_flips"] > 0 and report["reward_flip_examples"]
        low, high = report["reward_flip_interval"]
        assert 0 < low <= report["reward_flip_rate"] <= high < 1
        # Over HTTP (audit scope), and listed beside the verifier's version.
        over_http = c.post("/v1/verifiers/code/diff", json={"sample": 100})
        assert over_http.status_code == 201 and over_http.json()["replayed"] == report["replayed"]
        latest = c.get("/v1/verifiers/code/diff").json()
        assert latest["id"] == over_http.json()["id"]
        listed = {v["name"]: v for v in c.get("/v1/verifiers").json()}
        assert listed["code"]["last_diff"]["id"] == latest["id"]
        assert listed["math"]["last_diff"] is None
        reward_key = fresh_app.create_key("reward")
        steady_record = c.get("/v1/records", params={"verdict": "correct", "limit": 1}).json()["records"][0]
        certify(c, [{"verifier": "code", "task": {"entry_point": "add", "tests": ADD_TESTS},
                     "reference": ADD_REFERENCE}])
    with fresh_app.client(reward_key) as trainer:
        assert trainer.post("/v1/verifiers/code/diff", json={"sample": 5}).status_code == 403
    # The viewer: the verifiers' gate, the report with links to its records, the task's certificates.
    auditor = sign_in(fresh_app, fresh_app.create_key("audit"))
    try:
        listing = auditor.get("/ui/verifiers")
        assert listing.status_code == 200 and "/ui/verifiers/code/diff" in listing.text
        report_page = auditor.get("/ui/verifiers/code/diff")
        assert report_page.status_code == 200
        assert f"/ui/records/{latest['reward_flip_examples'][0]}" in report_page.text
        assert auditor.get("/ui/verifiers/math/diff").status_code == 404
        record_page = auditor.get(f"/ui/records/{steady_record['id']}")
        assert 'class="cert c-certified"' in record_page.text
        task_page = auditor.get(f"/ui/tasks/{steady_record['task_hash']}")
        assert task_page.status_code == 200 and "certified" in task_page.text and "always_equal" in task_page.text
    finally:
        auditor.close()
