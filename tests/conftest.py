"""Shared fixtures: real sandboxes, the app in-process, and a real uvicorn server on a free port.

Request tests use the in-process app (`client`, `app_server`, `fresh_app`): `create_app`
with a SQLite store in a temp dir and the real process sandbox, lifespan running behind
starlette's TestClient. Tests that need a real server process (restarts, replicas, an
ASGI server's own edge behaviour, several processes) use `live_server`/`fresh_server`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from sandboxes.factory import create_sandbox
from sandboxes.remote import RemoteSandbox
from service.auth import create_key
from service.config import Settings
from service.store import AuditStore
from service.testing.app import AppServer, app_settings
from service.testing.live import REPO, LiveServer, free_port
from verifiers import registry
from verifiers.base import Verdict, Verifier, VerifyContext

BACKENDS = [b.strip() for b in os.environ.get("ASSAY_TEST_BACKENDS", "process").split(",") if b.strip()]

# Every service the suite starts (in-process apps, `assay serve` subprocesses) warms every
# verifier but proof: its four set.mm reads were about ten of a start's eleven seconds, and
# few of these services judge a proof (the first proof request of one starts the proof
# pools itself). tests/test_proof_steady.py starts its service with ASSAY_WARM_UP=all, as
# deployed, and proves that then no request reads set.mm. Export ASSAY_WARM_UP to override.
os.environ.setdefault("ASSAY_WARM_UP", ",".join(name for name in registry.names() if name != "proof"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`docker` and `postgres` tests are `slow` too, and so is every test run on the docker
    or remote backend or against a server process (`live_server`, `fresh_server`):
    `-m "not slow"` is the quick loop (the app in-process, process backend, SQLite)."""
    for item in items:
        if {"live_server", "fresh_server"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        params = getattr(item, "callspec", None)
        backends = {v for v in params.params.values() if isinstance(v, str)} if params else set()
        if "docker" in backends:
            item.add_marker(pytest.mark.docker)
        if item.get_closest_marker("docker") or item.get_closest_marker("postgres") or "remote" in backends:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every verifier test runs on each backend named in ASSAY_TEST_BACKENDS (`remote`: a
    real sandboxd subprocess on the process backend, reached through its unix socket)."""
    if request.param == "remote":
        from tests.sandboxd_support import Sandboxd

        runner = Sandboxd(tmp_path_factory.mktemp("sandboxd"))
        yield runner.client
        runner.stop()
        return
    # ASSAY_TEST_DOCKER_RUNTIME=runsc runs the docker backend's suites under gVisor.
    box = create_sandbox(request.param, workers=2, image=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"),
                         runtime=os.environ.get("ASSAY_TEST_DOCKER_RUNTIME") or None)
    yield box
    box.close()


@pytest.fixture(scope="module")
def ctx(request: pytest.FixtureRequest, sandbox) -> VerifyContext:
    """A verifier's context on `sandbox`. A module whose jobs the remote backend does not run
    says why with `pytest.mark.no_remote(reason)`; its tests on that backend are skipped."""
    no_remote = request.node.get_closest_marker("no_remote")
    # A remote sandbox names the backend its runner uses (`process`), not `remote`.
    if no_remote is not None and isinstance(sandbox, RemoteSandbox):
        pytest.skip(no_remote.args[0])
    return VerifyContext(sandbox)


@pytest.fixture(scope="module")
def code_verifier() -> Verifier:
    return registry.get("code")


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The shared in-process app's settings: SQLite in a temp dir, the real process sandbox."""
    return app_settings(tmp_path_factory.mktemp("assay-app"))


@pytest.fixture(scope="session")
def app_server(settings: Settings) -> Iterator[AppServer]:
    """`create_app(settings)` in-process with its lifespan running and an admin key; shared
    by the session like `live_server` (tests that need an empty log use `fresh_app`)."""
    with AppServer(settings) as server:
        yield server


@pytest.fixture(scope="session")
def app(app_server: AppServer):
    """The running app itself (`app.state`, `app.dependency_overrides`)."""
    return app_server.app


@pytest.fixture(scope="session")
def client(app_server: AppServer) -> TestClient:
    """starlette's TestClient on the shared app, entered (lifespan ran), with the admin key."""
    return app_server.test_client


@pytest.fixture
def fresh_app(tmp_path: Path) -> Iterator[AppServer]:
    """An in-process app of its own (empty audit log, own keys), for one test."""
    with AppServer(app_settings(tmp_path)) as server:
        yield server


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("assay-server"))
    yield server
    server.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A server process of its own, for tests that restart it or need a real ASGI server."""
    server = LiveServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def store(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path / 'store.db'}")


__all__ = ["REPO", "AppServer", "LiveServer", "create_key", "free_port"]


def verify_program(ctx: VerifyContext, task: dict, language: str, code: str):
    """A code task in `language` and one fenced response through the code verifier's public
    API: (outcome, reward)."""
    verifier = registry.get("code")
    parsed = verifier.parse_task({**task, "language": language})
    outcome = verifier.verify(parsed, f"```{language}\n{code}\n```", ctx)
    return outcome, outcome.reward(parsed)


def assert_correct_on_every_path(ctx: VerifyContext, task: dict, language: str, code: str) -> None:
    """The program is judged correct three times: compiled, compiled again (its program kept),
    then from the compile cache (a job that only runs the cases)."""
    for cached in (False, False, True):
        outcome, reward = verify_program(ctx, task, language, code)
        assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence["tests"]
        assert outcome.evidence["compile"]["compile_cached"] is cached
