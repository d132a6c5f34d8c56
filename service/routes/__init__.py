"""HTTP routes, one module per area; `include_routers` assembles them (the order is the
OpenAPI document's)."""

from __future__ import annotations

from fastapi import FastAPI

from service.routes import certify, envs, evals, health, keys, openrlhf, receipts, records, review, runs, tasks, verify

ROUTERS = (certify.router, envs.router, evals.router, health.router, keys.router, openrlhf.router,
           receipts.router, records.router, review.router, runs.router, tasks.router, verify.router)


def include_routers(app: FastAPI) -> None:
    for router in ROUTERS:
        app.include_router(router)
