"""Environment sessions (`/v1/envs`) kept in the database, so any API replica can serve
any step of any session.

A session row holds the open request (the task, inline or by id) and the calls made so
far, as sent. A step rebuilds the environment by replaying those calls from the task's
initial state (the domain packs are deterministic), runs the new call, and writes the
longer call list only over the version it read: two replicas stepping the same session
at once serialise, the loser re-reading and re-running its call after the winner's.

Steps run the domain pack here, on the trusted side: it is our own code operating on
plain JSON data (tools are looked up in a table; nothing from the agent is evaluated).
The verdict does not trust these steps either: finishing replays the recorded calls in
the sandbox like any other response.

Sessions expire after an idle time and are capped per API key and in total (settings
ASSAY_ENV_TTL_S, ASSAY_ENV_MAX_PER_KEY, ASSAY_ENV_MAX_SESSIONS). Across replicas the caps
are checked then written, not locked: two replicas opening at the same instant may pass a
cap by one each.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, or_, select, update

from service.config import Settings
from service.errors import EnvSessionConflict, EnvSessionLimit, EnvSessionNotFound, EnvSessionsFull, EnvSessionTooLarge
from service.store import AuditStore
from service.tables import EnvSessionRow
from verifiers.tool_state.inside.env import Environment, Event
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.task import ToolStateTask

# How often a step re-reads and re-runs after another replica changed the session first.
STEP_ATTEMPTS = 8


@dataclass(frozen=True)
class StepDone:
    event: Event
    steps_left: int


class EnvSessionStore:
    def __init__(self, store: AuditStore, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        # Wall-clock time: replicas compare each other's timestamps.
        self.store, self.clock = store, clock
        self.ttl_s = settings.env_ttl_s
        self.finished_keep_s = settings.env_finished_keep_s
        self.max_per_key = settings.env_max_per_key
        self.max_sessions = settings.env_max_sessions
        self.max_state_chars = settings.env_max_state_chars
        self.finish_room_chars = settings.env_finish_room_chars
        self.max_response_chars = settings.max_response_chars

    # ----------------------------------------------------------------- reads

    def _expired(self, row: EnvSessionRow, now: float) -> bool:
        keep = self.finished_keep_s if row.result is not None else self.ttl_s
        return now - row.touched_at > keep

    def get(self, env_id: str, key_id: str) -> EnvSessionRow:
        with self.store.db() as s:
            row = s.get(EnvSessionRow, env_id)
        # Another key's session reads as missing: ids are not an oracle.
        if row is None or row.caller_key_id != key_id or self._expired(row, self.clock()):
            raise EnvSessionNotFound(f"no environment session {env_id[:64]!r} (finished long ago, expired or "
                                     "never opened)")
        return row

    # --------------------------------------------------------------- changes

    def open(self, key_id: str, opened: dict[str, Any], task: ToolStateTask) -> EnvSessionRow:
        state_chars = len(json.dumps(task.initial()))
        if state_chars > self.max_state_chars:
            raise EnvSessionTooLarge(f"task.initial_state: {state_chars} characters as JSON; environment sessions "
                                     f"take at most {self.max_state_chars}")
        now = self.clock()
        with self.store.db() as s, s.begin():
            s.execute(delete(EnvSessionRow).where(or_(
                (EnvSessionRow.result.is_(None)) & (EnvSessionRow.touched_at < now - self.ttl_s),
                (EnvSessionRow.result.is_not(None)) & (EnvSessionRow.touched_at < now - self.finished_keep_s))))
            live = select(func.count()).select_from(EnvSessionRow).where(EnvSessionRow.result.is_(None))
            if (s.scalar(live.where(EnvSessionRow.caller_key_id == key_id)) or 0) >= self.max_per_key:
                raise EnvSessionLimit(f"this API key has {self.max_per_key} open environment sessions (the limit); "
                                      "finish or delete one first")
            if (s.scalar(live) or 0) >= self.max_sessions:
                raise EnvSessionsFull(f"the service holds {self.max_sessions} open environment sessions (the "
                                      "limit); retry later")
            row = EnvSessionRow(id=f"env_{secrets.token_urlsafe(16)}", caller_key_id=key_id, opened=opened,
                                calls=[], trace_chars=0, version=0, touched_at=now)
            s.add(row)
        return row

    def step(self, env_id: str, key_id: str, task: ToolStateTask, tool: str, args: dict[str, Any]) -> StepDone:
        call = {"tool": tool, "args": args}
        # The finished trace goes through /v1/verify's response limit: refuse the step that
        # would make the session impossible to finish rather than fail at the end.
        size = len(json.dumps(call, separators=(",", ":"), ensure_ascii=False)) + 1
        room = self.max_response_chars - self.finish_room_chars
        for _ in range(STEP_ATTEMPTS):
            row = self.get(env_id, key_id)
            if row.finishing_since is not None or row.result is not None:
                raise EnvSessionConflict("the session is finished")
            if len(row.calls) >= task.max_calls:
                raise EnvSessionConflict(f"the task allows at most {task.max_calls} calls; finish the session")
            if row.trace_chars + size > room:
                raise EnvSessionConflict(f"the trace would exceed the service's response limit "
                                         f"({self.max_response_chars} characters); finish the session")
            env = replay(task, row.calls)
            event = env.step(tool, args)
            # Recorded as sent, so the finish trace replays to exactly these events.
            if self._write(row, calls=[*row.calls, call], trace_chars=row.trace_chars + size):
                return StepDone(event, task.max_calls - len(row.calls) - 1)
        raise EnvSessionConflict("the session is being changed by other requests; retry the step")

    def claim_finish(self, env_id: str, key_id: str) -> EnvSessionRow:
        """The session, marked as being finished by the caller; or, finished already, with its result."""
        row = self.get(env_id, key_id)
        if row.result is not None:
            return row
        # A replica that dies while finishing leaves its claim: the session then expires
        # after the idle time, and the trace can still be sent to /v1/verify.
        if row.finishing_since is not None or not self._write(row, finishing_since=self.clock()):
            raise EnvSessionConflict("the session is being finished by another request")
        return row

    def finished(self, env_id: str, result: dict[str, Any]) -> None:
        with self.store.db() as s, s.begin():
            s.execute(update(EnvSessionRow).where(EnvSessionRow.id == env_id).values(
                result=result, finishing_since=None, touched_at=self.clock(), version=EnvSessionRow.version + 1))

    def release(self, env_id: str) -> None:
        """Give up a finish claim, so that the trainer may retry (e.g. after a 503)."""
        with self.store.db() as s, s.begin():
            s.execute(update(EnvSessionRow).where(EnvSessionRow.id == env_id).values(
                finishing_since=None, version=EnvSessionRow.version + 1))

    def remove(self, env_id: str, key_id: str) -> None:
        self.get(env_id, key_id)
        with self.store.db() as s, s.begin():
            s.execute(delete(EnvSessionRow).where(EnvSessionRow.id == env_id))

    def _write(self, row: EnvSessionRow, **values: Any) -> bool:
        """Change the session only if nobody changed it since `row` was read."""
        with self.store.db() as s, s.begin():
            done = s.execute(update(EnvSessionRow)
                             .where(EnvSessionRow.id == row.id, EnvSessionRow.version == row.version)
                             .values(version=row.version + 1, touched_at=self.clock(), **values))
        return done.rowcount == 1


def start(task: ToolStateTask) -> Environment:
    return Environment.start(get_pack(task.environment), task.initial(), task.actor, task.allowed_tools)


def replay(task: ToolStateTask, calls: list[dict[str, Any]]) -> Environment:
    """The environment after `calls`, rebuilt from the task's initial state."""
    env = start(task)
    for call in calls:
        env.step(call["tool"], call["args"])
    return env
