"""TRL, verl and OpenRLHF adapters, each called the way its trainer calls it, against the
real app (in-process through the clients' `transport=`; verl's environment-configured
client against a real server)."""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid

import httpx
import pytest

from trainer_client.adapters import verl
from trainer_client.adapters.trl import assay_async_reward_func, assay_reward_func
from trainer_client.client import AsyncRewardClient, RetryPolicy, RewardClient

CHAT_PROMPT = "<|im_start|>user\nWhat is 1234%10?<|im_end|>\n<|im_start|>assistant\n"


def in_process(app_server) -> RewardClient:
    return RewardClient(app_server.url, app_server.admin_key, transport=app_server.transport)


def in_process_async(app_server) -> AsyncRewardClient:
    return AsyncRewardClient(app_server.url, app_server.admin_key, transport=app_server.async_transport())


def register(app_server, answer: str) -> str:
    task_id = f"adapter-test/{uuid.uuid4().hex}"
    with app_server.client() as http:
        r = http.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": {"answer": answer}})
        assert r.status_code == 201, r.text
    return task_id


def records_for(app_server, task_id: str) -> list[dict]:
    with app_server.client() as http:
        return http.get("/v1/records", params={"task_id": task_id, "limit": 1000}).json()["records"]


def trl_batch() -> dict:
    """What TRL's GRPOTrainer passes: each prompt repeated G=3 times in a row, dataset
    columns as lists, conversational completions, plus completion_ids and trainer_state."""
    prompts = [[{"role": "user", "content": "1234%10?"}]] * 3 + [[{"role": "user", "content": "7+1?"}]] * 3
    texts = ["\\boxed{4}", "5", "the answer is 4", "8", "\\boxed{8}", "7"]
    return {
        "prompts": prompts,
        "completions": [[{"role": "assistant", "content": t}] for t in texts],
        "completion_ids": [[1, 2]] * 6,
        "answer": ["4"] * 3 + ["8"] * 3,
        "trainer_state": object(),
    }


def test_trl_sync_reward_func_sends_the_batch_in_one_request(app_server) -> None:
    with in_process(app_server) as client:
        reward = assay_reward_func(client)
        assert reward.__name__ == "assay" and not inspect.iscoroutinefunction(reward)
        metrics: dict[str, float] = {}
        columns: dict[str, list] = {}
        out = reward(**trl_batch(), log_metric=metrics.__setitem__, log_extra=columns.__setitem__)
        stats = client.stats.take()
    assert out == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert stats["reward_service/http_requests"] == 1
    # Recent TRL versions hand over loggers: verdicts go to its metrics and completions table.
    assert metrics == {"assay/errors": 0.0, "assay/verdicts/correct": 4 / 6, "assay/verdicts/incorrect": 2 / 6}
    assert columns == {"assay_verdict": ["correct", "incorrect", "correct", "correct", "correct", "incorrect"]}


def test_trl_async_reward_func_and_task_columns(app_server) -> None:
    task_id = register(app_server, "4")

    async def main():
        async with in_process_async(app_server) as client:
            reward = assay_async_reward_func(client, name="assay_math")
            assert inspect.iscoroutinefunction(reward)  # TRL awaits these concurrently
            by_id = await reward(prompts=["p"] * 2, completions=["4", "3"], task_id=[task_id] * 2)
            inline = await reward(prompts=["q"] * 2, completions=["x=2", "2.0"],
                                  task=[json.dumps({"answer": "2"})] * 2)
            return by_id, inline, client.stats.take()

    by_id, inline, stats = asyncio.run(main())
    assert by_id == [1.0, 0.0] and inline == [1.0, 1.0]
    assert stats["reward_service/http_requests"] == 2
    assert len(records_for(app_server, task_id)) == 2


def test_trl_error_verdicts_become_none_not_zero() -> None:
    # Nothing listens on port 9 here: every response is an `error`, which TRL must see as None.
    with RewardClient("http://127.0.0.1:9", "ak_x_y", retry=RetryPolicy(max_attempts=1)) as client:
        reward = assay_reward_func(client)
        assert reward(prompts=["p", "p"], completions=["1", "2"], answer=["1", "1"]) == [None, None]
        with pytest.raises(Exception, match="could not be verified"):
            assay_reward_func(client, error_policy="raise")(prompts=["p"], completions=["1"], answer=["1"])


def test_verl_compute_score_has_the_same_keys_every_time(live_server, monkeypatch) -> None:
    # The module-level functions build their client from the environment: a real URL.
    monkeypatch.setenv("ASSAY_URL", live_server.url)
    monkeypatch.setenv("ASSAY_API_KEY", live_server.admin_key)
    monkeypatch.setattr(verl, "_default", None)
    right = verl.compute_score("openai/gsm8k", "so the answer is 72", "72")
    wrong = verl.compute_score("openai/gsm8k", "\\boxed{71}", "72", extra_info={"index": 3})
    garbage = verl.compute_score("openai/gsm8k", "I cannot say\nanything", "72")
    assert right == {"score": 1.0, "acc": 1.0, "format": 1.0, "error": 0.0}
    assert wrong["score"] == 0.0 and wrong["acc"] == 0.0 and wrong["format"] == 1.0
    assert garbage["format"] == 0.0
    assert {tuple(sorted(d)) for d in (right, wrong, garbage)} == {tuple(sorted(right))}


def test_verl_batch_form_and_task_from_extra_info(app_server) -> None:
    task_id = register(app_server, "4")
    with in_process(app_server) as client:
        scorer = verl.VerlScorer(client)
        out = scorer.compute_score_batch(
            ["math"] * 4, ["4", "5", "\\boxed{9}", "9"], ["unused", "unused", "9", "9"],
            [{"assay_task_id": task_id}, {"assay_task_id": task_id}, None, {"assay_task": {"answer": "8"}}])
        stats = client.stats.take()
    assert [d["score"] for d in out] == [1.0, 0.0, 1.0, 0.0]
    assert stats["reward_service/http_requests"] == 1


def test_verl_errors_are_marked_or_raised() -> None:
    with RewardClient("http://127.0.0.1:9", "ak_x_y", retry=RetryPolicy(max_attempts=1)) as client:
        assert verl.VerlScorer(client).compute_score("math", "1", "1") == {
            "score": 0.0, "acc": 0.0, "format": 0.0, "error": 1.0}
        with pytest.raises(Exception, match="could not be verified"):
            verl.VerlScorer(client, error_policy="raise").compute_score("math", "1", "1")
        with pytest.raises(ValueError):
            verl.VerlScorer(client, error_policy="drop")


def openrlhf_post(app_server, body: dict, **params) -> httpx.Response:
    # OpenRLHF's remote_rm_fn posts JSON with no Authorization header; the key rides in the URL.
    params = {"api_key": app_server.admin_key, **params}
    with app_server.anonymous() as http:
        return http.post("/v1/openrlhf", json=body, params=params, timeout=60)


def test_openrlhf_remote_rm_url(app_server) -> None:
    task_id = register(app_server, "4")
    responses = ["\\boxed{4}<|im_end|>", "5<|im_end|><|endoftext|>", "The answer is 4.</s>", "five"]
    body = {
        "query": [CHAT_PROMPT + r for r in responses] + ["<pad><pad>" + CHAT_PROMPT + "7", CHAT_PROMPT + "1"],
        "prompts": [CHAT_PROMPT] * 6,
        "labels": [json.dumps({"task_id": task_id})] * 4 + ["7", "2"],
    }
    r = openrlhf_post(app_server, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert out["scores"] == out["rewards"]
    assert out["extra_logs"]["correct"] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert out["extra_logs"]["error"] == [0.0] * 6
    logged = records_for(app_server, task_id)
    assert sorted(rec["response"] for rec in logged) == sorted(["\\boxed{4}", "5", "The answer is 4.", "five"])
    assert len({rec["group_id"] for rec in logged}) == 1  # the 4 samples of one prompt form one group

    # OpenRLHF retries a failed request up to 5 times with the same body: no second set of records.
    again = openrlhf_post(app_server, body)
    assert again.json() == out
    assert len(records_for(app_server, task_id)) == 4


def test_openrlhf_auth_and_validation(app_server) -> None:
    body = {"query": ["q1"], "prompts": ["q"], "labels": ["1"]}
    with app_server.anonymous() as http:
        assert http.post("/v1/openrlhf", json=body, timeout=30).status_code == 401
    assert openrlhf_post(app_server, body, api_key="ak_nope_nope").status_code == 401
    # The header works too, for a proxy that adds it.
    with app_server.client() as http:
        assert http.post("/v1/openrlhf", json=body).json()["rewards"] == [1.0]
    assert openrlhf_post(app_server, {"query": ["a", "b"], "prompts": ["a"], "labels": ["1", "2"]}).status_code == 422
    assert openrlhf_post(app_server, {"query": ["a"], "prompts": ["a"]}).status_code == 422
    audit_only = app_server.create_key("audit")  # lacks the reward scope
    assert openrlhf_post(app_server, body, api_key=audit_only).status_code == 403


@pytest.mark.slow
def test_real_trl_grpo_trainer_runs_with_assay_rewards(app_server, tmp_path) -> None:
    """TRL's own GRPOTrainer, with a sync and an async Assay reward function side by side."""
    pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from trl import GRPOConfig, GRPOTrainer

    from trainer_client.demo import ALPHABET, make_tasks
    from trainer_client.tiny import build_model, build_tokenizer

    tok = build_tokenizer(ALPHABET)
    train, _ = make_tasks(16, 0, seed=0)
    ds = datasets.Dataset.from_list([{"prompt": t.prompt, "answer": t.task["answer"]} for t in train])
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=2, max_steps=2, report_to=[], use_cpu=True, logging_steps=1,
                      bf16=False, save_strategy="no")
    with in_process(app_server) as client:
        async_client = in_process_async(app_server)
        trainer = GRPOTrainer(model=build_model(tok), processing_class=tok, args=args, train_dataset=ds,
                              reward_funcs=[assay_reward_func(client),
                                            assay_async_reward_func(async_client, name="assay_async")])
        trainer.train()
        stats = client.stats.take()
    logged = [h for h in trainer.state.log_history if "rewards/assay/mean" in h]
    assert len(logged) == 2
    for h in logged:
        assert h["assay/errors"] == 0 and h["assay_async/errors"] == 0
        assert sum(v for k, v in h.items() if k.startswith("assay/verdicts/")) == pytest.approx(1.0)
        assert h["rewards/assay/mean"] == pytest.approx(h["rewards/assay_async/mean"])
    assert stats["reward_service/http_requests"] == 2  # one request per batch


def test_openrlhf_large_batches_are_split_within_service_limits(app_server) -> None:
    # 70 prompts with 1 sample each: more groups than one /v1/groups request may carry (64).
    n = 70
    body = {"query": [f"q{i}:{i % 10}" for i in range(n)], "prompts": [f"q{i}:" for i in range(n)],
            "labels": [str(i % 10) if i % 2 else "0" for i in range(n)]}
    r = openrlhf_post(app_server, body)
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [1.0 if (i % 2 or i % 10 == 0) else 0.0 for i in range(n)]
