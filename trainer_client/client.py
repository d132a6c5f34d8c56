"""HTTP client for the Assay reward API, sync (`RewardClient`) and async (`AsyncRewardClient`).

Groups are packed into `POST /v1/groups` requests of at most `max_responses_per_request`
responses, sent with at most `max_concurrency` requests in flight. Each request carries an
`Idempotency-Key` that stays the same across its retries, so a retry after a lost answer
returns the stored result instead of verifying (and logging) the responses twice.
Connection errors, timeouts, 429 and 5xx are retried with exponential backoff, honouring
`Retry-After`. A request that still fails yields `error` verdicts for its responses: it is
never turned into a reward here; `ErrorPolicy` is the caller's choice.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import threading
import time
import uuid
from collections.abc import Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from assay_rules.canonical import task_sent
from trainer_client.receipts import (
    ReceiptError,
    ReceiptKey,
    ReplayGuard,
    check_eval,
    check_result,
    check_task_sent,
)
from trainer_client.results import (
    Generation,
    Group,
    GroupResult,
    ResponseResult,
    RewardError,
    RewardRequestError,
    client_error_result,
    group_stats,
    merge_parts,
)

GroupLike = Group | dict[str, Any]


@dataclass(frozen=True)
class _Send:
    """One HTTP attempt for a transport to make."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


# What a transport hands back for a _Send: the response or the transport error, and seconds taken.
AttemptAnswer = tuple[httpx.Response | httpx.TransportError, float]
Attempts = Generator[_Send | float, AttemptAnswer, tuple[dict[str, Any] | None, str]]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 0)."""
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, self.max_backoff_s)
        # Full jitter: spreads the retries of many trainer workers hitting one service.
        return random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass
class ClientStats:
    """Counters a training loop logs per step (read with `take()`, which resets them)."""

    http_requests: int = 0
    retries: int = 0
    timeouts: int = 0
    failed_requests: int = 0
    responses: int = 0
    error_verdicts: int = 0
    latency_s: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def add_latency(self, seconds: float) -> None:
        with self._lock:
            self.latency_s.append(seconds)

    def take(self) -> dict[str, float]:
        with self._lock:
            lat = sorted(self.latency_s)
            out = {
                "reward_service/http_requests": float(self.http_requests),
                "reward_service/retries": float(self.retries),
                "reward_service/timeouts": float(self.timeouts),
                "reward_service/failed_requests": float(self.failed_requests),
                "reward_service/responses": float(self.responses),
                "reward_service/errors": float(self.error_verdicts),
                "reward_service/latency_mean_s": sum(lat) / len(lat) if lat else 0.0,
                "reward_service/latency_max_s": lat[-1] if lat else 0.0,
            }
            self.http_requests = self.retries = self.timeouts = self.failed_requests = 0
            self.responses = self.error_verdicts = 0
            self.latency_s = []
            return out


@dataclass(frozen=True)
class _Part:
    group_index: int
    group: Group


def plan_requests(groups: Sequence[Group], max_responses: int, max_groups: int = 64,
                  max_group_size: int = 64) -> list[list[_Part]]:
    """Pack groups into requests of at most `max_responses` responses and `max_groups`
    groups (the service's limits), in order.

    A group larger than `max_group_size` or `max_responses` is split into parts; the parts'
    statistics are merged back client-side (`merge_parts`), so advantages are still over
    the whole group.
    """
    if min(max_responses, max_groups, max_group_size) < 1:
        raise ValueError("request bounds must be >= 1")
    part_size = min(max_responses, max_group_size)
    requests: list[list[_Part]] = []
    current: list[_Part] = []
    size = 0
    for gi, group in enumerate(groups):
        responses = group.responses
        for start in range(0, len(responses), part_size):
            chunk = responses[start : start + part_size]
            if current and (size + len(chunk) > max_responses or len(current) >= max_groups):
                requests.append(current)
                current, size = [], 0
            part = group if len(chunk) == len(responses) else group.model_copy(update={"responses": chunk})
            current.append(_Part(gi, part))
            size += len(chunk)
    if current:
        requests.append(current)
    return requests


def _body(parts: list[_Part], scale: str, eps: float, run: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "groups": [p.group.payload() for p in parts]
    }
    if run is not None:
        body["run"] = run
    if scale in ("group", "none"):  # the service scales per group or not at all; `batch` is the trainer's job
        body["advantage"] = {"scale": scale, "eps": eps}
    return body


def _failed(parts: list[_Part], reason: str, detail: str) -> list[GroupResult]:
    out = []
    for p in parts:
        n = len(p.group.responses)
        results = [client_error_result(reason, detail) for _ in range(n)]
        out.append(GroupResult(results=results, rewards=[None] * n, advantages=[None] * n, zero_variance=True))
    return out


def _text(response: str | Generation) -> str:
    return response if isinstance(response, str) else response.text


def _check_group(part: _Part, group: dict[str, Any], key: ReceiptKey, scale: str, eps: float,
                 guard: ReplayGuard | None = None, call: tuple[str, datetime] | None = None) -> None:
    """Every result's receipt, and the group's rewards and advantages against the signed rewards;
    with `guard`, that no receipt answered another request (`call`: this one's token and start)
    and that the group's results are about one task, the one sent (the signed `task_sent`)."""
    results, responses = group.get("results") or [], part.group.responses
    if len(results) != len(responses):
        raise ReceiptError("the service returned a different number of results than responses")
    payloads = [check_result(r, key, _text(t)) for r, t in zip(results, responses, strict=True)]
    if len({p["task_hash"] for p in payloads}) > 1:
        raise ReceiptError("the group's receipts name more than one task: results of other groups spliced in")
    if guard is not None and call is not None:
        for payload in payloads:
            guard.accept(payload, call[0], call[1])
    # Last, so that the narrower refusals above name what they catch: every receipt signs this task.
    sent = task_sent(part.group.verifier, part.group.task, part.group.task_id)
    for payload in payloads:
        check_task_sent(payload, sent)
    signed = [float(p["reward"]) for p in payloads]
    if [float(r) if r is not None else None for r in group.get("rewards", signed)] != signed:
        raise ReceiptError(f"the group's rewards {group.get('rewards')} differ from the signed rewards {signed}")
    counted = [None if r.get("verdict") == "error" or r.get("masked") else v
               for r, v in zip(results, signed, strict=True)]
    expected, _, _, _ = group_stats(counted, scale=scale if scale in ("group", "none") else "group", eps=eps)
    got = group.get("advantages", expected)
    if len(got) != len(expected) or any((a is None) != (b is None) or (a is not None and abs(a - b) > 1e-6)
                                        for a, b in zip(got, expected, strict=False)):
        raise ReceiptError(f"the group's advantages {got} do not follow from the signed rewards {signed}")


def _parse_groups(parts: list[_Part], data: dict[str, Any], key: ReceiptKey | None = None, scale: str = "group",
                  eps: float = 1e-4, guard: ReplayGuard | None = None,
                  call: tuple[str, datetime] | None = None) -> list[GroupResult]:
    raw = data.get("groups")
    if not isinstance(raw, list) or len(raw) != len(parts):
        raise RewardRequestError(200, f"malformed groups response: {str(data)[:300]}")
    if key is not None:
        for p, g in zip(parts, raw, strict=True):
            if not (isinstance(g, dict) and isinstance(g.get("error"), dict)):
                _check_group(p, g if isinstance(g, dict) else {}, key, scale, eps, guard, call)
    # A group whose task the service found invalid has no results: its responses count as
    # errors (no reward, no advantage), named by the service's message.
    results = [_failed([p], "task_invalid", str(g["error"].get("message")))[0]
               if isinstance(g, dict) and isinstance(g.get("error"), dict) else GroupResult.model_validate(g)
               for p, g in zip(parts, raw, strict=True)]
    for p, r in zip(parts, results, strict=True):
        if len(r.results) != len(p.group.responses):
            raise RewardRequestError(200, "the service returned a different number of results than responses")
    return results


def _assemble(groups: Sequence[Group], plan: list[list[_Part]], answers: list[list[GroupResult]],
              scale: str, eps: float) -> list[GroupResult]:
    pieces: list[list[GroupResult]] = [[] for _ in groups]
    for parts, results in zip(plan, answers, strict=True):
        for part, result in zip(parts, results, strict=True):
            pieces[part.group_index].append(result)
    return [merge_parts(p, scale=scale, eps=eps) for p in pieces]


def _as_groups(groups: Iterable[GroupLike]) -> list[Group]:
    return [g if isinstance(g, Group) else Group.model_validate(g) for g in groups]


class _Base:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        max_responses_per_request: int = 256,
        max_groups_per_request: int = 64,
        max_group_size: int = 64,
        max_concurrency: int = 4,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        scale: str = "group",
        eps: float = 1e-4,
        run_id: str | None = None,
        receipt_key: str | bytes | ReceiptKey | None = None,
        receipt_max_age_s: float | None = 300.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Receipts are checked when a key is given (or ASSAY_RECEIPT_KEY is set; "" turns it off).
        key = os.environ.get("ASSAY_RECEIPT_KEY") if receipt_key is None else receipt_key
        self.receipt_key = ReceiptKey.parse(key) if key else None
        # A genuine receipt handed back for another request (receipts.ReplayGuard).
        self.replay_guard = ReplayGuard(max_age_s=receipt_max_age_s)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.max_responses_per_request = max_responses_per_request
        self.max_groups_per_request = max_groups_per_request
        self.max_group_size = max_group_size
        self.max_concurrency = max_concurrency
        self.timeout = httpx.Timeout(timeout_s)
        self.retry = retry or RetryPolicy()
        # Only used to recompute statistics of a group the client split over requests.
        self.scale, self.eps = scale, eps
        self.stats = ClientStats()
        # The training run every request names (`run: {id, step}`), once a loop has set the step.
        self.run_id = run_id
        self.step: int | None = None

    def at_step(self, step: int) -> None:
        """The trainer's global step: later requests are logged under (run_id, step)."""
        self.step = step

    def run_tag(self) -> dict[str, Any] | None:
        if self.run_id is None or self.step is None:
            return None
        return {"id": self.run_id, "step": self.step}

    def _plan(self, groups: Sequence[Group]) -> list[list[_Part]]:
        return plan_requests(groups, self.max_responses_per_request, self.max_groups_per_request, self.max_group_size)

    def _verify_body(self, verifier: str, response: str, task: dict[str, Any] | None, task_id: str | None,
                     request_id: str | None) -> dict[str, Any]:
        ref = Group(verifier=verifier, task=task, task_id=task_id, responses=[response]).task_ref()
        # /v1/verify is idempotent by request_id: a retry with the same id returns the logged result.
        body = {"verifier": verifier, **ref, "response": response, "request_id": request_id or uuid.uuid4().hex}
        run = self.run_tag()
        return body if run is None else {**body, "run": run}

    def _classify(self, resp: httpx.Response) -> dict[str, Any] | None:
        """Parsed JSON of a success, None if the status is retryable; raises otherwise."""
        if resp.status_code in self.retry.retry_statuses:
            return None
        if resp.status_code >= 400:
            raise RewardRequestError(resp.status_code, resp.text)
        try:
            return resp.json()
        except ValueError:  # a truncated or garbled body (a proxy in the way): retry
            return None

    def _attempts(self, path: str, body: dict[str, Any]) -> Attempts:
        """The one retry loop, shared by the sync and async transports.

        It yields the request to send (the transport answers with the response or the
        transport error, and the seconds it took) or a float, the pause before the next
        attempt; it returns (json, "") on success or (None, reason) once attempts run out.
        The idempotency key stays the same across the retries of one request.
        """
        send = _Send(path, body, {"Idempotency-Key": uuid.uuid4().hex})
        reason = "unavailable"
        for attempt in range(self.retry.max_attempts):
            if attempt:
                self.stats.add(retries=1)
            self.stats.add(http_requests=1)
            answer, elapsed = yield send
            retry_after = None
            if isinstance(answer, httpx.Response):
                self.stats.add_latency(elapsed)
                data = self._classify(answer)
                if data is not None:
                    return data, ""
                reason, retry_after = f"http_{answer.status_code}", answer.headers.get("Retry-After")
            elif isinstance(answer, httpx.TimeoutException):
                self.stats.add(timeouts=1)
                reason = "timeout"
            else:
                reason = "connection"
            if attempt + 1 < self.retry.max_attempts:
                yield self.retry.delay(attempt, retry_after)
        self.stats.add(failed_requests=1)
        return None, reason

    def _verify_result(self, data: dict[str, Any] | None, reason: str, body: dict[str, Any],
                       sent_at: datetime | None) -> ResponseResult:
        """`sent_at`: when the call began, None when the caller named its request_id (the
        record logged for that id earlier is then the right answer)."""
        if data is None:
            return client_error_result(reason, "request failed")
        if self.receipt_key is not None:
            payload = check_result(data, self.receipt_key, body["response"])
            self.replay_guard.accept(payload, f"verify:{body['request_id']}", sent_at)
            check_task_sent(payload, task_sent(body["verifier"], body.get("task"), body.get("task_id")),
                            body["request_id"])
        return ResponseResult.model_validate(data)

    def _checked_eval(self, data: dict[str, Any], body: dict[str, Any],
                      groups: dict[str, list[Group]]) -> dict[str, Any]:
        """The report, once its receipts and the signature over its figures are checked (receipts.check_eval)."""
        if self.receipt_key is not None:
            sent = {family: [(task_sent(g.verifier, g.task, g.task_id), [_text(r) for r in g.responses]) for g in gs]
                    for family, gs in groups.items()}
            check_eval(data, self.receipt_key, body["name"], body["checkpoint"], sent)
        return data

    def _count_results(self, results: list[GroupResult]) -> None:
        self.stats.add(
            responses=sum(len(g.results) for g in results), error_verdicts=sum(g.n_errors for g in results)
        )


class RewardClient(_Base):
    """Blocking client; requests of one call run concurrently on a small thread pool."""

    def __init__(self, base_url: str, api_key: str | None = None, *, transport: httpx.BaseTransport | None = None,
                 **kwargs: Any) -> None:
        """`transport` goes to httpx as it is (e.g. starlette's TestClient transport, to talk
        to the app in-process); None: httpx's own, over the network."""
        super().__init__(base_url, api_key, **kwargs)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=self.timeout,
                                  transport=transport)

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """POST with retries. Returns (json, "") or (None, reason) once attempts run out."""
        attempts = self._attempts(path, body)
        step = next(attempts)
        try:
            while True:
                if isinstance(step, float):
                    time.sleep(step)
                    step = next(attempts)
                    continue
                started = time.monotonic()
                try:
                    answer: httpx.Response | httpx.TransportError = self._http.post(
                        step.path, json=step.body, headers=step.headers)
                except httpx.TransportError as exc:
                    answer = exc
                step = attempts.send((answer, time.monotonic() - started))
        except StopIteration as done:
            return done.value

    def score_groups(self, groups: Iterable[GroupLike]) -> list[GroupResult]:
        """Verify every group's responses; one GroupResult per group, in order."""
        groups = _as_groups(groups)
        plan = self._plan(groups)

        def send(parts: list[_Part]) -> list[GroupResult]:
            call = (f"groups:{uuid.uuid4().hex}", datetime.now(UTC))
            data, reason = self._post("/v1/groups", _body(parts, self.scale, self.eps, self.run_tag()))
            if data is None:
                return _failed(parts, reason, f"request failed after {self.retry.max_attempts} attempts")
            return _parse_groups(parts, data, self.receipt_key, self.scale, self.eps, self.replay_guard, call)

        if len(plan) == 1:
            answers = [send(plan[0])]
        else:
            with ThreadPoolExecutor(max_workers=max(1, self.max_concurrency)) as pool:
                answers = list(pool.map(send, plan))
        out = _assemble(groups, plan, answers, self.scale, self.eps)
        self._count_results(out)
        return out

    def verify(self, verifier: str, response: str, *, task: dict[str, Any] | None = None,
               task_id: str | None = None, request_id: str | None = None) -> ResponseResult:
        sent_at = None if request_id is not None else datetime.now(UTC)
        body = self._verify_body(verifier, response, task, task_id, request_id)
        data, reason = self._post("/v1/verify", body)
        result = self._verify_result(data, reason, body, sent_at)
        self.stats.add(responses=1, error_verdicts=int(result.is_error))
        return result

    def set_run_thresholds(self, thresholds: dict[str, Any]) -> dict[str, Any]:
        """Set this run's alarm thresholds (PUT /v1/runs/{run_id}/thresholds, `audit` scope): any
        part of them, e.g. `{"flag_rate": {"ignore": ["truncated", "answer_only"]}}`."""
        if self.run_id is None:
            raise ValueError("set_run_thresholds needs a client made with run_id=")
        resp = self._http.put(f"/v1/runs/{self.run_id}/thresholds", json=thresholds)
        if resp.status_code != 200:
            raise RewardRequestError(resp.status_code, resp.text)
        return resp.json()

    def evaluate(self, name: str, checkpoint: str, families: dict[str, Iterable[GroupLike]]) -> dict[str, Any]:
        """A held-out evaluation run (POST /v1/evals): each family's tasks with n responses
        each. Returns the report: {"id", "name", "checkpoint", "families": {NAME: REPORT},
        "overall": REPORT}, REPORT with pass_at_k, maj_at_k, mean_reward, ..."""
        parsed = {family: _as_groups(groups) for family, groups in families.items()}
        body = {"name": name, "checkpoint": checkpoint,
                "families": {family: [g.payload() for g in groups] for family, groups in parsed.items()}}
        if self.run_tag() is not None:  # the run's page shows it at this step
            body["run"] = self.run_tag()
        data, reason = self._post("/v1/evals", body)
        if data is None:
            raise RewardError(f"evaluation request failed after {self.retry.max_attempts} attempts: {reason}")
        return self._checked_eval(data, body, parsed)


class AsyncRewardClient(_Base):
    """asyncio client; at most `max_concurrency` requests in flight per client."""

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 transport: httpx.AsyncBaseTransport | None = None, **kwargs: Any) -> None:
        """`transport` goes to httpx as it is (e.g. `httpx.ASGITransport`); None: over the network."""
        super().__init__(base_url, api_key, **kwargs)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=self.timeout,
                                       transport=transport)
        self._sem: asyncio.Semaphore | None = None

    async def __aenter__(self) -> AsyncRewardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        if self._sem is None:  # created lazily: it binds to the running loop
            self._sem = asyncio.Semaphore(max(1, self.max_concurrency))
        attempts = self._attempts(path, body)
        step = next(attempts)
        try:
            while True:
                if isinstance(step, float):
                    # Sleep outside the semaphore so a backing-off request does not hold a slot.
                    await asyncio.sleep(step)
                    step = next(attempts)
                    continue
                async with self._sem:
                    started = time.monotonic()
                    try:
                        answer: httpx.Response | httpx.TransportError = await self._http.post(
                            step.path, json=step.body, headers=step.headers)
                    except httpx.TransportError as exc:
                        answer = exc
                    elapsed = time.monotonic() - started
                step = attempts.send((answer, elapsed))
        except StopIteration as done:
            return done.value

    async def score_groups(self, groups: Iterable[GroupLike]) -> list[GroupResult]:
        groups = _as_groups(groups)
        plan = self._plan(groups)

        async def send(parts: list[_Part]) -> list[GroupResult]:
            call = (f"groups:{uuid.uuid4().hex}", datetime.now(UTC))
            data, reason = await self._post("/v1/groups", _body(parts, self.scale, self.eps, self.run_tag()))
            if data is None:
                return _failed(parts, reason, f"request failed after {self.retry.max_attempts} attempts")
            return _parse_groups(parts, data, self.receipt_key, self.scale, self.eps, self.replay_guard, call)

        answers = list(await asyncio.gather(*(send(p) for p in plan)))
        out = _assemble(groups, plan, answers, self.scale, self.eps)
        self._count_results(out)
        return out

    async def verify(self, verifier: str, response: str, *, task: dict[str, Any] | None = None,
                     task_id: str | None = None, request_id: str | None = None) -> ResponseResult:
        sent_at = None if request_id is not None else datetime.now(UTC)
        body = self._verify_body(verifier, response, task, task_id, request_id)
        data, reason = await self._post("/v1/verify", body)
        result = self._verify_result(data, reason, body, sent_at)
        self.stats.add(responses=1, error_verdicts=int(result.is_error))
        return result
