"""The node side of the Ray executor: one plain Ray task per verification call.

A task runs in a Ray worker process on a sandbox node (one that advertises the
`assay_sandbox` resource) and judges its responses with the existing sandbox backend,
its limits and its timeouts, exactly as the local executor does. A timeout is a verdict
the task returns, not a task failure. The task writes nothing: it returns the judged
outcomes to the API replica, which alone writes records, so a retried task cannot log a
response twice.

Each Ray worker process keeps one warm sandbox per configuration, created on its first
task and closed when the process exits, so a task does not pay the pool's start-up.
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import ray

from sandboxes.base import Sandbox
from sandboxes.factory import create_sandbox
from service.judging import Judged, error_kind, error_outcome, judge
from verifiers import registry
from verifiers.base import TaskInvalid, VerifyContext

log = logging.getLogger(__name__)

# The custom resource only sandbox nodes advertise (ray start --resources='{"assay_sandbox": N}').
SANDBOX_RESOURCE = "assay_sandbox"


@dataclass(frozen=True)
class SandboxSpec:
    """How the node builds its sandbox and verifier context: the replica's settings, passed
    as plain values (nodes read no Assay settings of their own)."""

    backend: str
    workers: int
    image: str
    unsafe_no_isolation: bool = False
    # External services verifiers may use (VerifyContext.services), as sorted pairs.
    services: tuple[tuple[str, str], ...] = ()

    def context(self, sandbox: Sandbox, reveal_hidden: bool = True) -> VerifyContext:
        return VerifyContext(sandbox, reveal_hidden, services=dict(self.services))


@dataclass
class NodeResult:
    judged: list[Judged] = field(default_factory=list)
    task_invalid: str | None = None  # the task itself is unusable: the replica answers 4xx
    node: str = ""


class WarmSandboxes:
    """Sandboxes of this worker process, one per spec, with the verifiers warmed on them."""

    def __init__(self) -> None:
        self._boxes: dict[SandboxSpec, Sandbox] = {}
        self._warmed: set[tuple[SandboxSpec, str]] = set()
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, spec: SandboxSpec, verifier_name: str) -> Sandbox:
        with self._lock:
            box = self._boxes.get(spec)
            if box is None:
                box = self._boxes[spec] = create_sandbox(spec.backend, workers=spec.workers, image=spec.image,
                                                         unsafe_no_isolation=spec.unsafe_no_isolation)
            if (spec, verifier_name) not in self._warmed:
                registry.get(verifier_name).warm(spec.context(box))
                self._warmed.add((spec, verifier_name))
            return box

    def close(self) -> None:
        with self._lock:
            for spec, name in self._warmed:
                try:
                    registry.get(name).close(spec.context(self._boxes[spec]))
                except Exception:  # closing at exit: report, go on
                    log.exception("closing verifier %s", name)
            for box in self._boxes.values():
                box.close()
            self._boxes.clear()
            self._warmed.clear()


WARM = WarmSandboxes()


def judge_on_node(spec: SandboxSpec, verifier_name: str, raw_task: dict[str, Any], responses: list[str],
                   reveal_hidden: bool) -> NodeResult:
    node = socket.gethostname()
    verifier = registry.get(verifier_name)
    try:
        task = verifier.parse_task(raw_task)
        box = WARM.get(spec, verifier_name)
        return NodeResult(judge(verifier, task, responses, spec.context(box, reveal_hidden)), node=node)
    except TaskInvalid as exc:
        return NodeResult(task_invalid=str(exc), node=node)
    except Exception as exc:  # the node's sandbox could not start: an infrastructure failure
        log.exception("sandbox on node %s failed", node)
        return NodeResult([Judged(error_outcome(error_kind(exc), exc, verifier_name), 0.0) for _ in responses],
                          node=node)


# Remote-wrapped under its own name, so that Ray pickles `judge_on_node` by reference (the
# nodes import this module) rather than by value with this process's warm sandboxes.
verify_on_node = ray.remote(judge_on_node)
