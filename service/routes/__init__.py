"""HTTP routes, one module per area; `include_routers` assembles them (the order is the
OpenAPI document's)."""

from __future__ import annotations

from fastapi import FastAPI

from service.routes import certify, envs, evals, health, keys, openrlhf, receipts, records, review, runs, tasks, verify

# The reward routes first: the hot path is matched before every other route.
ROUTERS = (verify.router, certify.router, envs.router, evals.router, health.router, keys.router, openrlhf.router,
           receipts.router, records.router, review.router, runs.router, tasks.router)


def include_routers(app: FastAPI) -> None:
    for router in ROUTERS:
        app.include_router(router)
