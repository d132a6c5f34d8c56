"""Red team 7, the service edge and history: held-out attacks written from the docs alone
(docs/security.md, README, the request schemas), before any fix. A hostile caller or a
proxy between trainer and service tries to get a reward it was not given, or to change
what was decided; each attack is followed by an honest request that still gets its reward.

What must hold: never a 5xx; bad input is a 4xx naming the field; a stored answer is never
handed to a different body; a genuine receipt never vouches for another request's result."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from trainer_client.client import RewardClient
from trainer_client.receipts import ReceiptError

MATH_TASK = {"answer": "42"}
RIGHT, WRONG = "The answer is \\boxed{42}.", "The answer is \\boxed{41}."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    with AppServer(app_settings(tmp_path_factory.mktemp("redteam7-service"))) as s:
        yield s


def _group(response: str, task: dict | None = None) -> dict:
    return {"groups": [{"verifier": "math", "task": task or MATH_TASK, "responses": [response]}]}


def _reward(body: dict) -> float:
    return body["groups"][0]["results"][0]["reward"]


def _assert_4xx_names(reply: httpx.Response, *words: str) -> None:
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:500])
    text = reply.text.lower()
    assert any(w.lower() in text for w in words), (words, reply.text[:500])


def test_an_idempotency_key_never_hands_a_stored_reward_to_another_body(server: AppServer):
    """A caller that got reward 1 once under an Idempotency-Key reuses the key for a wrong
    response: the stored answer must not come back as if it were this body's."""
    key = f"k-{uuid.uuid4().hex}"
    with server.client(server.create_key("reward")) as c:
        first = c.post("/v1/groups", json=_group(RIGHT), headers={"Idempotency-Key": key})
        assert first.status_code == 200 and _reward(first.json()) == 1.0, first.text
        reused = c.post("/v1/groups", json=_group(WRONG), headers={"Idempotency-Key": key})
        assert reused.status_code != 200 or _reward(reused.json()) == 0.0, reused.text
        _assert_4xx_names(reused, "idempotency")
        # The same body again is the stored answer, word for word (a retry is still safe).
        again = c.post("/v1/groups", json=_group(RIGHT), headers={"Idempotency-Key": key})
        assert again.status_code == 200 and again.json() == first.json()
        honest = c.post("/v1/groups", json=_group(RIGHT), headers={"Idempotency-Key": f"k-{uuid.uuid4().hex}"})
        assert honest.status_code == 200 and _reward(honest.json()) == 1.0


def test_an_idempotency_key_is_the_senders_own(server: AppServer):
    """Another key that learns (or guesses) an Idempotency-Key gets its own verification,
    never the first key's stored answer (which may hold full evidence of its inline task)."""
    key = f"k-{uuid.uuid4().hex}"
    with server.client(server.create_key("reward")) as a, server.client(server.create_key("reward")) as b:
        stored = a.post("/v1/groups", json=_group(RIGHT), headers={"Idempotency-Key": key})
        assert stored.status_code == 200
        other = b.post("/v1/groups", json=_group(RIGHT), headers={"Idempotency-Key": key})
        assert other.status_code == 200, other.text
        mine = other.json()["groups"][0]["results"][0]
        theirs = stored.json()["groups"][0]["results"][0]
        assert mine["record_id"] != theirs["record_id"]
        assert mine["reward"] == 1.0


def test_a_request_id_reused_with_another_response_is_a_409(server: AppServer):
    request_id = f"r-{uuid.uuid4().hex}"
    with server.client(server.create_key("reward")) as c:
        body = {"verifier": "math", "task": MATH_TASK, "response": RIGHT, "request_id": request_id}
        assert c.post("/v1/verify", json=body).json()["reward"] == 1.0
        reused = c.post("/v1/verify", json={**body, "response": WRONG})
        assert reused.status_code == 409, reused.text
        # A task that differs only in a field the verifier ignores is still another body.
        reused_task = c.post("/v1/verify", json={**body, "task": {**MATH_TASK, "answer": "41"}, "response": WRONG})
        assert reused_task.status_code == 409, reused_task.text


# Repeated keys in one JSON object: whichever copy is judged, the logged record, the
# receipt and the answer must be about that same copy (or the body is refused).
DUPLICATE_BODIES = {
    "response": '{"verifier": "math", "task": {"answer": "42"}, "response": %s, "response": %s}',
    "task": '{"verifier": "math", "task": {"answer": "41"}, "task": {"answer": "42"}, "response": %s}',
    "nested_answer": '{"verifier": "math", "task": {"answer": "41", "answer": "42"}, "response": %s}',
}


@pytest.mark.parametrize("name", list(DUPLICATE_BODIES))
def test_repeated_json_keys_never_split_what_is_judged_from_what_is_logged(server: AppServer, name: str):
    """The same body written without repeats (each key's last value, as JSON parsers keep)
    must give the same reward, the same logged response and the same task hash; the
    record replays to the verdict answered."""
    raw = DUPLICATE_BODIES[name] % ((json.dumps(WRONG), json.dumps(RIGHT)) if name == "response" else json.dumps(RIGHT))
    with server.client(server.create_key("reward,audit")) as c:
        reply = c.post("/v1/verify", content=raw.encode(), headers={"Content-Type": "application/json"})
        assert reply.status_code < 500, reply.text
        if reply.status_code != 200:
            _assert_4xx_names(reply, name.split("_")[-1], "duplicate", "repeated")
            return
        plain = c.post("/v1/verify", json=json.loads(raw))  # json.loads keeps the last value
        assert plain.status_code == 200, plain.text
        got, want = reply.json(), plain.json()
        assert got["reward"] == want["reward"] == 1.0, (got, want)
        record = c.get(f"/v1/records/{got['record_id']}").json()
        twin = c.get(f"/v1/records/{want['record_id']}").json()
        assert record["task_hash"] == twin["task_hash"] and record["response"] == twin["response"]
        replay = c.post(f"/v1/records/{got['record_id']}/replay")
        assert replay.status_code == 200 and '"same' in replay.text, replay.text


HUGE_INT = "9" * 5000  # past Python's default int-from-text limit (4300 digits)
ODD_BODIES = {
    "huge_int_failure_value": f'{{"verifier": "math", "task": {{"answer": "42", "failure_value": {HUGE_INT}}}, "response": "x"}}',  # noqa: E501
    "huge_int_time_limit": f'{{"verifier": "code", "task": {{"language": "python", "time_limit_s": {HUGE_INT}, '
                           '"io_cases": [{"stdin": "", "stdout": "1"}]}, "response": "```python\\nprint(1)\\n```"}',
    "huge_int_run_step": '{"verifier": "math", "task": {"answer": "42"}, "response": "x", '
                         f'"run": {{"id": "r", "step": {HUGE_INT}}}}}',
    "huge_int_request_id": f'{{"verifier": "math", "task": {{"answer": "42"}}, "response": "x", "request_id": {HUGE_INT}}}',  # noqa: E501
    "huge_int_answer": f'{{"verifier": "math", "task": {{"answer": {HUGE_INT}}}, "response": "x"}}',
    "huge_exponent": '{"verifier": "math", "task": {"answer": "42", "failure_value": 1e-99999}, "response": "x"}',
    "nul_request_id": '{"verifier": "math", "task": {"answer": "42"}, "response": "x", "request_id": "a\\u0000b"}',
    "nul_verifier": '{"verifier": "math\\u0000", "task": {"answer": "42"}, "response": "x"}',
    "nul_task_id": '{"verifier": "math", "task_id": "t\\u0000x", "response": "x"}',
    "bom_body": '\ufeff{"verifier": "math", "task": {"answer": "42"}, "response": "x"}',
    "top_level_array": '[{"verifier": "math", "task": {"answer": "42"}, "response": "x"}]',
    "top_level_string": '"verify"',
    "response_object_tokens_huge": '{"verifier": "math", "task": {"answer": "42"}, '
                                   f'"response": {{"text": "x", "tokens": {HUGE_INT}}}}}',
    "response_object_bad_finish": '{"verifier": "math", "task": {"answer": "42"}, '
                                  '"response": {"text": "x", "finish_reason": {"a": 1}}}',
    "overlong_unicode_escape": '{"verifier": "math", "task": {"answer": "42"}, "response": "\\ud83d\\ude00\\udc00"}',
}


@pytest.mark.parametrize("name", list(ODD_BODIES))
def test_odd_json_is_never_a_5xx(server: AppServer, name: str):
    with server.client(server.create_key("reward")) as c:
        raw = ODD_BODIES[name].encode("utf-8")
        for path in ("/v1/verify",):
            reply = c.post(path, content=raw, headers={"Content-Type": "application/json"})
            assert reply.status_code < 500, (name, reply.status_code, reply.text[:500])
        honest = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": RIGHT})
        assert honest.status_code == 200 and honest.json()["reward"] == 1.0


@pytest.mark.parametrize("value", [
    HUGE_INT, "-" + HUGE_INT,
    "1e400", "-0", "0", "true", '"5"', "null", "[1]"])
def test_odd_numbers_in_a_group_are_a_4xx_naming_the_field(server: AppServer, value: str):
    """`eps` 0 (or -0) on a group whose rewards are all equal was a division by zero: a 500."""
    raw = ('{"groups": [{"verifier": "math", "task": {"answer": "42"}, "responses": ["x", "y"]}], '
           f'"advantage": {{"scale": "group", "eps": {value}}}}}')
    with server.client(server.create_key("reward")) as c:
        reply = c.post("/v1/groups", content=raw.encode(), headers={"Content-Type": "application/json"})
        assert reply.status_code < 500, (value, reply.text[:500])
        if reply.status_code >= 400:
            _assert_4xx_names(reply, "eps", "advantage")
        else:
            assert reply.json()["groups"][0]["advantages"] == [0.0, 0.0], reply.text[:500]


ODD_IDS = ["t\u0000", "t/../admin", "t\u202e", "t\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
           "T-CASE", "t-case ", "t\u2010case", "x" * 5000, "", "%00", "t\nx"]


def test_odd_task_ids_never_shadow_or_5xx(server: AppServer):
    """Task ids that differ only by case, a trailing space, a lookalike hyphen, NUL, path
    tricks or a newline: each is refused or is its own task; none answers for another."""
    admin = server.admin_key
    with server.client(admin) as c:
        base = c.post("/v1/tasks", json={"task_id": "t-case", "verifier": "math", "task": {"answer": "7"}})
        assert base.status_code == 201, base.text
        for task_id in ODD_IDS:
            reply = c.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": {"answer": "8"}})
            assert reply.status_code < 500, (task_id, reply.text[:300])
            if reply.status_code >= 400:
                _assert_4xx_names(reply, "task_id")
        # "t-case" still answers with its own registered answer.
        seven = c.post("/v1/verify", json={"verifier": "math", "task_id": "t-case", "response": "\\boxed{7}"})
        eight = c.post("/v1/verify", json={"verifier": "math", "task_id": "t-case", "response": "\\boxed{8}"})
        assert seven.json()["reward"] == 1.0 and eight.json()["reward"] == 0.0, (seven.text, eight.text)
        for task_id in ODD_IDS:
            got = c.get("/v1/tasks/" + quote(task_id, safe=""))
            assert got.status_code < 500, (task_id, got.text[:300])


def test_a_registered_task_cannot_be_rewritten_through_the_api(server: AppServer):
    """History stays as decided: registering the same id with other content, or with the
    same content and other hidden fields, never changes what the id means."""
    with server.client(server.admin_key) as c:
        task_id = f"fixed-{uuid.uuid4().hex[:8]}"
        assert c.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": {"answer": "3"}}).status_code == 201  # noqa: E501
        for body in ({"task_id": task_id, "verifier": "math", "task": {"answer": "4"}},
                     {"task_id": task_id, "verifier": "math", "task": {"answer": "3"}, "hide": []},
                     {"task_id": task_id, "verifier": "code", "task": {"language": "python",
                                                                        "io_cases": [{"stdin": "", "stdout": "3"}]}}):
            reply = c.post("/v1/tasks", json=body)
            assert reply.status_code in (201, 409, 422), reply.text
        right = c.post("/v1/verify", json={"verifier": "math", "task_id": task_id, "response": "\\boxed{3}"})
        assert right.status_code == 200 and right.json()["reward"] == 1.0, right.text
        wrong = c.post("/v1/verify", json={"verifier": "math", "task_id": task_id, "response": "\\boxed{4}"})
        assert wrong.json()["reward"] == 0.0
        # No public route edits or deletes a record.
        record_id = right.json()["record_id"]
        for method in ("PUT", "PATCH", "DELETE"):
            reply = c.request(method, f"/v1/records/{record_id}", json={"reward": 0.0})
            assert reply.status_code in (404, 405), (method, reply.status_code)
        assert c.get(f"/v1/records/{record_id}").json()["reward"] == 1.0


def test_labels_never_change_a_decision(server: AppServer):
    with server.client(server.admin_key) as c:
        result = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": WRONG}).json()
        record_id = result["record_id"]
        for body in ({"label": "disagree", "corrected_verdict": "correct"},
                     {"label": "agree", "reward": 1.0, "verdict": "correct"},
                     {"label": "note", "note": "\u0000" * 10},
                     {"label": "exploit", "pattern": "x" * 100000}):
            reply = c.post(f"/v1/records/{record_id}/labels", json=body)
            assert reply.status_code < 500, (body, reply.text[:300])
        assert c.get(f"/v1/records/{record_id}").json()["reward"] == 0.0
        # A label for another key's (or no) record id never creates a record.
        ghost = c.post(f"/v1/records/{uuid.uuid4()}/labels", json={"label": "agree"})
        assert ghost.status_code in (404, 422), ghost.text


class _ReplayProxy(httpx.BaseTransport):
    """A proxy between trainer and service that keeps genuine answers and hands an old one
    back for a later request (same response text, another task, or the same request
    retried): every byte it returns was signed by the service."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.kept: dict[str, bytes] = {}
        self.replay = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.inner.handle_request(request)
        answer.read()
        body = json.loads(request.content)
        response = body.get("response") or json.dumps([g["responses"] for g in body.get("groups", [])])
        if self.replay and response in self.kept:
            return httpx.Response(200, content=self.kept[response], headers={"Content-Type": "application/json"})
        if answer.status_code == 200:
            self.kept[response] = answer.content
        return httpx.Response(answer.status_code, content=answer.content, headers=dict(answer.headers))


def _public_key(server: AppServer) -> str:
    return server.client().get("/v1/receipts/key").json()["public_key"]


def test_a_replayed_genuine_receipt_is_refused_by_the_trainer_client(server: AppServer):
    """The response "\\boxed{42}" is right for task A and wrong for task B. A proxy that
    kept the genuine, signed answer for A hands it back when the trainer verifies the same
    text against B: the receipt is genuine and names that response, but it answered another
    request. The trainer client refuses it, for /v1/verify and for /v1/groups."""
    proxy = _ReplayProxy(server.transport)
    with RewardClient(server.url, server.create_key("reward"), transport=proxy,
                      receipt_key=_public_key(server)) as client:
        assert client.verify("math", RIGHT, task={"answer": "42"}).reward == 1.0
        group = {"verifier": "math", "task": {"answer": "42"}, "responses": [RIGHT, WRONG]}
        assert [r.reward for r in client.score_groups([group])[0].results] == [1.0, 0.0]
        proxy.replay = True
        with pytest.raises(ReceiptError, match="another request"):
            client.verify("math", RIGHT, task={"answer": "43"})
        with pytest.raises(ReceiptError, match="another request"):
            client.score_groups([{**group, "task": {"answer": "41"}}])
        # A proxy that replays nothing: the honest exchange is accepted.
        proxy.replay = False
        assert client.verify("math", "\\boxed{43}", task={"answer": "43"}).reward == 1.0
        # The caller's own request_id, sent again, is answered by its logged record: accepted.
        assert client.verify("math", RIGHT, task={"answer": "42"}, request_id="mine").reward == 1.0
        assert client.verify("math", RIGHT, task={"answer": "42"}, request_id="mine").reward == 1.0
    # A client that never saw the kept answer (a new process) refuses it by its age: signed
    # before the request was sent, by more than the allowance for the clocks (0 s here).
    proxy.replay = True
    with RewardClient(server.url, server.create_key("reward"), transport=proxy, receipt_key=_public_key(server),
                      receipt_max_age_s=0.0) as fresh:
        with pytest.raises(ReceiptError, match="before this request was sent"):
            fresh.verify("math", RIGHT, task={"answer": "44"})
        proxy.replay = False
        assert fresh.verify("math", "\\boxed{44}", task={"answer": "44"}).reward == 1.0


class _SpliceProxy(httpx.BaseTransport):
    """Answers a group with a genuine result of another group spliced in: the proxy itself
    asks the service (with the trainer's own headers) for the same response on another task
    whose answer it also is, so every receipt is valid, names the response sent, carries the
    same reward, and was never seen by the client."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.splice = inner, False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.inner.handle_request(request)
        answer.read()
        if not self.splice:
            return httpx.Response(answer.status_code, content=answer.content, headers=dict(answer.headers))
        body = json.loads(request.content)
        other = {"groups": [{**body["groups"][0], "task": {"answer": "42.0"}}]}
        side = self.inner.handle_request(httpx.Request("POST", request.url, json=other, headers={
            "Authorization": request.headers["Authorization"]}))
        side.read()
        data = json.loads(answer.content)
        data["groups"][0]["results"][1] = json.loads(side.content)["groups"][0]["results"][1]
        return httpx.Response(200, json=data)


def test_a_group_of_spliced_genuine_results_is_refused(server: AppServer):
    proxy = _SpliceProxy(server.transport)
    group = {"verifier": "math", "task": {"answer": "42"}, "responses": [RIGHT, RIGHT]}
    with RewardClient(server.url, server.create_key("reward"), transport=proxy,
                      receipt_key=_public_key(server)) as client:
        proxy.splice = True
        with pytest.raises(ReceiptError, match="more than one task"):
            client.score_groups([group])
        proxy.splice = False
        assert [r.reward for r in client.score_groups([group])[0].results] == [1.0, 1.0]


def test_a_forged_receipt_is_refused(server: AppServer):
    from trainer_client.receipts import ReceiptKey, check_result

    rk = ReceiptKey.parse(_public_key(server))
    with server.client(server.create_key("reward")) as c:
        wrong = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": WRONG}).json()
    forged = json.loads(json.dumps(wrong))
    forged["reward"] = 1.0
    forged["receipt"]["payload"]["reward"] = 1.0
    forged["receipt"]["payload"]["verdict"] = "correct"
    forged["verdict"] = "correct"
    with pytest.raises(ReceiptError):
        check_result(forged, rk, WRONG)
    # The signature field replaced by another record's signature.
    with server.client(server.create_key("reward")) as c:
        right = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": RIGHT}).json()
    spliced = json.loads(json.dumps(wrong))
    spliced["receipt"]["signature"] = right["receipt"]["signature"]
    with pytest.raises(ReceiptError):
        check_result(spliced, rk, WRONG)
    assert check_result(right, rk, RIGHT)["reward"] == 1.0


@pytest.mark.parametrize(("name", "field"), [
    ("huge_int_failure_value", "task.failure_value"), ("huge_int_run_step", "run.step"),
    ("huge_int_request_id", "request_id"), ("huge_int_answer", "task.answer"),
    ("response_object_tokens_huge", "response.tokens")])
def test_an_integer_too_long_to_read_is_a_422_naming_its_field(server: AppServer, name: str, field: str):
    """Python reads at most 4,300 digits of an integer: past that the body is a 422 naming the
    field (not the parser's 400 naming nothing); the same digits inside a string are text."""
    with server.client(server.create_key("reward")) as c:
        reply = c.post("/v1/verify", content=ODD_BODIES[name].encode(), headers={"Content-Type": "application/json"})
        assert reply.status_code == 422 and reply.json()["detail"].startswith(f"{field}: an integer of 5000 digits"), \
            reply.text[:300]
        as_text = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": RIGHT,
                                             "request_id": HUGE_INT})
        assert as_text.status_code in (200, 422), as_text.text[:300]
        assert "5000 digits" not in as_text.text
        honest = c.post("/v1/verify", json={"verifier": "math", "task": MATH_TASK, "response": RIGHT})
        assert honest.status_code == 200 and honest.json()["reward"] == 1.0
