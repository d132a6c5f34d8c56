"""Trust zones in the tree: code that runs inside the sandbox (`<package>/inside/`) imports
nothing from the host side.

Walked over the source with `ast` (nothing is imported), for every `inside/` folder under
`verifiers/` and `sandboxes/`, present or future: a module there, the `wire.py` shapes both
sides import, and the package `__init__` files that importing them runs, may import the
standard library, third-party packages of the runtime image, `inside` modules and wire
shapes of their own family, and the sandbox's own inside code and frames, nothing else of
this project: not `service`, not host modules of `sandboxes`, not their family's (or another
family's) host modules.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Packages of this repository (what an inside module may not reach, but for the allowed parts).
PROJECT = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
# The sandbox's wire: frame encoding, imported by the worker and the host.
SANDBOX_WIRE = "sandboxes.frames"
TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def inside_dirs() -> list[Path]:
    return sorted(p for top in ("verifiers", "sandboxes") for p in (REPO / top).rglob("inside") if p.is_dir())


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file, at any depth, relative ones resolved."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.append((node.lineno, base))
            if (REPO / base.replace(".", "/")).is_dir():  # names of a package may be modules
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def allowed(importer: str, module: str) -> bool:
    top = module.split(".")[0]
    if top not in PROJECT:
        return True  # the standard library or a package of the runtime image
    if module in {"sandboxes", "verifiers"} or module.startswith("sandboxes.inside") or module == SANDBOX_WIRE:
        return True
    parts = importer.split(".")
    if parts[0] == "verifiers" and len(parts) > 1:
        family = f"verifiers.{parts[1]}"
        return module in {family, f"{family}.inside", f"{family}.wire"} or module.startswith(f"{family}.inside.")
    return False


def zone_files() -> list[Path]:
    """Every file an inside module's import runs or may import: its modules, the family's
    wire, the sandbox's frames, and the `__init__` files of the packages above them."""
    files: set[Path] = {REPO / "sandboxes" / "frames.py"}
    for folder in inside_dirs():
        files.update(folder.rglob("*.py"))
        wire = folder.parent / "wire.py"
        if wire.exists():
            files.add(wire)
        for parent in folder.relative_to(REPO).parents:
            init = REPO / parent / "__init__.py"
            if parent != Path(".") and init.exists():
                files.add(init)
    return sorted(files)


def violations(path: Path, source: str | None = None) -> list[str]:
    importer = module_name(path)
    return [f"{path.relative_to(REPO)}:{line} imports {module}"
            for line, module in imports(path, source) if not allowed(importer, module)]


def test_the_walk_covers_every_family_with_sandboxed_code():
    walked = {module_name(p) for p in zone_files()}
    for entry_point in ("verifiers.math.inside.check", "verifiers.sql.inside.sqlite_runner",
                        "verifiers.tool_state.inside.replay", "verifiers.proof.inside.serve",
                        "sandboxes.inside.worker", "sandboxes.inside.watchdog", "verifiers.tool_state.wire",
                        "sandboxes.frames", "verifiers", "verifiers.math"):
        assert entry_point in walked


def test_nothing_inside_the_sandbox_imports_host_code():
    found = [v for path in zone_files() for v in violations(path)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("importer", "source"), [
    ("verifiers/math/inside/x.py", "from service.config import Settings\n"),
    ("verifiers/math/inside/x.py", "def f():\n    import sandboxes.process\n"),
    ("verifiers/math/inside/x.py", "from verifiers.math import verifier\n"),
    ("verifiers/math/inside/x.py", "from .. import extract\n"),
    ("verifiers/math/inside/x.py", "from verifiers.proof.inside import serve\n"),
    ("verifiers/code/inside/x.py", "from verifiers.code.grader import grade\n"),
    ("sandboxes/inside/x.py", "from sandboxes.base import Limits\n"),
    ("verifiers/math/wire.py", "import verifiers.math.verifier\n"),
])
def test_the_walk_catches_a_host_import(importer, source):
    # The checker on planted source: a host import anywhere is found (a relative one too).
    assert violations(REPO / importer, source), source


@pytest.mark.parametrize("source", [
    "import os, json\nfrom typing import Any\n",
    "import sympy\n",
    "from verifiers.math.inside.parse import parse\nfrom . import normalise\nfrom ..wire import Shape\n",
    "from sandboxes.inside.watchdog import run_watched\nfrom sandboxes.frames import encode_frame\n",
])
def test_what_inside_code_may_import_passes(source):
    assert not violations(REPO / "verifiers" / "math" / "inside" / "planted.py", source)


def test_host_modules_launch_sandboxed_code_from_inside_folders():
    """Every sandbox target and preload a verifier names is an `inside` module's function."""
    import verifiers

    named = []
    for info in pkgutil.walk_packages(verifiers.__path__, "verifiers."):
        if ".inside" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and TARGET_RE.match(value):
                named.append(value)
            elif name == "PRELOAD" and isinstance(value, tuple):
                named += [f"{m}:sandbox_warm_up" if hasattr(importlib.import_module(m), "sandbox_warm_up")
                          else f"{m}:__name__" for m in value]
    assert len(named) >= 8, named
    for target in named:
        module_path, _, function = target.partition(":")
        assert ".inside." in module_path, target
        assert hasattr(importlib.import_module(module_path), function), target
