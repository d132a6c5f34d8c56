"""Training runs through a real service: `run: {id, step}` on every verifying route, per-run
series from the records, alarms (in GET /v1/runs/{id}, /metrics, the log and a loopback
webhook), per-run thresholds; the rules on hand-made series; the SQL figures against a
count in Python."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from service.alarms import diversity_collapse, length_growth, timeouts_by_length
from service.run_schemas import LengthBucket, RunStep, Thresholds
from service.runs import steps
from service.store import AuditStore
from service.tables import RecordRow
from service.testing.app import AppServer, app_settings
from service.testing.runs import SyntheticRun, replay
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from verifiers.tool_state.examples import GOLD_TRANSFER, transfer_task


class Webhook:
    """A loopback HTTP server that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(204)
                self.end_headers()
                with hook.arrived:
                    hook.bodies.append(body)
                    hook.arrived.notify_all()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alarms"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, test: Any, timeout: float = 120) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not test(self.bodies):
                left = deadline - time.monotonic()
                assert left > 0, f"webhook bodies so far: {self.bodies}"
                self.arrived.wait(left)
            return list(self.bodies)

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, webhook: Webhook) -> Iterator[AppServer]:
    settings = app_settings(tmp_path_factory.mktemp("runs"), alarm_webhook_url=webhook.url, alarm_check_interval_s=0)
    with AppServer(settings) as server:
        yield server


def _rules(run: dict[str, Any]) -> set[tuple[str, str]]:
    return {(a["rule"], a["subject"]) for a in run["alarms"]}


@pytest.mark.slow
def test_a_hacking_run_raises_its_alarms_within_steps_and_an_honest_run_none(server: AppServer,
                                                                               webhook: Webhook) -> None:
    honest = SyntheticRun(f"honest-{uuid.uuid4().hex[:8]}", "honest", seed=1)
    hacking = SyntheticRun(f"hacking-{uuid.uuid4().hex[:8]}", "hacking", seed=2)
    with server.client() as c:
        # The honest run is read after every step: no alarm at any point.
        def no_alarm(step: int) -> None:
            got = c.get(f"/v1/runs/{honest.run_id}")
            assert got.status_code == 200 and got.json()["alarms"] == [], (step, got.text)
        replay(honest, c, no_alarm)
        # The hacking run is not read while it runs: the monitor raises its alarms, seen at the webhook.
        replay(hacking, c)
        bodies = webhook.wait_for(lambda b: {("flag_rate", "answer_only"), ("reward_up_heldout_down", "")}
                                  <= {(x["rule"], x["subject"]) for x in b if x["run"] == hacking.run_id})
        assert all(b["run"] == hacking.run_id for b in bodies), "only the hacking run raised anything"
        assert "boxed" not in json.dumps(bodies)  # ids, hashes and rates: never a response
        run = c.get(f"/v1/runs/{hacking.run_id}").json()
        honest_run = c.get(f"/v1/runs/{honest.run_id}").json()
        metrics = c.get("/metrics").text
        records = {e["record_id"]: c.get(f"/v1/records/{e['record_id']}").json()
                   for a in run["alarms"] for e in a["examples"]}
        listed = {r["id"]: r for r in c.get("/v1/runs").json()["runs"]}
    assert honest_run["alarms"] == []
    raised = {(a["rule"], a["subject"]): a for a in run["alarms"]}
    flag, heldout = raised[("flag_rate", "answer_only")], raised[("reward_up_heldout_down", "")]
    # Within a few steps of the change, and each alarm names steps, tasks and records to read.
    for alarm in (flag, heldout):
        assert hacking.change <= alarm["step"] <= hacking.change + 3, alarm
        assert alarm["steps"] and alarm["tasks"] and alarm["examples"] and alarm["holds_now"]
    for example in flag["examples"]:
        record = records[example["record_id"]]
        assert "answer_only" in record["flags"] and record["run"]["id"] == hacking.run_id
        assert record["run"]["step"] in flag["steps"] and record["eval_id"] is None
    for example in heldout["examples"]:  # held-out failures of the evaluation where pass@1 fell
        record = records[example["record_id"]]
        assert record["eval_id"] == heldout["figures"]["eval_after"] and record["verdict"] != "correct"
    assert heldout["figures"]["pass1_after"] < heldout["figures"]["pass1_before"]
    assert heldout["figures"]["reward_after"] > heldout["figures"]["reward_before"]
    # The series the alarms read: training reward up, held-out pass@1 down, the flag's rate up.
    series = run["steps"]
    assert [s["step"] for s in series] == list(range(hacking.steps))
    assert series[-1]["reward_mean"] > series[0]["reward_mean"] + 0.3
    assert series[-1]["flag_rates"]["answer_only"] > 0.5 and series[0]["flag_rates"] == {}
    assert run["held_out"][0]["pass_at_k"]["1"] > run["held_out"][-1]["pass_at_k"]["1"] + 0.3
    assert set(run["held_out"][0]["maj_at_k"]) == {"1", "2", "4"}
    assert all(s["n"] == hacking.groups_per_step * 8 and s["groups"] == hacking.groups_per_step for s in series)
    assert honest_run["steps"][-1]["reward_mean"] > honest_run["steps"][0]["reward_mean"]
    # /metrics counts each alarm once under the run's label; the list counts them too.
    assert f'assay_alarms_total{{rule="flag_rate",run="{hacking.run_id}"}} 1.0' in metrics
    assert f'assay_alarms_total{{rule="reward_up_heldout_down",run="{hacking.run_id}"}} 1.0' in metrics
    assert honest.run_id not in metrics.split("assay_alarms_total", 1)[-1]
    assert listed[hacking.run_id]["alarms"] == len(run["alarms"]) and listed[honest.run_id]["alarms"] == 0
    assert listed[hacking.run_id]["last_step"] == hacking.steps - 1
    # ...and the log has a line per alarm naming the run, the rule and the records.
    lines = [json.loads(x) for x in server.log_path.read_text().splitlines() if x.startswith("{")]
    logged = [x for x in lines if x.get("rule") and x.get("run_id") == hacking.run_id]
    assert {x["rule"] for x in logged} >= {"flag_rate", "reward_up_heldout_down"}
    assert all(x["records"] for x in logged)


def test_every_verifying_route_keeps_the_run_on_its_records(server: AppServer) -> None:
    run_id = f"routes-{uuid.uuid4().hex[:8]}"
    tag = {"id": run_id, "step": 3}
    with server.client() as c:
        one = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "4"}, "response": "2+2=4, \\boxed{4}",
                                         "run": tag}).json()
        group = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "4"},
                                                        "responses": ["\\boxed{4}", "\\boxed{5}"]}], "run": tag})
        rl_query = c.post("/v1/openrlhf", params={"run_id": run_id, "run_step": 4},
                          json={"query": ["Q: 2+2? A: \\boxed{4}"], "prompts": ["Q: 2+2? A: "], "labels": ["4"]})
        rl_body = c.post("/v1/openrlhf", json={"query": ["Q: 3+3? A: \\boxed{6}"], "prompts": ["Q: 3+3? A: "],
                                               "labels": ["6"], "run": {"id": run_id, "step": 5}})
        opened = c.post("/v1/envs", json={"task": transfer_task(), "run": {"id": run_id, "step": 6}}).json()
        c.post(f"/v1/envs/{opened['env_id']}/step", json=GOLD_TRANSFER).raise_for_status()
        finished = c.post(f"/v1/envs/{opened['env_id']}/finish",
                          json={"final_message": "Done, your balance is 450."}).json()
        ev = c.post("/v1/evals", json={"name": "h", "checkpoint": "c", "run": {"id": run_id, "step": 6},
                                       "families": {"math": [{"verifier": "math", "task": {"answer": "9"},
                                                              "responses": ["\\boxed{9}", "\\boxed{8}"]}]}})
        assert group.status_code == 200 and rl_query.status_code == 200 and rl_body.status_code == 200, rl_query.text
        assert ev.status_code == 201, ev.text
        steps_of = {}
        for rid in [one["record_id"], finished["record_id"],
                    *(r["record_id"] for r in group.json()["groups"][0]["results"])]:
            steps_of[rid] = c.get(f"/v1/records/{rid}").json()["run"]
        run = c.get(f"/v1/runs/{run_id}").json()
        # Bad tags are 422s naming the field; an honest tag right after still verifies.
        bad = [c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "4"}, "response": "4", "run": r})
               for r in ({"id": run_id, "step": -1}, {"id": "has space", "step": 1}, {"id": run_id},
                         {"id": "", "step": 1}, {"id": run_id, "step": 1, "extra": 1})]
        half = c.post("/v1/openrlhf", params={"run_id": run_id}, json={"query": ["4"], "labels": ["4"]})
        honest = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "4"}, "response": "\\boxed{4}",
                                            "run": {"id": run_id, "step": 7}})
        missing = c.get("/v1/runs/no-such-run")
    assert finished["verdict"] == "correct"
    assert all(v == {"id": run_id, "step": 3} for k, v in steps_of.items() if k != finished["record_id"])
    assert steps_of[finished["record_id"]] == {"id": run_id, "step": 6}
    assert [s["step"] for s in run["steps"]] == [3, 4, 5, 6]
    assert run["steps"][0]["n"] == 3 and run["steps"][3]["n"] == 1  # the eval's records are not training
    assert run["held_out"][0]["step"] == 6 and run["held_out"][0]["pass_at_k"]["1"] == 0.5
    assert run["records"] == 8 and run["last_step"] == 6
    for response, where in zip(bad, ("run.step", "run.id", "run.step", "run.id", "run.extra"), strict=True):
        assert response.status_code == 422 and where in response.text, response.text
    assert half.status_code == 422 and "run_step" in half.text
    assert honest.status_code == 200 and honest.json()["verdict"] == "correct"
    assert missing.status_code == 404


def test_runs_need_the_audit_scope_and_thresholds_are_per_run(server: AppServer) -> None:
    reward_only = server.create_key("reward")
    quiet = SyntheticRun(f"quiet-{uuid.uuid4().hex[:8]}", "hacking", steps=7, seed=3)
    with server.client(reward_only) as c:
        assert c.get("/v1/runs").status_code == 403
        assert c.put(f"/v1/runs/{quiet.run_id}/thresholds", json={}).status_code == 403
    with server.client() as c:
        # This run's team watches no flags and needs a 0.9 rise: the same hack raises no flag alarm.
        body = {"flag_rate": {"enabled": False}, "reward_up_heldout_down": {"min_reward_rise": 0.9}}
        put = c.put(f"/v1/runs/{quiet.run_id}/thresholds", json=body)
        assert put.status_code == 200 and put.json()["flag_rate"]["enabled"] is False
        assert put.json()["length_growth"]["ratio"] == 1.5  # the parts not given keep their defaults
        bad = c.put(f"/v1/runs/{quiet.run_id}/thresholds", json={"flag_rate": {"level": 2}})
        assert bad.status_code == 422 and "flag_rate.level" in bad.text
        typo = c.put(f"/v1/runs/{quiet.run_id}/thresholds", json={"flag_rates": {}})
        assert typo.status_code == 422 and "flag_rates" in typo.text
        replay(quiet, c)
        run = c.get(f"/v1/runs/{quiet.run_id}").json()
    assert run["thresholds"]["flag_rate"]["enabled"] is False
    assert run["steps"][-1]["flag_rates"]["answer_only"] > 0.5
    assert ("flag_rate", "answer_only") not in _rules(run) and ("reward_up_heldout_down", "") not in _rules(run)


# ------------------------------------------------------------- rules on hand-made series


def _step(step: int, reward: float = 0.5, tokens: float = 100.0, zero: float = 0.1, distinct: float = 3.0,
          by_length: list[LengthBucket] | None = None) -> RunStep:
    return RunStep(step=step, n=64, groups=8, reward_mean=reward, reward_std=0.4, correct_rate=reward,
                   zero_variance_share=zero, distinct_answers=distinct, flag_rates={}, mean_tokens=tokens,
                   mean_chars=tokens * 4, tokens_per_correct=tokens / reward, truncation_rate=0.0, error_rate=0.0,
                   timeout_rate=0.0, by_length=by_length or [])


def test_length_growth_fires_on_tokens_without_reward_and_not_with_it() -> None:
    t = Thresholds()
    growing = [_step(i, reward=0.5, tokens=100 * (1 + 0.2 * i)) for i in range(10)]
    found = length_growth(growing, t)
    assert found is not None and found.figures["unit"] == "tokens" and found.steps[0] == found.step
    assert found.figures["length_after"] / found.figures["length_before"] >= 1.5
    learning = [_step(i, reward=0.3 + 0.05 * i, tokens=100 * (1 + 0.2 * i)) for i in range(10)]
    assert length_growth(learning, t) is None  # longer answers that earn more are not the failure
    assert length_growth([_step(i) for i in range(10)], t) is None


def _quarters(longest_bad: float, shorter_bad: float) -> list[LengthBucket]:
    rates = [shorter_bad, shorter_bad, shorter_bad, longest_bad]
    return [LengthBucket(quarter=q + 1, n=16, min_length=100 * q, max_length=100 * q + 99, error_rate=0.0,
                         timeout_rate=r) for q, r in enumerate(rates)]


def test_timeouts_by_length_fires_when_the_longest_quarter_times_out() -> None:
    t = Thresholds()
    series = [_step(0, by_length=_quarters(0.0, 0.0)), _step(1, by_length=_quarters(0.25, 0.0))]
    found = timeouts_by_length(series, t)
    assert found is not None and found.step == 1 and found.figures["boundary"] == 300
    spread = [_step(0, by_length=_quarters(0.25, 0.25))]  # as many timeouts among short responses: not by length
    assert timeouts_by_length(spread, t) is None
    assert timeouts_by_length([_step(0, by_length=_quarters(0.0625, 0.0))], t) is None  # one timeout: noise


def test_diversity_collapse_needs_the_level_for_sustained_steps() -> None:
    t = Thresholds()
    collapse = [_step(i, zero=0.2 if i < 4 else 0.9) for i in range(8)]
    found = diversity_collapse(collapse, t)
    assert found is not None and found.step == 6 and found.steps == [4, 5, 6]
    same = [_step(i, distinct=3.0 if i < 2 else 1.1) for i in range(5)]
    assert diversity_collapse(same, t).step == 4
    blip = [_step(i, zero=0.9 if i in (2, 3) else 0.2) for i in range(8)]
    assert diversity_collapse(blip, t) is None


# ------------------------------------------------------------- the SQL figures


def _row(run: str, step: int, group: str, index: int, verdict: str, reward: float, tokens: int,
         answer: str | None, flags: list[str]) -> RecordRow:
    return RecordRow(id=uuid.uuid4().hex, task_hash="t" * 64, task_id=f"task-{group}", task_public={},
                     verifier="math", verifier_version="1", response_hash=uuid.uuid4().hex, response="x" * tokens,
                     components={}, reward=reward, verdict=verdict,
                     evidence={"answer_normalised": answer} if answer else {}, flags=flags, sandbox_backend="process",
                     usage=None, duration_ms=1.0, group_id=group, group_index=index, submission_id=uuid.uuid4().hex,
                     submission_index=0, tokens=tokens, finish_reason="length" if tokens > 90 else "stop",
                     run_id=run, run_step=step, group_zero_variance=group.endswith("z"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}"
    return request.getfixturevalue("database")


def test_the_step_figures_are_what_the_records_say(store_url: str) -> None:
    store = AuditStore(store_url)
    rows = [
        # group a: two answers, one correct
        _row("r", 0, "a", 0, "correct", 1.0, 10, "4", []), _row("r", 0, "a", 1, "incorrect", 0.0, 20, "5", ["x"]),
        # group bz: all the same answer, zero variance
        _row("r", 0, "bz", 0, "correct", 1.0, 30, "4", ["x", "y"]),
        _row("r", 0, "bz", 1, "correct", 1.0, 40, "4", []),
        # the longest responses time out or fail
        _row("r", 0, "c", 0, "timeout", 0.0, 95, None, []), _row("r", 0, "c", 1, "error", 0.0, 99, None, []),
        _row("r", 0, "c", 2, "incorrect", 0.0, 50, "7", []), _row("r", 0, "c", 3, "incorrect", 0.0, 60, "8", []),
        _row("r", 1, "d", 0, "correct", 1.0, 10, "4", []), _row("other", 0, "e", 0, "correct", 1.0, 10, "4", []),
    ]
    store.append(rows, [])
    first, second = steps(store, "r")
    assert (first.step, first.n, first.groups, second.n) == (0, 8, 3, 1)
    judged = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]  # not the error
    assert first.reward_mean == pytest.approx(sum(judged) / 7)
    m = sum(judged) / 7
    assert first.reward_std == pytest.approx((sum((r - m) ** 2 for r in judged) / 6) ** 0.5)
    assert first.zero_variance_share == pytest.approx(1 / 3)
    # distinct answers: a {4, 5} = 2, bz {4} = 1, c {7, 8, timeout's hash} = 3 (the error is left out)
    assert first.distinct_answers == pytest.approx(2.0)
    assert first.flag_rates == {"x": 2 / 8, "y": 1 / 8}
    assert first.mean_tokens == pytest.approx(sum(r.tokens for r in rows[:8]) / 8)
    assert first.tokens_per_correct == pytest.approx(sum(r.tokens for r in rows[:8]) / 3)
    assert first.truncation_rate == 2 / 8 and first.error_rate == 1 / 8 and first.timeout_rate == 1 / 8
    quarters = {b.quarter: b for b in first.by_length}
    assert quarters[4].min_length == 95 and quarters[4].n == 2
    assert quarters[4].timeout_rate == 0.5 and quarters[4].error_rate == 0.5
    assert quarters[1].timeout_rate == 0 and quarters[1].error_rate == 0
    store.engine.dispose()


def test_the_adapters_tag_records_with_the_trainers_global_step(server: AppServer) -> None:
    from types import SimpleNamespace

    from trainer_client import RewardClient
    from trainer_client.adapters.trl import assay_reward_func
    from trainer_client.adapters.verl import VerlScorer

    run_id = f"adapters-{uuid.uuid4().hex[:8]}"
    with RewardClient(server.url, server.admin_key, run_id=run_id, transport=server.transport) as client:
        reward = assay_reward_func(client)
        got = reward(prompts=["2+2?", "2+2?"], completions=["\\boxed{4}", "\\boxed{5}"], answer=["4", "4"],
                     trainer_state=SimpleNamespace(global_step=7))
        scorer = VerlScorer(client)
        scored = scorer.compute_score("gsm8k", "so \\boxed{6}", "6", extra_info={"global_step": 9})
        untagged = RewardClient(server.url, server.admin_key, transport=server.transport)  # no run: nothing is tagged
        untagged.score_groups([{"verifier": "math", "task": {"answer": "1"}, "responses": ["\\boxed{1}"]}])
        untagged.close()
    assert got == [1.0, 0.0] and scored["score"] == 1.0
    with server.client() as c:
        run = c.get(f"/v1/runs/{run_id}").json()
    assert [(s["step"], s["n"]) for s in run["steps"]] == [(7, 2), (9, 1)]


@pytest.mark.postgres
def test_a_hacking_run_on_postgres_raises_the_same_alarms(tmp_path: Path, database: str) -> None:  # noqa: F811
    server = AppServer(app_settings(tmp_path, database_url=database, alarm_check_interval_s=0)).start()
    try:
        hacking = SyntheticRun(f"pg-hacking-{uuid.uuid4().hex[:6]}", "hacking", steps=9, change=4, seed=2)
        with server.client() as c:
            replay(hacking, c)
            run = c.get(f"/v1/runs/{hacking.run_id}").json()
            listed = c.get("/v1/runs").json()["runs"]
    finally:
        server.stop()
    raised = {(a["rule"], a["subject"]): a for a in run["alarms"]}
    assert {("flag_rate", "answer_only"), ("reward_up_heldout_down", "")} <= set(raised)
    assert all(hacking.change <= a["step"] <= hacking.change + 3 for a in raised.values())
    assert all(a["examples"] and a["tasks"] for a in raised.values())
    assert len({e["task"] for e in raised[("flag_rate", "answer_only")]["examples"]}) > 1  # spread over tasks
    assert run["held_out"][0]["maj_at_k"]["1"] == pytest.approx(run["held_out"][0]["pass_at_k"]["1"])
    assert [r["id"] for r in listed] == [hacking.run_id] and listed[0]["records"] == run["records"]


def test_alarms_are_append_only_and_metric_labels_are_bounded(tmp_path: Path) -> None:
    from sqlalchemy import text

    from service.alarms import OTHER_RUNS, AlarmSink
    from service.config import Settings
    from service.tables import RunAlarmRow

    store = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    with store.db() as s, s.begin():
        s.add(RunAlarmRow(run_id="r", rule="flag_rate", subject="x", step=3, detail={}))
    for statement in ("UPDATE run_alarms SET step = 0", "DELETE FROM run_alarms"):
        with pytest.raises(Exception, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
    with store.db() as s:
        assert s.query(RunAlarmRow).count() == 1
    store.engine.dispose()
    # A run id is the caller's: two runs get their own label here, later ones share one, and ids are cut.
    sink = AlarmSink(Settings(alarm_metric_runs=2), None)
    assert [sink.run_label(r) for r in ("a", "b", "c", "a", "d" * 300)] == ["a", "b", OTHER_RUNS, "a", OTHER_RUNS]
    assert AlarmSink(Settings(), None).run_label("e" * 300) == "e" * 64


def test_an_alarm_raised_by_another_replica_meanwhile_is_shown_once(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two checks of one run at once (the monitor and a page load, or two replicas): the one that
    loses the insert shows the winner's alarm instead of leaving it out (CI saw a run page with
    no alarm while the monitor raised them)."""
    import service.alarms as alarms
    from service.tables import RunAlarmRow

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    store = AuditStore(url)
    rows = [_row("r", step, f"g{step}", i, "correct", 1.0, 10, str(i), ["answer_only"] if step >= 2 and i < 4 else [])
            for step in range(4) for i in range(8)]
    store.append(rows, [])
    replica = AuditStore(url)
    real = alarms.find_examples
    other_checks: list[Any] = []

    def meanwhile(store_: AuditStore, run_id: str, finding: Any) -> Any:
        if not other_checks:  # the other replica checks the run between this check's read and insert
            other_checks.append(None)
            other_checks[0] = alarms.check_run(replica, run_id)
        return real(store_, run_id, finding)

    monkeypatch.setattr(alarms, "find_examples", meanwhile)
    got = alarms.check_run(store, "r")
    theirs = other_checks[0]
    assert got is not None and theirs is not None
    assert [(a.rule, a.subject, a.step) for a in got.alarms] == [("flag_rate", "answer_only", 2)]
    assert [(a.rule, a.message, a.raised_at.replace(tzinfo=None)) for a in got.alarms] == [
        (a.rule, a.message, a.raised_at.replace(tzinfo=None)) for a in theirs.alarms]
    with store.db() as s:
        assert s.query(RunAlarmRow).count() == 1
    store.engine.dispose()
    replica.engine.dispose()
