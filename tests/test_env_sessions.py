"""The environment-session store in the database, through its Python API: expiry on an
injected clock (no sleeps), the caps, and two stores on one database acting as two
API replicas."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import Settings
from service.env_sessions import EnvSessionStore
from service.errors import (
    EnvSessionConflict,
    EnvSessionLimit,
    EnvSessionNotFound,
    EnvSessionsFull,
    EnvSessionTooLarge,
    RetryLater,
)
from service.store import AuditStore
from verifiers import registry
from verifiers.tool_state.examples import GOLD_TRANSFER, bank_state, transfer_task
from verifiers.tool_state.task import ToolStateTask


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def parsed(raw: dict) -> ToolStateTask:
    task = registry.get("tool_state").parse_task(raw)
    assert isinstance(task, ToolStateTask)
    return task


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'sessions.db'}", env_ttl_s=10, env_finished_keep_s=30,
                    env_max_per_key=2, env_max_sessions=3, max_response_chars=4000, env_finish_room_chars=1000)


def test_sessions_expire_on_the_clock_and_the_caps_hold(settings: Settings) -> None:
    clock = Clock()
    sessions = EnvSessionStore(AuditStore(settings.database_url), settings, clock)
    raw = transfer_task()
    task = parsed(raw)
    first = sessions.open("k1", {"task": raw}, task)
    sessions.open("k1", {"task": raw}, task)
    with pytest.raises(EnvSessionLimit, match="this API key has 2") as per_key:
        sessions.open("k1", {"task": raw}, task)
    assert not isinstance(per_key.value, RetryLater)  # this key must finish one: no retry helps
    sessions.open("k2", {"task": raw}, task)
    with pytest.raises(EnvSessionsFull, match="the service holds 3") as total:
        sessions.open("k3", {"task": raw}, task)
    assert isinstance(total.value, RetryLater)  # answered with Retry-After from the settings
    with pytest.raises(EnvSessionNotFound):
        sessions.get(first.id, "k2")  # another key's session reads as missing
    clock.now += 9
    sessions.step(first.id, "k1", task, "list_accounts", {})  # a step keeps it alive
    clock.now += 9
    assert sessions.get(first.id, "k1").calls == [{"tool": "list_accounts", "args": {}}]
    clock.now += 11
    with pytest.raises(EnvSessionNotFound, match="expired"):
        sessions.get(first.id, "k1")
    assert sessions.open("k3", {"task": raw}, task).id  # expired sessions no longer count


def test_two_stores_on_one_database_share_sessions_like_two_replicas(settings: Settings) -> None:
    clock = Clock()
    replica_a = EnvSessionStore(AuditStore(settings.database_url), settings, clock)
    replica_b = EnvSessionStore(AuditStore(settings.database_url), settings, clock)
    raw = transfer_task()
    task = parsed(raw)
    env_id = replica_a.open("k", {"task": raw}, task).id
    listed = replica_b.step(env_id, "k", task, "list_accounts", {})
    moved = replica_a.step(env_id, "k", task, GOLD_TRANSFER["tool"], GOLD_TRANSFER["args"])
    balance = replica_b.step(env_id, "k", task, "get_balance", {"account_id": "A1"})
    assert (listed.event.index, moved.event.index, balance.event.index) == (0, 1, 2)
    assert moved.event.ok and balance.event.result["balance"] == 450  # b sees a's transfer
    assert balance.steps_left == task.max_calls - 3
    claimed = replica_a.claim_finish(env_id, "k")
    with pytest.raises(EnvSessionConflict, match="being finished"):
        replica_b.claim_finish(env_id, "k")
    with pytest.raises(EnvSessionConflict, match="finished"):
        replica_b.step(env_id, "k", task, "list_accounts", {})
    assert len(claimed.calls) == 3
    replica_a.finished(env_id, {"verdict": "correct"})
    assert replica_b.claim_finish(env_id, "k").result == {"verdict": "correct"}
    clock.now += 31
    with pytest.raises(EnvSessionNotFound):
        replica_b.get(env_id, "k")


def test_a_released_claim_lets_the_finish_be_retried(settings: Settings) -> None:
    clock = Clock()
    sessions = EnvSessionStore(AuditStore(settings.database_url), settings, clock)
    raw = transfer_task()
    task = parsed(raw)
    env_id = sessions.open("k", {"task": raw}, task).id
    sessions.claim_finish(env_id, "k")
    clock.now += 5
    with pytest.raises(EnvSessionConflict):
        sessions.claim_finish(env_id, "k")
    sessions.release(env_id)  # what a replica does when verification failed (e.g. a 503)
    assert sessions.claim_finish(env_id, "k").finishing_since is None  # the row as read, before the claim
    with pytest.raises(EnvSessionConflict):
        sessions.claim_finish(env_id, "k")


def test_steps_stop_before_the_trace_outgrows_the_response_limit(settings: Settings) -> None:
    sessions = EnvSessionStore(AuditStore(settings.database_url), settings, Clock())
    raw = transfer_task()
    task = parsed(raw)
    env_id = sessions.open("k", {"task": raw}, task).id
    sessions.step(env_id, "k", task, "get_balance", {"account_id": "A" * 1500})
    with pytest.raises(EnvSessionConflict, match="response limit"):
        sessions.step(env_id, "k", task, "get_balance", {"account_id": "A" * 1500})


def test_huge_initial_states_are_refused(settings: Settings) -> None:
    small = settings.model_copy(update={"env_max_state_chars": 100})
    sessions = EnvSessionStore(AuditStore(settings.database_url), small, Clock())
    raw = transfer_task()
    assert len(str(bank_state())) > 100
    with pytest.raises(EnvSessionTooLarge, match="task.initial_state"):
        sessions.open("k", {"task": raw}, parsed(raw))
