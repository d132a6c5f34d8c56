"""Red team 8, receipts: a proxy between trainer and service that holds the trainer's own
key (it sees the Authorization header) answers a request with a *fresh*, genuine receipt it
asked for itself: the same response text judged against another task, where it is right.
The record id was never seen by the client and the receipt was signed a moment ago, so
neither the replay memory nor the age check of `trainer_client.receipts.ReplayGuard` can
tell it from the real answer; the signed `task_sent` (the task as the request named it,
`assay_rules.canonical.task_sent`) can. Each attack is followed by the honest exchange
through the same proxy, which must still get its reward."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from assay_rules.canonical import task_sent
from service.testing.app import AppServer, app_settings
from trainer_client.client import AsyncRewardClient, RewardClient
from trainer_client.receipts import ReceiptError, ReceiptKey, check_result

RIGHT = "The answer is \\boxed{42}."
RIGHT_TASK = {"answer": "42"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("redteam8-receipts"))) as s:
        yield s


def _swapped(body: dict, other: dict) -> dict:
    """The same request with every task replaced by `other` (where the responses are right)."""
    if "groups" in body:
        return {**body, "groups": [{k: v for k, v in {**g, "task": other}.items() if k != "task_id"}
                                   for g in body["groups"]]}
    fresh = {k: v for k, v in {**body, "task": other}.items() if k not in ("task_id", "request_id")}
    return fresh


class _FreshAnswerProxy(httpx.BaseTransport):
    """Forwards nothing of the trainer's request when `swap` is on: it asks the service itself,
    with the trainer's own headers, for the same responses judged against `other`, and hands
    that genuine, freshly signed answer back."""

    def __init__(self, inner: httpx.BaseTransport, other: dict) -> None:
        self.inner, self.other, self.swap = inner, other, False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.swap:
            body = _swapped(json.loads(request.content), self.other)
            request = httpx.Request(request.method, request.url, json=body,
                                    headers={"Authorization": request.headers["Authorization"]})
        answer = self.inner.handle_request(request)
        answer.read()
        return httpx.Response(answer.status_code, content=answer.content, headers=dict(answer.headers))


class _AsyncFreshAnswerProxy(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.BaseTransport, other: dict) -> None:
        self.sync = _FreshAnswerProxy(inner, other)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.sync.handle_request(request)


def _public_key(server: AppServer) -> str:
    return server.client().get("/v1/receipts/key").json()["public_key"]


def test_a_fresh_genuine_answer_about_another_task_is_refused(server: AppServer):
    """The trainer asks about task {"answer": "43"}, where RIGHT is wrong; the proxy answers
    with RIGHT judged against {"answer": "42"}: reward 1, genuine, fresh, never seen. Refused on
    /v1/verify and /v1/groups; the honest exchange through the same proxy gets its reward."""
    proxy = _FreshAnswerProxy(server.transport, RIGHT_TASK)
    with RewardClient(server.url, server.create_key("reward"), transport=proxy,
                      receipt_key=_public_key(server)) as client:
        proxy.swap = True
        with pytest.raises(ReceiptError, match="another task"):
            client.verify("math", RIGHT, task={"answer": "43"})
        with pytest.raises(ReceiptError, match="another task"):
            client.score_groups([{"verifier": "math", "task": {"answer": "43"}, "responses": [RIGHT, RIGHT]}])
        proxy.swap = False
        assert client.verify("math", RIGHT, task=RIGHT_TASK).reward == 1.0
        assert client.verify("math", "\\boxed{43}", task={"answer": "43"}).reward == 1.0
        group = client.score_groups([{"verifier": "math", "task": {"answer": "43"},
                                      "responses": ["\\boxed{43}", RIGHT]}])[0]
        assert [r.reward for r in group.results] == [1.0, 0.0]


def test_a_fresh_genuine_answer_about_another_task_id_or_inline_task_is_refused(server: AppServer):
    """A registered task named by id: the proxy answers with the same response judged against
    an inline task (or another registered id) where it is right. Refused; the id's own answer
    is accepted, and so is the caller's own request_id sent again (its logged record)."""
    admin = server.create_key("admin")
    with server.client(admin) as c:
        for task_id, answer in (("rt8-wrong", "43"), ("rt8-right", "42")):
            made = c.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": {"answer": answer}})
            assert made.status_code in (200, 201), made.text
    proxy = _FreshAnswerProxy(server.transport, RIGHT_TASK)
    with RewardClient(server.url, server.create_key("reward"), transport=proxy,
                      receipt_key=_public_key(server)) as client:
        proxy.swap = True
        with pytest.raises(ReceiptError, match="another task"):
            client.verify("math", RIGHT, task_id="rt8-wrong")
        proxy.swap = False
        assert client.verify("math", RIGHT, task_id="rt8-wrong").reward == 0.0
        assert client.verify("math", RIGHT, task_id="rt8-right").reward == 1.0
        first = client.verify("math", RIGHT, task_id="rt8-right", request_id="rt8-mine")
        again = client.verify("math", RIGHT, task_id="rt8-right", request_id="rt8-mine")
        assert first.reward == again.reward == 1.0 and first.record_id == again.record_id


def test_the_async_client_refuses_a_fresh_answer_about_another_task(server: AppServer):
    import asyncio

    async def attack() -> None:
        proxy = _AsyncFreshAnswerProxy(server.transport, RIGHT_TASK)
        async with AsyncRewardClient(server.url, server.create_key("reward"), transport=proxy,
                                     receipt_key=_public_key(server)) as client:
            proxy.sync.swap = True
            with pytest.raises(ReceiptError, match="another task"):
                await client.verify("math", RIGHT, task={"answer": "43"})
            with pytest.raises(ReceiptError, match="another task"):
                await client.score_groups([{"verifier": "math", "task": {"answer": "43"}, "responses": [RIGHT]}])
            proxy.sync.swap = False
            assert (await client.verify("math", "\\boxed{43}", task={"answer": "43"})).reward == 1.0

    asyncio.run(attack())


def test_the_signed_task_sent_is_the_request_own_and_a_forged_one_breaks_the_signature(server: AppServer):
    """What the service signs is the task as this request named it (key order, floats and
    unicode as sent); editing `task_sent` into the payload breaks the signature."""
    key = ReceiptKey.parse(_public_key(server))
    task = {"answer": "4.5"}
    with server.client(server.create_key("reward")) as c:
        got = c.post("/v1/verify", json={"verifier": "math", "task": task, "response": "\\boxed{4.5}"}).json()
    assert check_result(got, key, "\\boxed{4.5}", task_sent("math", task))["reward"] == 1.0
    with pytest.raises(ReceiptError, match="another task"):
        check_result(got, key, "\\boxed{4.5}", task_sent("math", {"answer": "4.50"}))
    forged = json.loads(json.dumps(got))
    forged["receipt"]["payload"]["task_sent"] = task_sent("math", {"answer": "4.50"})
    with pytest.raises(ReceiptError, match="signature"):
        check_result(forged, key, "\\boxed{4.5}", task_sent("math", {"answer": "4.50"}))


class _OtherJudgementProxy(httpx.BaseTransport):
    """Hands back, for a /v1/verify call, another genuine judgement of the very same task and
    response: one it kept from an earlier call (of this or another client process), or a fresh
    one it asked for itself under another request_id (a proxy could ask several times and keep
    the best, where a verdict can vary, e.g. by a time limit)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.kept, self.mode = inner, {}, "forward"

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        what = json.dumps([body.get("task"), body.get("task_id"), body.get("response")], sort_keys=True)
        if self.mode == "replay" and what in self.kept:
            return httpx.Response(200, content=self.kept[what], headers={"Content-Type": "application/json"})
        if self.mode == "fresh":
            body = {**body, "request_id": f"proxy-{body['request_id']}"}
            request = httpx.Request(request.method, request.url, json=body,
                                    headers={"Authorization": request.headers["Authorization"]})
        answer = self.inner.handle_request(request)
        answer.read()
        if answer.status_code == 200:
            self.kept[what] = answer.content
        return httpx.Response(answer.status_code, content=answer.content, headers=dict(answer.headers))


def test_a_verify_answer_is_the_call_own_judgement_even_within_the_age_allowance(server: AppServer):
    """The known leftover of red team 7: a genuine receipt for the same task and response,
    signed seconds ago, handed to a client that never saw it (another trainer process, default
    300 s allowance), was accepted; so was a judgement the proxy asked for itself. /v1/verify
    receipts now sign the call's request_id (one record per id and key): both are refused,
    and the honest call through the same proxy is accepted."""
    proxy = _OtherJudgementProxy(server.transport)
    key, public = server.create_key("reward"), _public_key(server)
    with RewardClient(server.url, key, transport=proxy, receipt_key=public) as first:
        assert first.verify("math", RIGHT, task=RIGHT_TASK).reward == 1.0
    with RewardClient(server.url, key, transport=proxy, receipt_key=public) as second:
        proxy.mode = "replay"
        with pytest.raises(ReceiptError, match="another request"):
            second.verify("math", RIGHT, task=RIGHT_TASK)
        proxy.mode = "fresh"
        with pytest.raises(ReceiptError, match="another request"):
            second.verify("math", RIGHT, task=RIGHT_TASK)
        proxy.mode = "forward"
        honest = second.verify("math", RIGHT, task=RIGHT_TASK)
        assert honest.reward == 1.0
        # The caller's own request_id again: its logged record, signed with that id, accepted.
        assert second.verify("math", RIGHT, task=RIGHT_TASK, request_id=honest.request_id).record_id == \
            honest.record_id


WRONG = "The answer is \\boxed{41}."


class _EvalProxy(httpx.BaseTransport):
    """Between trainer and service on POST /v1/evals. `mode`: "figures" rewrites the report's
    pass@k and mean reward (every receipt stays genuine); "other_run" answers with a genuine
    report of its own run, the same name, checkpoint and responses judged against tasks where
    they are right; "forward" forwards."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.mode = inner, "forward"

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.mode == "other_run":
            body = json.loads(request.content)
            body["families"] = {f: [{**g, "task": RIGHT_TASK} for g in gs] for f, gs in body["families"].items()}
            request = httpx.Request(request.method, request.url, json=body,
                                    headers={"Authorization": request.headers["Authorization"]})
        answer = self.inner.handle_request(request)
        answer.read()
        if self.mode != "figures" or answer.status_code != 201:
            return httpx.Response(answer.status_code, content=answer.content, headers=dict(answer.headers))
        data = json.loads(answer.content)
        for report in [data["overall"], *data["families"].values()]:
            report["mean_reward"] = 1.0
            report["pass_at_k"] = {k: 1.0 for k in report.get("pass_at_k") or {}}
        return httpx.Response(answer.status_code, json=data)


def test_an_evaluation_report_cannot_be_rewritten_or_answered_by_another_run(server: AppServer):
    """Before, `evaluate` checked only that each receipt was genuine: a proxy could raise the
    figures (pass@k, mean reward) or hand back its own run's report. Now the service signs the
    figures with the records and the tasks sent; both are refused and the honest report of the
    same evaluation is accepted with its true figures."""
    proxy = _EvalProxy(server.transport)
    families = {"arith": [{"verifier": "math", "task": {"answer": "43"}, "responses": [RIGHT, WRONG]},
                          {"verifier": "math", "task": {"answer": "41"}, "responses": [WRONG, RIGHT]}]}
    with RewardClient(server.url, server.create_key("reward"), transport=proxy,
                      receipt_key=_public_key(server)) as client:
        for mode in ("figures", "other_run"):
            proxy.mode = mode
            with pytest.raises(ReceiptError, match="differ from what the service signed"):
                client.evaluate("rt8", "step-1", families)
        proxy.mode = "forward"
        report = client.evaluate("rt8", "step-1", families)
    assert report["overall"]["mean_reward"] == pytest.approx(0.25)  # one right answer of four
    assert report["signed"]["payload"]["eval_id"] == report["id"]


def test_a_receipt_the_guard_has_forgotten_is_not_accepted_again(server: AppServer):
    """`ReplayGuard` remembers the newest `capacity` record ids; before, one it had forgotten
    could be handed back for another request within the age allowance. Now a forgotten
    receipt (no newer than the newest forgotten one) is refused; a fresh answer is accepted.
    Genuine receipts from the service, through the trainer client's public Python API."""
    from datetime import UTC, datetime

    from trainer_client.receipts import ReplayGuard

    key = ReceiptKey.parse(_public_key(server))
    with server.client(server.create_key("reward")) as c:
        def fresh() -> dict:
            got = c.post("/v1/verify", json={"verifier": "math", "task": RIGHT_TASK, "response": RIGHT}).json()
            return check_result(got, key, RIGHT)

        guard = ReplayGuard(max_age_s=300.0, capacity=2)
        started = datetime.now(UTC)
        first, second, third = fresh(), fresh(), fresh()
        for n, payload in enumerate((first, second, third)):
            guard.accept(payload, f"call-{n}", started)
        # `first` was forgotten (capacity 2); handed back for another call it is refused.
        with pytest.raises(ReceiptError, match="forgotten"):
            guard.accept(first, "call-later", started)
        # Remembered ones are still refused for another call, and accepted again for their own.
        with pytest.raises(ReceiptError, match="another request"):
            guard.accept(third, "call-later", started)
        guard.accept(third, "call-2", started)
        guard.accept(fresh(), "call-later", datetime.now(UTC))
