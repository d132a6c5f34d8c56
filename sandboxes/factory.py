"""Choose a sandbox backend by name (configuration, not code, decides).

Every setting arrives as a parameter: the service reads its configuration once and
passes it down; nothing in sandboxes/ reads the environment.
"""

from __future__ import annotations

from sandboxes.base import Sandbox
from sandboxes.warm import WorkerTimings

DEFAULT_IMAGE = "assay-runtime:latest"


def create_sandbox(name: str, *, workers: int, image: str = DEFAULT_IMAGE, unsafe_no_isolation: bool = False,
                   timings: WorkerTimings | None = None, host_label: str | None = None,
                   container_max_jobs: int | None = None, runtime: str | None = None,
                   url: str | None = None, secret: bytes | None = None) -> Sandbox:
    if name == "process":
        from sandboxes.process import ProcessSandbox

        return ProcessSandbox(workers=workers, unsafe_no_isolation=unsafe_no_isolation, timings=timings)
    if name == "docker":
        from sandboxes.docker_backend import DockerSandbox

        options = {} if container_max_jobs is None else {"max_jobs": container_max_jobs}
        return DockerSandbox(image=image, workers=workers, timings=timings, host_label=host_label, runtime=runtime,
                             **options)
    if name == "remote":
        from sandboxes.remote import RemoteSandbox

        if not url or secret is None:
            raise ValueError("the remote backend needs the sandbox runner's address and secret")
        return RemoteSandbox(url, secret)
    raise ValueError(f"unknown sandbox backend {name!r}; choose process, docker or remote")
