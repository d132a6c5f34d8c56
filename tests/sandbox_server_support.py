"""The service on one sandbox backend, for the red-team tests that run through it on each
backend of ASSAY_TEST_BACKENDS (process, docker): one definition of how such a server is made."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from service.testing.app import AppServer, app_settings


def backend_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   name: str) -> Iterator[AppServer]:
    """A module fixture's body: `request.param` is the backend; the server holds a `reward_key`."""
    if request.param not in ("process", "docker"):
        pytest.skip(f"{name} runs on the process and docker backends")
    options: dict = {"sandbox": request.param, "sandbox_acquire_timeout_s": 300}
    if request.param == "docker":
        options["sandbox_image"] = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
    with AppServer(app_settings(tmp_path_factory.mktemp(f"{name}-{request.param}"), **options)) as s:
        s.reward_key = s.create_key("reward")  # type: ignore[attr-defined]
        yield s
