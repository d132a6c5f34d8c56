"""The replica side of the Ray executor (ASSAY_EXECUTOR=ray).

Each call of a group (see `judging.calls_for`) is submitted as a plain Ray task that
needs one unit of `assay_sandbox` (so it only runs on sandbox nodes) and no CPU of the
head; Ray re-runs it up to `ray_max_retries` times when its worker or node dies. The
engine awaits the results from asyncio. A call that still fails, or outlasts
`ray_task_timeout_s`, gives its responses verdict `error`: an infrastructure failure,
never a reward. Ray is not a security boundary: see docs/security.md.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from service.config import Settings
from service.executors import JudgeJob, failed_calls, gather_calls
from service.judging import Judged
from service.ray_tasks import SANDBOX_RESOURCE, NodeResult, SandboxSpec, verify_on_node
from verifiers.base import TaskInvalid

log = logging.getLogger(__name__)


class RayExecutor:
    def __init__(self, settings: Settings) -> None:
        if not ray.is_initialized():
            ray.init(address=settings.ray_address, namespace="assay", logging_level=logging.WARNING,
                     log_to_driver=False)
        self.address = settings.ray_address
        self.timeout_s = settings.ray_task_timeout_s
        self.backend = f"ray/{settings.sandbox}"
        self.spec = SandboxSpec(settings.sandbox, settings.ray_sandbox_workers, settings.sandbox_image,
                                settings.unsafe_no_isolation, tuple(sorted(settings.verifier_services.items())))
        self._remote = verify_on_node.options(num_cpus=0, resources={SANDBOX_RESOURCE: 1},
                                              max_retries=settings.ray_max_retries, retry_exceptions=False)

    async def judge(self, job: JudgeJob) -> list[Judged]:
        async def run(indexes: list[int]) -> list[Judged]:
            ref = self._remote.remote(self.spec, job.verifier.name, job.raw_task,
                                      [job.responses[i] for i in indexes], job.reveal_hidden)
            try:
                result: NodeResult = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
            except TimeoutError as exc:
                ray.cancel(ref, force=True)
                return failed_calls(job, indexes, "executor_timeout", exc)
            except (ray.exceptions.RayError, OSError) as exc:  # retries used up, cluster gone
                return failed_calls(job, indexes, "executor_error", exc)
            if result.task_invalid is not None:
                raise TaskInvalid(result.task_invalid)
            return result.judged

        return await gather_calls(job, run)

    def describe(self) -> dict[str, Any]:
        return {"executor": "ray", "address": self.address, "backend": self.spec.backend,
                SANDBOX_RESOURCE: ray.cluster_resources().get(SANDBOX_RESOURCE, 0)}

    def close(self) -> None:
        ray.shutdown()
