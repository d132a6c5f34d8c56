"""Choose a sandbox backend by name (configuration, not code, decides).

Every setting arrives as a parameter: the service reads its configuration once, makes one
frozen `SandboxConfig` of it (`Settings.sandbox_config()`), and every place that builds a
sandbox (the local executor, each Ray node) builds it from that config; nothing in
sandboxes/ reads the environment. Backends are imported only when chosen, so this module
imports none of them (and none imports it back).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sandboxes.base import Sandbox, SandboxUnavailable
from sandboxes.warm import WorkerTimings


@dataclass(frozen=True)
class SandboxConfig:
    """How to build a sandbox, as plain values (it travels to Ray nodes as it is)."""

    backend: str
    workers: int
    image: str
    unsafe_no_isolation: bool = False
    timings: WorkerTimings | None = None
    # Names this host on the containers it makes (None: the machine's hostname).
    host_label: str | None = None
    container_max_jobs: int | None = None
    runtime: str | None = None
    # `remote`: the sandbox runner's address and the file holding the shared secret.
    sandboxd_url: str | None = None
    sandboxd_secret_file: str | None = None

    def with_workers(self, workers: int) -> SandboxConfig:
        return replace(self, workers=workers)


def build_sandbox(config: SandboxConfig) -> Sandbox:
    """The configured backend, every setting of `config` passed down."""
    secret = None
    if config.backend == "remote":
        from sandboxes.remote import read_secret

        if config.sandboxd_url is None or config.sandboxd_secret_file is None:
            raise SandboxUnavailable("ASSAY_SANDBOX=remote needs ASSAY_SANDBOXD_URL and ASSAY_SANDBOXD_SECRET_FILE")
        secret = read_secret(Path(config.sandboxd_secret_file))
    return create_sandbox(config.backend, workers=config.workers, image=config.image,
                          unsafe_no_isolation=config.unsafe_no_isolation, timings=config.timings,
                          host_label=config.host_label, container_max_jobs=config.container_max_jobs,
                          runtime=config.runtime, url=config.sandboxd_url, secret=secret)


def create_sandbox(name: str, *, workers: int, image: str | None = None, unsafe_no_isolation: bool = False,
                   timings: WorkerTimings | None = None, host_label: str | None = None,
                   container_max_jobs: int | None = None, runtime: str | None = None,
                   url: str | None = None, secret: bytes | None = None) -> Sandbox:
    if name == "process":
        from sandboxes.process import ProcessSandbox

        return ProcessSandbox(workers=workers, unsafe_no_isolation=unsafe_no_isolation, timings=timings)
    if name == "docker":
        from sandboxes.docker_backend import DockerSandbox

        options: dict[str, object] = {} if container_max_jobs is None else {"max_jobs": container_max_jobs}
        if image is not None:
            options["image"] = image
        return DockerSandbox(workers=workers, timings=timings, host_label=host_label, runtime=runtime,
                             **options)  # type: ignore[arg-type]
    if name == "remote":
        from sandboxes.remote import RemoteSandbox

        if not url or secret is None:
            raise ValueError("the remote backend needs the sandbox runner's address and secret")
        return RemoteSandbox(url, secret)
    raise ValueError(f"unknown sandbox backend {name!r}; choose process, docker or remote")
