"""Work done once per task, not once per request.

A trainer that asks for one reward per sample (verl's default reward manager, many user
scripts) sends the same inline task with each of a group's responses. Parsing the task,
its keyed hash and its public view (service/fingerprints.py) are the same every time: the
engine keeps them per task here, keyed by the verifier and the task's exact JSON.

An inline task is pure CPU work to resolve, as the request's own validation is: it is
resolved on the event loop (`resolve_where_cheap`), sparing the request a hop to a worker
thread. A registered task is read from the store, on a worker thread as before.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import anyio

T = TypeVar("T")
# Bounds: entries, and characters of task JSON held in all (a task larger than a tenth of it is not kept).
MAX_TASKS = 2048
MAX_CHARS = 16 * 1024 * 1024


class _Ref(Protocol):
    task_id: str | None


class ResolvedTasks:
    """A bounded LRU of resolved inline tasks (whatever `make` returns for them)."""

    def __init__(self, max_tasks: int = MAX_TASKS, max_chars: int = MAX_CHARS) -> None:
        self.max_tasks, self.max_chars = max_tasks, max_chars
        self._entries: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, verifier: str, task: dict[str, Any], make: Callable[[], T]) -> T:
        """The resolved task, made once per (verifier, task JSON). What `make` raises (an invalid
        task) is raised every time, never kept."""
        try:
            text = json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):  # not plain JSON: nothing to key it by
            return make()
        key = (verifier, text)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        made = make()
        if len(text) * 10 > self.max_chars:
            return made
        with self._lock:
            if key not in self._entries:
                self._entries[key] = made
                self._chars += len(text)
                while len(self._entries) > self.max_tasks or self._chars > self.max_chars:
                    (_, old_text), _ = self._entries.popitem(last=False)
                    self._chars -= len(old_text)
        return made


async def resolve_where_cheap(resolve: Callable[..., T], request: Any, refs: Sequence[_Ref]) -> T:
    """`resolve(request)` on the event loop when every task is inline (CPU only, mostly cached);
    on a worker thread when one is registered (a store read)."""
    if all(ref.task_id is None for ref in refs):
        return resolve(request)
    return await anyio.to_thread.run_sync(resolve, request)
