"""Inspection through HTTP and the CLI on a real server and audit store: generation facts
and truncation policies, flags in records and /metrics, labels and review, held-out
evaluation runs, task statistics, the trainer client's evaluate and dynamic sampling."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.testing.app import AppServer, app_settings
from tests.conftest import REPO
from trainer_client import RewardClient
from trainer_client.dynamic_sampling import dynamic_sample, has_signal
from trainer_client.results import Generation, Group

HALF = {"answer": "\\frac{1}{2}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    # A store of its own: review statistics count every label in it.
    with AppServer(app_settings(tmp_path_factory.mktemp("inspection"))) as server:
        yield server


def cli(server: AppServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=server.env(), cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_generation_facts_and_truncation_policies(server: AppServer):
    cut = {"text": r"$1 + 1 = 2$ so \boxed{1/2}", "tokens": 512, "finish_reason": "length"}
    done = {"text": r"$2 \times 2 = 4$, \boxed{0.5}", "tokens": 40, "finish_reason": "stop"}
    groups = [{"verifier": "math", "task": {**HALF, "truncation": policy}, "responses": [cut, done, "\\boxed{1/3}"]}
              for policy in ("score", "fail", "mask")]
    with server.client() as c:
        r = c.post("/v1/groups", json={"groups": groups})
        assert r.status_code == 200, r.text
        score, fail, mask = r.json()["groups"]
        assert score["rewards"] == [1.0, 1.0, 0.0] and score["masked"] == 0
        first = score["results"][0]
        assert first["flags"] == ["truncated"] and first["tokens"] == 512 and first["finish_reason"] == "length"
        assert first["flag_evidence"]["truncated"] == {"finish_reason": "length", "tokens": 512, "policy": "score"}
        assert fail["results"][0]["verdict"] == "violation" and fail["rewards"] == [0.0, 1.0, 0.0]
        assert mask["results"][0]["masked"] is True and mask["masked"] == 1 and mask["errors"] == 0
        assert mask["advantages"][0] is None and mask["mean"] == pytest.approx(0.5)
        record = c.get(f"/v1/records/{mask['results'][0]['record_id']}").json()
        assert record["tokens"] == 512 and record["finish_reason"] == "length" and record["masked"] is True
        assert record["flag_evidence"]["truncated"]["policy"] == "mask"
        one = c.post("/v1/verify", json={"verifier": "math", "task": HALF, "response": done}).json()
        assert one["tokens"] == 40 and one["finish_reason"] == "stop" and one["flags"] == []
        bad = c.post("/v1/verify", json={"verifier": "math", "task": HALF, "response": {"text": "1", "tokens": -1}})
        assert bad.status_code == 422 and "tokens" in bad.text
        rl = c.post("/v1/openrlhf", json={"query": [{"text": "Q: half? A: \\boxed{1/2}", "tokens": 9,
                                                     "finish_reason": "length"}], "prompts": ["Q: half? A:"],
                                          "labels": ["1/2"]})
        assert rl.status_code == 200 and rl.json()["rewards"] == [1.0]
        flagged = c.get("/v1/records", params={"flag": "truncated", "verifier": "math"}).json()["records"]
        assert any(rec["tokens"] == 9 for rec in flagged)
        metrics = c.get("/metrics").text
        assert 'assay_flags_total{flag="truncated",verifier="math"}' in metrics


def _labelled_records(server: AppServer) -> dict[str, str]:
    """Records of known kinds: a flagged correct, an unflagged correct, an incorrect."""
    with server.client() as c:
        r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": HALF, "responses": [
            r"\boxed{1/2}", r"Since $1/4 + 1/4 = 1/2$, \boxed{1/2}", r"We get $1 - 2/3 = 1/3$, \boxed{1/3}",
            r"So $2/4$ reduces: \boxed{2/4}"]}]})
        results = r.json()["groups"][0]["results"]
    assert results[0]["flags"] == ["answer_only"] and results[1]["flags"] == results[2]["flags"] == []
    return {"flagged": results[0]["record_id"], "correct": results[1]["record_id"],
            "incorrect": results[2]["record_id"], "correct2": results[3]["record_id"]}


@pytest.mark.slow
def test_labels_review_queue_and_summary(server: AppServer):
    ids = _labelled_records(server)
    reviewer = server.create_key("review")
    named = cli(server, "keys", "create", "--scopes", "review", "--name", "ada").stdout.strip()
    with server.client(server.create_key("reward")) as c:
        assert c.post(f"/v1/records/{ids['correct']}/labels", json={"label": "agree"}).status_code == 403
    with server.client(reviewer) as c:
        queue = c.get("/v1/review/queue", params={"verifier": "math", "n": 3, "seed": 1}).json()
        assert sorted(item["stratum"] for item in queue["items"]) == ["correct_unflagged", "flagged", "incorrect"]
        assert all(item["record"]["verifier"] == "math" for item in queue["items"])
        for body, status in [({"label": "disagree"}, 422), ({"label": "exploit"}, 422),
                             ({"label": "agree", "pattern": "x"}, 422), ({"label": "maybe"}, 422)]:
            r = c.post(f"/v1/records/{ids['correct']}/labels", json=body)
            assert r.status_code == status, r.text
        assert c.post("/v1/records/nope/labels", json={"label": "agree"}).status_code == 404
        r = c.post(f"/v1/records/{ids['flagged']}/labels", json={"label": "exploit", "pattern": "bare answer"})
        assert r.status_code == 201 and r.json()["author"] != "ada"
    with server.client(named) as c:
        r = c.post(f"/v1/records/{ids['correct']}/labels", json={"label": "agree", "note": "fine"})
        assert r.json()["author"] == "ada"
        c.post(f"/v1/records/{ids['correct2']}/labels", json={"label": "agree"})
        # A later label supersedes; both stay in the history.
        c.post(f"/v1/records/{ids['incorrect']}/labels", json={"label": "agree"})
        c.post(f"/v1/records/{ids['incorrect']}/labels", json={"label": "disagree", "corrected_verdict": "correct"})
        history = c.get(f"/v1/records/{ids['incorrect']}/labels").json()
        assert [h["label"] for h in history] == ["agree", "disagree"]
        queue = c.get("/v1/review/queue", params={"verifier": "math", "n": 50}).json()
        assert not {item["record"]["id"] for item in queue["items"]} & set(ids.values())
        summary = c.get("/v1/review/summary", params={"verifier": "math"}).json()["verifiers"]["math"]
    fp = summary["correct_false_positive"]
    assert (fp["labelled"], fp["hits"]) == (3, 1) and fp["rate"] == pytest.approx(1 / 3)
    assert fp["interval"] == pytest.approx([0.0615, 0.7923], abs=1e-3)  # Wilson, z = 1.96
    assert summary["incorrect_false_negative"]["hits"] == 1 and summary["incorrect_false_negative"]["labelled"] == 1
    assert summary["flagged_exploit_share"]["rate"] == 1.0 and summary["labels"] == 5
    # Append-only in the database itself, whoever connects.
    db = sqlite3.connect(server.db_url.removeprefix("sqlite:///"))
    for statement in ("UPDATE labels SET label = 'agree'", "DELETE FROM labels"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute(statement)
    db.close()
    out = cli(server, "review", "label", ids["correct2"], "disagree", "--verdict", "incorrect", "--author", "bob")
    assert out.returncode == 0 and json.loads(out.stdout)["author"] == "bob"
    out = cli(server, "review", "summary", "--verifier", "math")
    assert json.loads(out.stdout)["verifiers"]["math"]["correct_false_positive"]["hits"] == 2
    assert cli(server, "review", "label", ids["correct2"], "disagree").returncode == 1
    out = cli(server, "review", "next", "--verifier", "math", "-n", "2")
    assert out.returncode == 0 and all(json.loads(line)["record"]["id"] not in ids.values()
                                       for line in out.stdout.splitlines())


@pytest.mark.slow
def test_eval_runs_report_and_compare(server: AppServer):
    heldout = [{"verifier": "math", "task": {"answer": str(n)},
                "responses": [f"$ {n} + 0 = {n} $ \\boxed{{{n}}}", {"text": "\\boxed{0}", "tokens": 300,
                                                                       "finish_reason": "length"},
                              {"text": f"{n - 1} + 1 = {n}, \\boxed{{{n}}}", "tokens": 100}]} for n in (3, 4)]
    worse = [{**g, "responses": [r"\boxed{0}", r"\boxed{0}", r"\boxed{1}"]} for g in heldout]
    with RewardClient(server.url, server.admin_key, transport=server.transport) as client:
        a = client.evaluate("heldout", "step-100", {"arith": heldout})
        b = client.evaluate("heldout", "step-0", {"arith": worse})
    report = a["families"]["arith"]
    assert a["checkpoint"] == "step-100" and report["n_tasks"] == 2 and report["n_responses"] == 6
    assert report["pass_at_k"] == pytest.approx({"1": 2 / 3, "2": 1.0, "3": 1.0})
    assert report["maj_at_k"]["3"] == 1.0 and report["maj_at_k"]["1"] == pytest.approx(2 / 3)
    assert report["truncation_rate"] == pytest.approx(1 / 3) and report["error_rate"] == 0.0
    assert report["mean_tokens"] == pytest.approx(200.0)
    assert report["accuracy_by_tokens"] == [{"max_tokens": 128, "n": 2, "accuracy": 1.0},
                                            {"max_tokens": 512, "n": 2, "accuracy": 0.0}]
    assert report["flag_rates"]["truncated"] == pytest.approx(1 / 3)
    assert report["false_step_rate_among_correct"] == 0.0 and a["overall"]["n_tasks"] == 2
    with server.client() as c:
        # The report read back is the one answered, less `signed`: that signature covers the tasks the
        # POST named, which a later read does not have (EvalOut.signed, redteam8).
        again = c.get(f"/v1/evals/{a['id']}").json()
        assert a["signed"] is not None and again["signed"] is None
        assert {**again, "signed": a["signed"]} == a
        records = c.get("/v1/records", params={"verifier": "math", "limit": 1000}).json()["records"]
        assert sum(rec["eval_id"] == a["id"] for rec in records) == 6
        diff = c.get(f"/v1/evals/{a['id']}/compare/{b['id']}").json()
        assert c.get("/v1/evals/missing").status_code == 404
        bad = c.post("/v1/evals", json={"name": "x", "checkpoint": "y", "families": {"f": []}})
        assert bad.status_code == 422
    family = diff["families"]["arith"]
    assert family["paired"] is True
    assert family["metrics"]["pass@1"]["diff"] == pytest.approx(-2 / 3)
    low, high = family["metrics"]["pass@1"]["interval"]
    assert low <= -2 / 3 <= high
    out = cli(server, "eval", "compare", a["id"], b["id"])
    assert json.loads(out.stdout)["overall"]["metrics"]["pass@1"]["diff"] == pytest.approx(-2 / 3)
    out = cli(server, "eval", "report", a["id"])
    assert json.loads(out.stdout)["families"]["arith"]["pass_at_k"]["2"] == 1.0


def test_task_stats_and_dynamic_sampling(server: AppServer):
    with server.client() as c:
        c.post("/v1/tasks", json={"task_id": "curriculum/easy", "verifier": "math", "task": {"answer": "7"}})
        c.post("/v1/tasks", json={"task_id": "curriculum/mixed", "verifier": "math", "task": {"answer": "8"}})
        easy = {"verifier": "math", "task_id": "curriculum/easy", "responses": [r"\boxed{7}"] * 2}
        mixed = {"verifier": "math", "task_id": "curriculum/mixed",
                 "responses": [{"text": r"\boxed{8}", "tokens": 10}, {"text": r"\boxed{9}", "tokens": 30}]}
        assert c.post("/v1/groups", json={"groups": [easy, mixed, mixed]}).status_code == 200
        stats = {t["task_id"]: t for t in c.get("/v1/tasks/stats").json()["tasks"] if t["task_id"]}
        one = c.get("/v1/tasks/stats", params={"task_id": "curriculum/mixed"}).json()["tasks"]
        later = c.get("/v1/tasks/stats", params={"task_id": "curriculum/mixed", "since": "2999-01-01T00:00:00Z"})
        assert c.get("/v1/tasks/curriculum/easy").json()["task_id"] == "curriculum/easy"
    assert stats["curriculum/easy"]["zero_variance_share"] == 1.0 and stats["curriculum/easy"]["band"] == "too_easy"
    assert one == [stats["curriculum/mixed"]]
    m = stats["curriculum/mixed"]
    assert (m["attempts"], m["groups"], m["pass_rate"], m["zero_variance_share"], m["mean_tokens"], m["band"]) == \
        (4, 2, 0.5, 0.0, 20.0, "medium")
    assert later.json()["tasks"] == []

    # Dynamic sampling: groups solved by all (or none) are dropped and replaced.
    pool = iter(range(1000))

    def sample(n: int) -> list[Group]:
        out = []
        for _ in range(n):
            i = next(pool)
            answers = [r"\boxed{1}", r"\boxed{1}"] if i % 3 else [r"\boxed{1}", r"\boxed{2}"]
            out.append(Group(verifier="math", task={"answer": "1"},
                             responses=[Generation(text=a, tokens=3) for a in answers]))
        return out

    with RewardClient(server.url, server.admin_key, transport=server.transport) as client:
        batch = dynamic_sample(sample, client.score_groups, batch_size=4)
    assert len(batch.groups) == 4 and all(has_signal(r) for r in batch.results)
    assert batch.rounds >= 2 and batch.dropped == batch.sampled - 4 >= 6  # i = 0, 3, 6, 9 carry signal
    assert all(r.results[1].verdict == "incorrect" for r in batch.results)


def test_eval_and_review_endpoints_in_openapi(server: AppServer):
    with server.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
    for path in ("/v1/records/{record_id}/labels", "/v1/review/queue", "/v1/review/summary", "/v1/evals",
                 "/v1/evals/{eval_id}", "/v1/evals/{eval_id}/compare/{other_id}", "/v1/tasks/stats"):
        assert path in paths
    assert Path(REPO / "service" / "routes" / "review.py").exists()
