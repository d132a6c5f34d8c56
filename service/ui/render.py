"""Jinja2 with autoescape on every template: model outputs, evidence and notes are hostile text."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from service.validation import printable

HERE = Path(__file__).parent
STATIC = HERE / "static"
_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True)


def _short(value: Any, n: int = 12) -> str:
    return "" if value is None else str(value)[:n]


def _time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


_env.filters.update(short=_short, time=_time, num=_num, pct=_pct, pretty=_pretty, query=urlencode)


def compile_templates() -> int:
    """Compile every template now (the environment keeps them), so that no page's first render
    in a process pays for its template's compile (the service calls it at start)."""
    names = _env.list_templates()
    for name in names:
        _env.get_template(name)
    return len(names)


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(template).render(request_path=request.url.path, **context)
    return HTMLResponse(printable(html), status_code=status)


def render_text(template: str, **context: Any) -> str:
    """Rendered text that can always be encoded: a lone surrogate stored before the service
    refused them shows as its `\\udXXX` escape instead of failing the page."""
    return printable(_env.get_template(template).render(**context))
