"""The app in-process: `create_app(settings)` behind starlette's TestClient, lifespan running.

A request costs a function call, not a server process and a port, yet start-up and
shutdown (store, real sandbox, verifier warm-up) run as under `assay serve`, so wiring
mistakes still show. `AppServer` answers to the parts of `live.LiveServer` that request
tests use (`url`, `admin_key`, `client(key)`, `anonymous()`, `create_key(scopes)`, `db_url`,
`workdir`, `env()`, `log_path`), so a test moves between the two by its fixture alone;
`transport` and `async_transport` give the trainer client (`RewardClient(..., transport=)`)
the same in-process path.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import os
from pathlib import Path
from types import TracebackType

import httpx
from starlette import testclient
from starlette.testclient import TestClient

from service.app import create_app
from service.auth import create_key
from service.config import Settings
from service.logs import logging_config


def app_settings(workdir: Path, **overrides: object) -> Settings:
    """A deployment of its own in `workdir`: SQLite store (signing and fingerprint keys
    beside it; in `workdir` too with another database) and the real process sandbox with
    two workers, as `LiveServer` runs it."""
    values: dict[str, object] = {"database_url": f"sqlite:///{workdir / 'audit.db'}", "sandbox": "process",
                                 "sandbox_workers": 2, **overrides}
    if not str(values["database_url"]).startswith("sqlite:///"):
        values = {"signing_key_path": workdir / "assay.signing-key.pem",
                  "fingerprint_key_file": workdir / "fingerprint.key", **values}
    return Settings(**values)  # type: ignore[arg-type]


def _file_handler(path: Path) -> logging.Handler:
    """What `assay serve` logs (service.logs: JSON lines, secrets redacted), into `path`:
    the `log_path` of a LiveServer, for tests that read the log. Root's level is left as is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config = logging_config()
    config["handlers"] = {"file": {**config["handlers"]["stderr"], "class": "logging.FileHandler",
                                   "filename": str(path)}}
    del config["handlers"]["file"]["stream"], config["root"]
    config["loggers"] = {"assay.testing.log": {"handlers": ["file"], "propagate": False}}
    logging.config.dictConfig(config)
    holder = logging.getLogger("assay.testing.log")
    handler = holder.handlers[0]
    holder.removeHandler(handler)
    return handler


class _ThreadedAsyncTransport(httpx.AsyncBaseTransport):
    """An async face on the TestClient's (blocking) transport: each request runs in a
    thread and reaches the app on the TestClient's own event loop, where its lifespan
    created the engine and store, so concurrent requests are served concurrently."""

    def __init__(self, sync: httpx.BaseTransport) -> None:
        self._sync = sync

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        copy = httpx.Request(request.method, request.url, headers=request.headers, content=body,
                             extensions=request.extensions)
        response = await asyncio.to_thread(self._sync.handle_request, copy)  # read whole by _Bridge
        return httpx.Response(response.status_code, headers=response.headers, content=response.content,
                              request=request)


class _Bridge(httpx.BaseTransport):
    """An httpx transport onto the TestClient's own. starlette builds its TestClient on
    httpx2 when that is installed (and on httpx otherwise), so requests and responses are
    copied across, the body read whole. Closing a client on it closes nothing shared."""

    def __init__(self, test_client: TestClient) -> None:
        self._inner = test_client._transport  # httpx(2) keeps it there; starlette names it nowhere else
        self._http = testclient.httpx  # the module starlette's TestClient is built on

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inner = self._http.Request(request.method, str(request.url), headers=request.headers.multi_items(),
                                   content=request.read(), extensions=request.extensions)
        response = self._inner.handle_request(inner)
        try:
            content = response.read()
        finally:
            response.close()
        return httpx.Response(response.status_code, headers=response.headers.multi_items(), content=content,
                              request=request)


class AppServer:
    """`create_app(settings)` with its lifespan running (enter it, or call `start`/`stop`)."""

    url = "http://testserver"

    def __init__(self, settings: Settings, log_path: Path | None = None) -> None:
        self.settings = settings
        self.db_url = settings.database_url
        # Where the keys are: beside the SQLite database, else beside the signing key.
        key_file = settings.signing_key_path or Path(settings.database_url.removeprefix("sqlite:///"))
        self.workdir = key_file.parent
        self.log_path = log_path or self.workdir / "server.log"
        self._log_handler: logging.Handler | None = None
        self.app = create_app(settings)
        # raise_server_exceptions=False: an unhandled error is a 500 response, as under uvicorn.
        self.test_client = TestClient(self.app, base_url=self.url, raise_server_exceptions=False)
        self.admin_key = ""

    def start(self) -> AppServer:
        self._log_handler = _file_handler(self.log_path)
        logging.getLogger().addHandler(self._log_handler)
        try:
            self.test_client.__enter__()
        except BaseException:  # the lifespan failed: nothing to stop but the log handler
            self._remove_log_handler()
            raise
        self.admin_key = self.create_key("reward,audit,admin")
        self.test_client.headers["Authorization"] = f"Bearer {self.admin_key}"
        return self

    def stop(self) -> None:
        try:
            self.test_client.__exit__(None, None, None)
        finally:
            self._remove_log_handler()

    def _remove_log_handler(self) -> None:
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def transport(self) -> httpx.BaseTransport:
        """An httpx transport to the running app, in-process (through the TestClient's portal)."""
        return _Bridge(self.test_client)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return _ThreadedAsyncTransport(self.transport)

    def create_key(self, scopes: str) -> str:
        """What `assay keys create` does, against this app's store."""
        return create_key(self.app.state.store, [s.strip() for s in scopes.split(",") if s.strip()])

    def client(self, key: str | None = None, timeout: float = 120) -> httpx.Client:
        """A client with `key` (default: the admin key), in-process."""
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        return httpx.Client(transport=self.transport, base_url=self.url, headers=headers, timeout=timeout)

    def anonymous(self, timeout: float = 60) -> httpx.Client:
        """A client that sends no key (a browser, OpenRLHF's key-in-the-URL)."""
        return httpx.Client(transport=self.transport, base_url=self.url, timeout=timeout)

    def env(self) -> dict[str, str]:
        """The environment of an `assay` command run against this app's database."""
        return {**os.environ, "ASSAY_DATABASE_URL": self.db_url, "ASSAY_SANDBOX_WORKERS": "2"}
