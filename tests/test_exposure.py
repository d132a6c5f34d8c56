"""What the HTTP port exposes: interactive docs and /metrics can be moved off it by settings.

`ASSAY_API_DOCS=false` removes /docs, /redoc and /openapi.json; `ASSAY_METRICS_PORT`
serves /metrics on a listener of its own, and the API's port answers 404 for it. Compose
sets both (tests/test_compose_e2e.py checks the deployed stack).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from service.testing.live import free_port


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AppServer, int]]:
    port = free_port()
    settings = app_settings(tmp_path_factory.mktemp("closed"), api_docs=False, metrics_port=port,
                            metrics_host="127.0.0.1")
    with AppServer(settings) as server:  # the metrics listener is a real one, on its own port
        yield server, port


@pytest.mark.slow
def test_docs_and_metrics_are_off_the_api_port(closed: tuple[AppServer, int]):
    server, port = closed
    with server.client() as c:
        assert c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "2"},
                                          "response": "\\boxed{2}"}).json()["reward"] == 1.0
        for path in ("/docs", "/redoc", "/openapi.json", "/metrics"):
            assert c.get(path).status_code == 404, path
        assert c.get("/healthz").status_code == 200
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    assert scraped.status_code == 200
    assert 'assay_verifications_total{verdict="correct",verifier="math"} 1.0' in scraped.text


def test_defaults_keep_docs_and_metrics_on_the_api_port(app_server: AppServer):
    with app_server.anonymous() as c:
        assert c.get("/openapi.json").json()["info"]["title"] == "Assay"
        assert c.get("/docs").status_code == 200
        assert "assay_verifications_total" in c.get("/metrics").text
