"""What routes need, by dependency injection: one getter per resource (reading `app.state`
here and nowhere else in the routes), each with an `Annotated` alias. A route's signature
is its list of needs; a test swaps one with `app.dependency_overrides[get_x]`.

The getters are `async def` although they only read an attribute: FastAPI runs a plain `def`
dependency in its thread pool, a hop to a worker thread and back on every request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from service.alarms import AlarmSink
from service.auth import Caller, require_scope
from service.config import Settings
from service.env_sessions import EnvSessionStore
from service.executors import Executor
from service.metrics import Metrics
from service.pipeline import Pipeline
from service.signing import Signer
from service.store import AuditStore


async def get_pipeline(request: Request) -> Pipeline:
    return request.app.state.pipeline


async def get_settings(request: Request) -> Settings:
    return request.app.state.pipeline.settings


async def get_store(request: Request) -> AuditStore:
    return request.app.state.store


async def get_executor(request: Request) -> Executor:
    return request.app.state.pipeline.executor


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def get_env_sessions(request: Request) -> EnvSessionStore:
    return request.app.state.env_sessions


async def get_alarm_sink(request: Request) -> AlarmSink:
    return request.app.state.alarm_sink


async def get_signer(request: Request) -> Signer:
    return request.app.state.signer


PipelineDep = Annotated[Pipeline, Depends(get_pipeline)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[AuditStore, Depends(get_store)]
ExecutorDep = Annotated[Executor, Depends(get_executor)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
EnvSessionsDep = Annotated[EnvSessionStore, Depends(get_env_sessions)]
AlarmSinkDep = Annotated[AlarmSink, Depends(get_alarm_sink)]
SignerDep = Annotated[Signer, Depends(get_signer)]

RewardCaller = Annotated[Caller, Depends(require_scope("reward"))]
AuditCaller = Annotated[Caller, Depends(require_scope("audit"))]
AdminCaller = Annotated[Caller, Depends(require_scope("admin"))]

IDEMPOTENCY_KEY_MAX = 200
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", max_length=IDEMPOTENCY_KEY_MAX,
    description="Repeat a request safely: same key, same answer, no new records.")]
