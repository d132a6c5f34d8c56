"""The replica side of the Ray executor (ASSAY_EXECUTOR=ray): what an API process submits.

Each call of a group (see `base.calls_for`) is submitted as a plain Ray task that needs
one unit of `assay_sandbox` (so it only runs on sandbox nodes) and no CPU of the head; Ray
re-runs it up to `ray_max_retries` times when its worker or node dies. The pipeline awaits
the results from asyncio. A call that still fails, or outlasts `ray_task_timeout_s`, gives
its responses verdict `error`: an infrastructure failure, never a reward. A node whose
sandbox is busy or missing answers so, and the replica raises it as the local executor
would (503 + Retry-After, nothing logged). Ray is not a security boundary: see
docs/security.md.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from sandboxes.base import SandboxBusy, SandboxUnavailable
from service.config import Settings
from service.executors.base import Judged, JudgeJob, failed_calls, gather_calls
from service.executors.ray_node import SANDBOX_RESOURCE, NodeJob, NodeResult, run_on_node
from verifiers.base import TaskInvalid

log = logging.getLogger(__name__)

RETRY_LATER = {"sandbox_busy": SandboxBusy, "sandbox_unavailable": SandboxUnavailable}


class RayExecutor:
    def __init__(self, settings: Settings) -> None:
        if not ray.is_initialized():
            ray.init(address=settings.ray_address, namespace="assay", logging_level=logging.WARNING,
                     log_to_driver=False)
        self.address = settings.ray_address
        self.timeout_s = settings.ray_task_timeout_s
        self.backend = f"ray/{settings.sandbox}"
        # The same sandbox configuration as a local executor's, with the nodes' own worker count.
        self.sandbox = settings.sandbox_config(workers=settings.ray_sandbox_workers)
        self.services = tuple(sorted(settings.verifier_services.items()))
        self._remote = run_on_node.options(num_cpus=0, resources={SANDBOX_RESOURCE: 1},
                                           max_retries=settings.ray_max_retries, retry_exceptions=False)

    async def run(self, job: JudgeJob) -> list[Judged]:
        async def call(indexes: list[int]) -> list[Judged]:
            node_job = NodeJob(self.sandbox, self.services, job.verifier.name, job.raw_task,
                               [job.responses[i] for i in indexes], job.reveal_hidden)
            ref = self._remote.remote(node_job)
            try:
                result: NodeResult = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
            except TimeoutError as exc:
                ray.cancel(ref, force=True)
                return failed_calls(job, indexes, "executor_timeout", exc)
            except (ray.exceptions.RayError, OSError) as exc:  # retries used up, cluster gone
                return failed_calls(job, indexes, "executor_error", exc)
            if result.task_invalid is not None:
                raise TaskInvalid(result.task_invalid)
            if result.retry_later is not None:
                kind, message = result.retry_later
                raise RETRY_LATER[kind](f"{message} (node {result.node})")
            return result.judged

        return await gather_calls(job, call)

    def describe(self) -> dict[str, Any]:
        return {"executor": "ray", "address": self.address, "backend": self.sandbox.backend,
                SANDBOX_RESOURCE: ray.cluster_resources().get(SANDBOX_RESOURCE, 0)}

    def close(self) -> None:
        ray.shutdown()
