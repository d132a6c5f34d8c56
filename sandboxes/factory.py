"""Choose a sandbox backend by name (configuration, not code, decides)."""

from __future__ import annotations

from sandboxes.base import Sandbox


def create_sandbox(name: str, *, workers: int, image: str = "assay-runtime:latest",
                   unsafe_no_isolation: bool = False) -> Sandbox:
    if name == "process":
        from sandboxes.process import ProcessSandbox

        return ProcessSandbox(workers=workers, unsafe_no_isolation=unsafe_no_isolation)
    if name == "docker":
        from sandboxes.docker_backend import DockerSandbox

        return DockerSandbox(image=image, workers=workers)
    raise ValueError(f"unknown sandbox backend {name!r}; choose process or docker")
