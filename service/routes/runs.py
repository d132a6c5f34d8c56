"""Training runs: per-step series from the records that carried `run: {id, step}`, held-out
evaluations tagged with the run, and the alarms raised on it (`audit` scope)."""

from __future__ import annotations

from fastapi import APIRouter, Path, Query

from service.alarms import check_run, set_thresholds
from service.deps import AlarmSinkDep, AuditCaller, StoreDep
from service.errors import RunNotFound, responses
from service.run_schemas import RunList, RunOut, Thresholds
from service.runs import list_runs

router = APIRouter(prefix="/v1/runs", tags=["runs"])
_errors = responses(RunNotFound)
RunId = Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+-]+$")


# Plain functions: FastAPI runs them on its thread pool, off the event loop.
@router.get("", response_model=RunList, responses=_errors)
def runs(store: StoreDep, _: AuditCaller, limit: int = Query(200, ge=1, le=1000)) -> RunList:
    """Every run the records name, with its record count, step range and alarms raised."""
    return RunList(runs=list_runs(store, limit))


@router.get("/{run_id}", response_model=RunOut, responses=_errors)
def run(store: StoreDep, sink: AlarmSinkDep, _: AuditCaller, run_id: str = RunId) -> RunOut:
    """The run's series per step, its held-out evaluations and its alarms (checked now: an alarm
    whose rule holds for the first time is raised by this read too)."""
    out = check_run(store, run_id, sink)
    if out is None:
        raise RunNotFound(f"run {run_id!r}: no record carries it")
    return out


@router.put("/{run_id}/thresholds", response_model=Thresholds, responses=_errors)
def put_thresholds(body: Thresholds, store: StoreDep, caller: AuditCaller, run_id: str = RunId) -> Thresholds:
    """Set the run's alarm thresholds (any part; the rest keep their defaults). Alarms already
    raised stay raised; later checks use the new thresholds. A run may be set before its first record."""
    return set_thresholds(store, run_id, body, caller.key_id)
