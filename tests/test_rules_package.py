"""`assay_rules`: the rules service and trainer share, importable anywhere, defined once.

Each import check runs in a clean interpreter (`-I`), so what it sees loaded is what the
import itself loaded, not what another test left in `sys.modules`.
"""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import trainer_client
from assay_rules import (
    REWARD_DECIMALS,
    ZERO_VARIANCE_SPAN,
    consecutive_runs,
    group_advantages,
    is_zero_variance,
    round_reward,
)
from service.advantages import group_advantages as service_group_advantages
from trainer_client.grpo import compute_advantages
from trainer_client.results import group_stats

REPO = Path(__file__).resolve().parent.parent


def _loaded_by(code: str) -> list[str]:
    """Top-level modules that running `code` loaded into a fresh interpreter (what start-up
    loaded, such as site's path hooks, is left out)."""
    probe = ("import json, sys\nbefore = set(sys.modules)\n" + code +
             "\nprint(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))")
    out = subprocess.run([sys.executable, "-I", "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_assay_rules_loads_the_standard_library_only() -> None:
    loaded = _loaded_by("import assay_rules, assay_rules.advantages, assay_rules.canonical, assay_rules.grouping, "
                        "assay_rules.rewards, assay_rules.variance")
    foreign = [m for m in loaded if m not in sys.stdlib_module_names and m.lstrip("_") not in sys.stdlib_module_names
               and m != "assay_rules"]
    assert foreign == [], f"assay_rules pulled in {foreign}"
    assert "assay_rules" in loaded  # the probe did import it: the check above could fail


def test_trainer_client_imports_nothing_of_the_service() -> None:
    modules = [m.name for m in pkgutil.walk_packages(trainer_client.__path__, "trainer_client.")]
    assert "trainer_client.grpo" in modules and "trainer_client.adapters.verl" in modules
    loaded = _loaded_by("\n".join(f"import {m}" for m in modules))
    assert {"service", "verifiers", "sandboxes", "fastapi", "sqlalchemy", "docker"}.isdisjoint(loaded), loaded
    assert "assay_rules" in loaded and "trainer_client" in loaded


def test_service_takes_its_rules_from_assay_rules() -> None:
    assert service_group_advantages is group_advantages
    # Module-level imports of the service's rule users: no trainer_client among them.
    for path in ("service/advantages.py", "service/task_stats.py", "service/routes/openrlhf.py",
                 "service/signing.py", "service/audit_chain.py", "service/audit_verify.py"):
        head = [line for line in (REPO / path).read_text().splitlines() if line.startswith(("import ", "from "))]
        assert not [line for line in head if "trainer_client" in line], path


CASES = [
    ([1.0, 0.0, 0.5, 0.25], None),
    ([1.0, 0.0, None, 0.5, 0.25], None),
    ([0.3, 0.3, 0.3], None),
    ([1.0, 0.0, 0.0, 1.0], [True, False, True, True]),
    ([0.7], None),
    ([None, None], None),
]


@pytest.mark.parametrize(("rewards", "include"), CASES)
def test_one_definition_of_advantages_on_both_sides(rewards, include) -> None:
    service = group_advantages(rewards, include)
    client, mean, std, zero = group_stats([r if include is None or keep else None
                                           for r, keep in zip(rewards, include or [True] * len(rewards), strict=True)])
    assert (client, mean, std, zero) == (service.advantages, service.mean, service.std, service.zero_variance)
    valid = [r is not None and (include is None or include[i]) for i, r in enumerate(rewards)]
    tensor = compute_advantages(torch.tensor([r or 0.0 for r in rewards]), len(rewards), valid=torch.tensor(valid))
    assert bool(tensor.zero_variance.item()) is service.zero_variance
    if service.counted:
        assert tensor.mean.item() == pytest.approx(service.mean) and tensor.std.item() == pytest.approx(service.std)
        want = [0.0 if a is None else a for a in service.advantages]
        assert tensor.advantages.tolist() == pytest.approx(want, abs=1e-6)


def test_bessel_and_scale_options() -> None:
    bessel = group_advantages([1.0, 0.0], [True, True])
    plain = group_advantages([1.0, 0.0], [True, True], bessel=False)
    assert bessel.std == pytest.approx(2 ** -0.5) and plain.std == pytest.approx(0.5)
    assert plain.advantages == pytest.approx([0.5 / 0.5001, -0.5 / 0.5001])
    assert group_advantages([1.0, 0.0], scale="none").advantages == [0.5, -0.5]
    excluded = group_advantages([1.0, 0.0, 9.0], [True, True, False])
    assert excluded.advantages[2] is None and excluded.counted == 2 and excluded.mean == 0.5


def test_zero_variance_rests_on_reward_rounding() -> None:
    # Two rounded rewards that differ differ by at least 10**-REWARD_DECIMALS, beyond the span.
    a, b = round_reward(0.1234564), round_reward(0.1234566)
    assert a != b and abs(a - b) > ZERO_VARIANCE_SPAN and not is_zero_variance([a, b])
    assert is_zero_variance([a, a + 1e-9]) and is_zero_variance([a, None])
    assert round_reward(2 / 3) == round(2 / 3, REWARD_DECIMALS) == 0.666667


def test_consecutive_runs_cut_long_runs() -> None:
    keys = [{"id": "a"}, {"id": "a"}, {"id": "a"}, {"id": "b"}, {"id": "a"}]
    assert consecutive_runs(keys, max_run=2) == [({"id": "a"}, [0, 1]), ({"id": "a"}, [2]), ({"id": "b"}, [3]),
                                                 ({"id": "a"}, [4])]
    with pytest.raises(ValueError):
        consecutive_runs(keys, max_run=0)


def test_bench_and_scripts_import_no_tests() -> None:
    """Harnesses they share with the tests live in `service.testing`, not in `tests/`."""
    import ast

    test_modules = {p.stem for p in (REPO / "tests").glob("*.py")} | {"tests"}
    offenders = []
    for path in sorted([*(REPO / "bench").glob("*.py"), *(REPO / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in test_modules]
        if re.search(r"sys\.path\.\w+\(.*tests", path.read_text()):
            offenders.append(f"{path.name}: puts tests/ on the path")
    assert offenders == []
    assert any((REPO / "bench").glob("*.py"))
