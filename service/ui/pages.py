"""The viewer's routes: thin handlers over the store and the pipeline; HTML via render.page.

Handlers are plain functions, so FastAPI runs their database work off the event loop.
Every page's state lives in its URL (filters, sort, cursor), so any view can be pasted.
"""

from __future__ import annotations

from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import anyio
from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from service.auth import Caller
from service.errors import NotFound, RequestInvalid, problems, summary
from service.evals import compare, eval_report
from service.inspection_schemas import LabelIn
from service.review import LabelLimit, add_label, label_out, review_queue
from service.store import AuditStore
from service.ui import bundle
from service.ui.evidence import flag_evidence, highlight, is_hidden
from service.ui.queries import (
    SORTS,
    VERDICTS,
    BadCursor,
    OverviewFilter,
    QueryForm,
    RecordFilter,
    filter_choices,
    group_keys,
    group_view,
    overview,
    record_page,
)
from service.ui.render import STATIC, page
from service.ui.sessions import (
    LOGIN_CSRF_COOKIE,
    SignInRefused,
    Viewer,
    csrf_ok,
    current_viewer,
    login_csrf_token,
    set_login_csrf_cookie,
    set_session_cookie,
    sign_in,
    sign_out,
)
from verifiers import registry
from verifiers.base import TaskInvalid

router = APIRouter(prefix="/ui", include_in_schema=False)
Model = TypeVar("Model", bound=BaseModel)
REVIEW_SAMPLE = 3  # one per stratum: the page shows one of them
STATIC_FILES = frozenset(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file())


def _store(request: Request) -> AuditStore:
    return request.app.state.store


def _safe_next(target: str | None) -> str:
    """Only a path inside the viewer: never another site (open redirect) or a scheme."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/"


class NotSignedIn(Exception):
    """A page asked for without a viewer session: the app answers with `to_sign_in`."""


def signed_in(request: Request) -> Viewer:
    """The page's viewer (a dependency: FastAPI runs it in a thread, off the event loop)."""
    viewer = current_viewer(request)
    if viewer is None:
        raise NotSignedIn
    return viewer


def to_sign_in(request: Request, _exc: Exception | None = None) -> RedirectResponse:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ui/?{urlencode({'next': here})}", status_code=303)


def _parse(model: type[Model], request: Request) -> Model:
    return model.model_validate(dict(request.query_params))


def _invalid(request: Request, viewer: Viewer, exc: ValidationError | ValueError) -> Response:
    message = summary(problems(exc.errors())) if isinstance(exc, ValidationError) else str(exc)
    return page(request, "error.html", 422, viewer=viewer, title="Bad request", message=message)


def _not_found(request: Request, viewer: Viewer, what: str) -> Response:
    return page(request, "error.html", 404, viewer=viewer, title="Not found", message=f"{what} not found")


def _forbidden(request: Request, viewer: Viewer | None, message: str) -> Response:
    return page(request, "error.html", 403, viewer=viewer, title="Refused", message=message)


# ------------------------------------------------------------------------ access

@router.get("")
def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/")
def overview_page(request: Request) -> Response:
    viewer = current_viewer(request)
    if viewer is None:
        return _sign_in_form(request, request.query_params.get("next"))
    try:
        f = _parse(OverviewFilter, request)
    except ValidationError as exc:
        return _invalid(request, viewer, exc)
    data = overview(_store(request), f)
    return page(request, "overview.html", viewer=viewer, data=data, f=f, choices=filter_choices())


def _sign_in_form(request: Request, next_path: str | None, error: str | None = None, status: int = 200) -> Response:
    token = login_csrf_token(request)
    response = page(request, "sign_in.html", status, viewer=None, error=error, next=_safe_next(next_path),
                    csrf_token=token)
    set_login_csrf_cookie(response, request, token)
    return response


@router.post("/sign-in")
def sign_in_post(request: Request, api_key: str = Form(""), csrf_token: str = Form(""),
                 next: str = Form("/ui/")) -> Response:
    if not csrf_ok(request, request.cookies.get(LOGIN_CSRF_COOKIE), csrf_token):
        return _sign_in_form(request, next, "The form expired or came from another site; sign in again.", 403)
    settings = request.app.state.pipeline.settings
    try:
        token = sign_in(_store(request), api_key, settings.ui_session_hours)
    except SignInRefused as exc:
        return _sign_in_form(request, next, f"Sign-in refused: {exc}.", 401)
    response = RedirectResponse(_safe_next(next), status_code=303)
    set_session_cookie(response, request, token, settings.ui_session_hours)
    return response


@router.post("/sign-out")
def sign_out_post(request: Request, csrf_token: str = Form("")) -> Response:
    viewer = current_viewer(request)
    if viewer is None:
        return RedirectResponse("/ui/", status_code=303)
    if not csrf_ok(request, viewer.csrf_token, csrf_token):
        return _forbidden(request, viewer, "The form expired or came from another site (CSRF check failed).")
    response = RedirectResponse("/ui/", status_code=303)
    sign_out(_store(request), viewer, response)
    return response


# ------------------------------------------------------------------------ records

@router.get("/records")
def records_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    try:
        f = _parse(RecordFilter, request)
        if f.group is not None and f.key is None:
            key = _group_key(request, viewer, f.group, None)
            if isinstance(key, Response):
                return key
        result = record_page(_store(request), f, request.query_params.get("after") or None)
    except (ValidationError, BadCursor) as exc:
        return _invalid(request, viewer, exc)
    next_url = None
    if result.next_cursor is not None:
        next_url = "/ui/records?" + urlencode([*f.query_items(), ("after", result.next_cursor)])
    return page(request, "records.html", viewer=viewer, f=f, rows=result.rows, next_url=next_url,
                first_url="/ui/records?" + urlencode(f.query_items()), is_first=not request.query_params.get("after"),
                export_url="/ui/export?" + urlencode(f.query_items()), sorts=list(SORTS),
                choices=filter_choices())


def _record_context(request: Request, viewer: Viewer, record_id: str) -> dict[str, Any] | None:
    row = _store(request).record(record_id)
    if row is None:
        return None
    task_fields = [(name, value, is_hidden(value)) for name, value in sorted((row.task_public or {}).items())]
    return {"viewer": viewer, "r": row, "marked": highlight(row.response, row.evidence or {}),
            "task_fields": task_fields, "flags": flag_evidence(row.flags or [], row.flag_evidence),
            "labels": [label_out(label) for label in _store(request).labels([row.id])],
            "verdicts": VERDICTS, "label_next": f"/ui/records/{row.id}", "replay": None, "replay_error": None,
            "certificate": _store(request).latest_certificates([row.task_hash]).get(row.task_hash)}


@router.get("/records/{record_id}")
def record_page_view(request: Request, record_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    context = _record_context(request, viewer, record_id)
    if context is None:
        return _not_found(request, viewer, f"record {record_id!r}")
    return page(request, "record.html", **context)


@router.post("/records/{record_id}/replay")
async def replay_post(request: Request, record_id: str, csrf_token: str = Form(""),
        viewer: Viewer = Depends(signed_in)) -> Response:
    # Async because the pipeline's replay is (it may run on the Ray executor); the store
    # reads around it go to a thread so the event loop never blocks.
    if not csrf_ok(request, viewer.csrf_token, csrf_token):
        return _forbidden(request, viewer, "The form expired or came from another site (CSRF check failed).")
    context = await anyio.to_thread.run_sync(_record_context, request, viewer, record_id)
    if context is None:
        return _not_found(request, viewer, f"record {record_id!r}")
    try:
        context["replay"] = await request.app.state.pipeline.replay(record_id)
    except (RequestInvalid, NotFound, TaskInvalid) as exc:
        context["replay_error"] = str(exc)
    return page(request, "record.html", **context)


def _group_key(request: Request, viewer: Viewer, group_id: str, key: str | None) -> str | None | Response:
    """Whose group: the `key` asked for, else the one key that sent this id; an id sent by
    several keys names several groups (409, listing them)."""
    if key is not None:
        return key
    keys = group_keys(_store(request), group_id)
    if len(keys) > 1:
        return page(request, "error.html", 409, viewer=viewer, title="Several groups",
                    message=f"group {group_id!r} was sent by {len(keys)} API keys ({', '.join(map(str, keys))}): "
                            "each is its own group; add key=<key id> to choose one")
    return keys[0] if keys else None


@router.get("/groups/{group_id}")
def group_page(request: Request, group_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    key = _group_key(request, viewer, group_id, request.query_params.get("key") or None)
    if isinstance(key, Response):
        return key
    group = group_view(_store(request), group_id, key)
    if group is None:
        return _not_found(request, viewer, f"group {group_id!r}")
    marks = [highlight(r.response, r.evidence or {}) for r in group.rows]
    return page(request, "group.html", viewer=viewer, g=group, marks=marks,
                records_url="/ui/records?" + urlencode({"group": group_id, **({"key": key} if key else {}),
                                                        "sort": "oldest"}))


# ------------------------------------------------------------------------ export

@router.get("/export")
def export(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    try:
        f = _parse(RecordFilter, request)
    except ValidationError as exc:
        return _invalid(request, viewer, exc)
    limit = request.app.state.pipeline.settings.ui_export_max_records
    # A sync iterator: Starlette pulls it on a worker thread, page by page (bounded memory).
    chunks, name = bundle.stream(_store(request), f, limit)
    return StreamingResponse(chunks, media_type="application/zip",
                             headers={"Content-Disposition": f"attachment; filename=\"{quote(name)}\""})


@router.get("/static/{name:path}")
def static(name: str) -> Response:
    if name not in STATIC_FILES:
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(STATIC / name, headers={"Cache-Control": "public, max-age=3600"})


# ------------------------------------------------------------------------ review

@router.post("/records/{record_id}/labels")
def label_post(request: Request, record_id: str, csrf_token: str = Form(""), label: str = Form(""),
               corrected_verdict: str = Form(""), pattern: str = Form(""), note: str = Form(""),
               next: str = Form(""), viewer: Viewer = Depends(signed_in)) -> Response:
    if not csrf_ok(request, viewer.csrf_token, csrf_token):
        return _forbidden(request, viewer, "The form expired or came from another site (CSRF check failed).")
    if not viewer.may("review"):
        return _forbidden(request, viewer, "Labelling needs a key with the 'review' scope.")
    fields = {"label": label, "corrected_verdict": corrected_verdict or None, "note": note or None,
              "pattern": (pattern or None) if label == "exploit" else None}
    try:
        body = LabelIn.model_validate(fields)
        add_label(_store(request), record_id, body, Caller(viewer.key_id, viewer.scopes, viewer.name),
                  request.app.state.pipeline.settings.max_labels_per_record)
    except ValidationError as exc:
        return _invalid(request, viewer, exc)
    except LabelLimit as exc:
        return page(request, "error.html", 409, viewer=viewer, title="Refused", message=str(exc))
    except NotFound:
        return _not_found(request, viewer, f"record {record_id!r}")
    return RedirectResponse(_safe_next(next) if next else f"/ui/records/{record_id}", status_code=303)


class ReviewFilter(QueryForm):
    verifier: str | None = Field(None, max_length=64)
    flag: str | None = Field(None, max_length=100)
    skip: str | None = Field(None, max_length=33 * 50, description="Record ids passed over, comma-separated.")


@router.get("/review")
def review_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    if not viewer.may("review"):
        return _forbidden(request, viewer, "The review queue needs a key with the 'review' scope.")
    try:
        f = _parse(ReviewFilter, request)
    except ValidationError as exc:
        return _invalid(request, viewer, exc)
    skipped = [i for i in (f.skip or "").split(",") if i][-49:]
    picked, available = review_queue(_store(request), f.verifier, f.flag, REVIEW_SAMPLE + len(skipped))
    picked = [(stratum, row) for stratum, row in picked if row.id not in skipped]
    here = {k: v for k, v in (("verifier", f.verifier), ("flag", f.flag)) if v}
    context: dict[str, Any] = {"viewer": viewer, "verifier": f.verifier, "flag": f.flag, "available": available,
                               "choices": filter_choices(), "r": None, "stratum": None}
    if picked:
        # Take the strata in turn: the item's position follows how many were labelled or skipped here.
        stratum, row = picked[(sum(available.values()) + len(skipped)) % len(picked)]
        context.update(_record_context(request, viewer, row.id) or {})
        context.update(stratum=stratum, label_next="/ui/review?" + urlencode({**here, "skip": ",".join(skipped)}),
                       skip_url="/ui/review?" + urlencode({**here, "skip": ",".join([*skipped, row.id])}))
    return page(request, "review.html", **context)


# ------------------------------------------------------------------------- evals

@router.get("/evals")
def evals_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    return page(request, "evals.html", viewer=viewer, runs=_store(request).eval_runs())


@router.get("/evals/compare")
def evals_compare_form(request: Request, a: str = "", b: str = "") -> Response:
    """The compare form's GET lands on the stable URL."""
    return RedirectResponse(f"/ui/evals/{quote(a, safe='')}/compare/{quote(b, safe='')}", status_code=303)


@router.get("/evals/{eval_id}")
def eval_page(request: Request, eval_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    try:
        report = eval_report(_store(request), eval_id)
    except NotFound:
        return _not_found(request, viewer, f"evaluation {eval_id!r}")
    return page(request, "eval.html", viewer=viewer, e=report)


@router.get("/evals/{a_id}/compare/{b_id}")
def eval_compare_page(request: Request, a_id: str, b_id: str, viewer: Viewer = Depends(signed_in)) -> Response:
    store = _store(request)
    runs = {i: store.eval_run(i) for i in (a_id, b_id)}
    missing = [i for i, run in runs.items() if run is None]
    if missing:
        return _not_found(request, viewer, f"evaluation {missing[0]!r}")
    result = compare(store, a_id, b_id)
    families = sorted(result.families)
    chart = {"labels": ["overall", *families],
             "a": [_metric(result.overall, "pass@1", "a")] + [_metric(result.families[f], "pass@1", "a")
                                                               for f in families],
             "b": [_metric(result.overall, "pass@1", "b")] + [_metric(result.families[f], "pass@1", "b")
                                                               for f in families],
             "a_name": f"a: {runs[a_id].name} · {runs[a_id].checkpoint}",
             "b_name": f"b: {runs[b_id].name} · {runs[b_id].checkpoint}"}
    return page(request, "eval_compare.html", viewer=viewer, a=runs[a_id], b=runs[b_id], cmp=result, chart=chart)


def _metric(family: Any, name: str, side: str) -> float | None:
    difference = family.metrics.get(name)
    return None if difference is None else getattr(difference, side)


# ------------------------------------------------------------ certification

@router.get("/tasks/{task_hash}")
def task_page(request: Request, task_hash: str, viewer: Viewer = Depends(signed_in)) -> Response:
    """A task as records and certification know it: its public view and its certificates."""
    store = _store(request)
    certificates = store.certificates(task_hash)
    known = store.task_view(task_hash)
    if known is None and not certificates:
        return _not_found(request, viewer, f"task {task_hash!r}")
    task_id, verifier, public = known or (certificates[0].task_id, certificates[0].verifier, {})
    fields = [(name, value, is_hidden(value)) for name, value in sorted(public.items())]
    return page(request, "task.html", viewer=viewer, task_hash=task_hash, task_id=task_id, verifier=verifier,
                task_fields=fields, certificates=certificates,
                records_url="/ui/records?" + urlencode({"task": task_hash}))


@router.get("/verifiers")
def verifiers_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    store = _store(request)
    rows = [(registry.get(name), store.latest_verifier_diff(name)) for name in registry.names()]
    return page(request, "verifiers.html", viewer=viewer, rows=rows)


@router.get("/verifiers/{name}/diff")
def verifier_diff_page(request: Request, name: str, viewer: Viewer = Depends(signed_in)) -> Response:
    row = _store(request).latest_verifier_diff(name)
    if row is None:
        return _not_found(request, viewer, f"a diff report for verifier {name!r}")
    return page(request, "verifier_diff.html", viewer=viewer, d=row.report)
