"""Where verification runs (`ASSAY_EXECUTOR`).

- `base.py`: the contract (`JudgeJob` in, one `Judged` per response out, the verdict rules).
- `local.py`: `LocalExecutor`, threads of this process on its own sandbox (the default).
- `ray_replica.py` / `ray_node.py`: `RayExecutor`, plain Ray tasks on sandbox nodes; the
  replica submits, the node runs. Only these two modules import Ray, and only when chosen.

Both build their sandbox from the one `SandboxConfig` made from the settings, and both
answer a busy or missing sandbox the same way (`SandboxBusy`/`SandboxUnavailable`: 503).
"""

from __future__ import annotations

from service.config import Settings
from service.executors.base import Executor, Judged, JudgeJob
from service.executors.local import LocalExecutor

__all__ = ["Executor", "JudgeJob", "Judged", "LocalExecutor", "create_executor", "create_local_executor"]


def create_local_executor(settings: Settings) -> LocalExecutor:
    """The one place a local executor (and so this process's sandbox) is built."""
    from sandboxes.factory import build_sandbox

    return LocalExecutor(build_sandbox(settings.sandbox_config()), settings.verify_threads,
                         settings.verifier_services)


def create_executor(settings: Settings) -> Executor:
    if settings.executor == "ray":
        try:
            from service.executors.ray_replica import RayExecutor
        except ModuleNotFoundError as exc:
            raise RuntimeError("ASSAY_EXECUTOR=ray needs Ray: pip install .[service,ray]") from exc
        return RayExecutor(settings)
    return create_local_executor(settings)
