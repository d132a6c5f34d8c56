"""The README says what the code does: every setting in `Settings` has a row in the README's
configuration table (and no row names a setting that does not exist), and every HTTP route
the app serves appears in the README's API table."""

from __future__ import annotations

import re
from pathlib import Path

from service.app import create_app
from service.config import Settings

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_every_setting_has_a_row_in_the_readme_and_every_row_a_setting():
    rows = re.findall(r"^\| `ASSAY_([A-Z0-9_]+)` \|", _section("Configuration"), flags=re.M)
    documented = {name.lower() for name in rows}
    fields = set(Settings.model_fields)
    assert fields - documented == set(), "settings missing from the README's configuration table"
    assert documented - fields == set(), "README rows that name no setting"
    assert len(rows) == len(documented), "a setting has two rows"


def test_the_defaults_in_the_readme_are_the_settings_defaults():
    """Where the table gives a plain default (a number, true/false, or a `literal`), it is the
    field's own default."""
    checked = 0
    for name, default in re.findall(r"^\| `ASSAY_([A-Z0-9_]+)` \| ([^|]+) \|", _section("Configuration"), flags=re.M):
        field = Settings.model_fields[name.lower()]
        if field.default_factory is not None or field.default is None:
            continue
        cell = default.strip().strip("`")
        expected = field.default
        if isinstance(expected, bool):
            assert cell == str(expected).lower(), name
        elif isinstance(expected, int | float):
            assert float(cell) == float(expected), name
        else:
            assert cell == str(expected), name
        checked += 1
    assert checked >= 40


def _paths_in(table: str) -> set[tuple[str, str]]:
    """(method, path) pairs named in the table's first column (`GET /a`, `POST /b`, and
    "`GET` same" for the paths named before it on the row), `{id}`-style parameters as `{}`."""
    found: set[tuple[str, str]] = set()
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        row: set[str] = set()
        for text in re.findall(r"`([^`]+)`", line.split("|")[1]):
            parts = text.split(" ", 1)
            if parts[0] in {"GET", "POST", "PUT", "DELETE"} and len(parts) == 2:
                row.add(re.sub(r"\{[^}]+\}", "{}", parts[1].split("?")[0]))
                found.add((parts[0], re.sub(r"\{[^}]+\}", "{}", parts[1].split("?")[0])))
        for same in re.findall(r"`(GET|POST|PUT|DELETE)` same", line.split("|")[1]):
            found |= {(same, path) for path in row}
    return found


def test_every_route_is_in_the_readme_api_table(tmp_path: Path):
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'a.db'}"))
    served = {(method.upper(), re.sub(r"\{[^}]+\}", "{}", path))
              for path, operations in app.openapi()["paths"].items() for method in operations}
    assert ("DELETE", "/v1/envs/{}") in served and len(served) > 30
    documented = _paths_in(_section("API"))
    missing = {f"{m} {p}" for m, p in served if (m, p) not in documented}
    assert missing == set(), "routes missing from the README's API table"
