"""The node side of the Ray executor: one plain Ray task per verification call.

A task runs in a Ray worker process on a sandbox node (one that advertises the
`assay_sandbox` resource) and verifies its responses with the sandbox the replica's
settings describe (`SandboxConfig`: backend, image, timeouts, host label, jobs per
container; the node reads no Assay settings of its own), exactly as the local executor
does. A timeout is a verdict the task returns, not a task failure. The task writes
nothing: it returns the outcomes to the API replica, which alone writes records, so a
retried task cannot log a response twice.

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

from sandboxes.base import Sandbox, SandboxBusy, SandboxUnavailable
from sandboxes.factory import SandboxConfig, build_sandbox
from service.executors.base import Judged, error_kind, error_outcome, run_verifier
from verifiers import registry
from verifiers.base import TaskInvalid, VerifyContext

log = logging.getLogger(__name__)

# The custom resource only sandbox nodes advertise (ray start --resources='{"assay_sandbox": N}').
SANDBOX_RESOURCE = "assay_sandbox"
Services = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class NodeJob:
    """One call, as plain values: the sandbox to use, the verifier's services, the work."""

    sandbox: SandboxConfig
    services: Services  # external services verifiers may use (VerifyContext.services), sorted pairs
    verifier: str
    raw_task: dict[str, Any]
    responses: list[str]
    reveal_hidden: bool


@dataclass
class NodeResult:
    judged: list[Judged] = field(default_factory=list)
    task_invalid: str | None = None  # the task itself is unusable: the replica answers 4xx
    # The node's sandbox is busy or missing: (sandbox_busy | sandbox_unavailable, message); 503 on the replica.
    retry_later: tuple[str, str] | None = None
    node: str = ""


def _context(box: Sandbox, services: Services, reveal_hidden: bool = True) -> VerifyContext:
    return VerifyContext(box, reveal_hidden, services=dict(services))


class WarmSandboxes:
    """Sandboxes of this worker process, one per configuration, with the verifiers warmed on them."""

    def __init__(self) -> None:
        self._boxes: dict[SandboxConfig, Sandbox] = {}
        self._warmed: dict[tuple[SandboxConfig, str], Services] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, config: SandboxConfig, services: Services, verifier_name: str) -> Sandbox:
        with self._lock:
            box = self._boxes.get(config)
            if box is None:
                box = self._boxes[config] = build_sandbox(config)
            if (config, verifier_name) not in self._warmed:
                registry.get(verifier_name).warm(_context(box, services))
                self._warmed[(config, verifier_name)] = services
            return box

    def close(self) -> None:
        with self._lock:
            for (config, name), services in self._warmed.items():
                try:
                    registry.get(name).close(_context(self._boxes[config], services))
                except Exception:  # closing at exit: report, go on
                    log.exception("closing verifier %s", name)
            for box in self._boxes.values():
                box.close()
            self._boxes.clear()
            self._warmed.clear()


WARM = WarmSandboxes()


def verify_on_node(job: NodeJob) -> NodeResult:
    node = socket.gethostname()
    verifier = registry.get(job.verifier)
    try:
        task = verifier.parse_task(job.raw_task)
        box = WARM.get(job.sandbox, job.services, job.verifier)
        judged = run_verifier(verifier, task, job.responses, _context(box, job.services, job.reveal_hidden))
        return NodeResult(judged, node=node)
    except TaskInvalid as exc:
        return NodeResult(task_invalid=str(exc), node=node)
    except SandboxBusy as exc:  # the same saturation rule as the local executor: 503, nothing logged
        return NodeResult(retry_later=("sandbox_busy", str(exc)[:500]), node=node)
    except SandboxUnavailable as exc:
        return NodeResult(retry_later=("sandbox_unavailable", str(exc)[:500]), node=node)
    except Exception as exc:  # any other failure of the node: an infrastructure failure
        log.exception("sandbox on node %s failed", node)
        return NodeResult([Judged(error_outcome(error_kind(exc), exc, job.verifier), 0.0) for _ in job.responses],
                          node=node)


# Remote-wrapped under its own name, so that Ray pickles `verify_on_node` by reference (the
# nodes import this module) rather than by value with this process's warm sandboxes.
run_on_node = ray.remote(verify_on_node)
