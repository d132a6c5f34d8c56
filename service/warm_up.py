"""What the service warms at start (ASSAY_WARM_UP), before it says it is ready.

Warming a verifier starts its sandbox pools (and resident servers) with what they preload,
so that no request pays for that: the proof verifier's workers read set.mm (seconds each;
about three quarters of a service start), math's import its libraries. A deployment warms
every verifier (`all`, the default): a request never pays for loading set.mm. A process
that never judges some family may skip it (a comma list of the families to warm, or `none`):
the test suite's in-process apps and `assay serve` subprocesses warm every family but proof
(set in `tests/conftest.py`), so each start costs about a second instead of about ten; the
first proof request of such a service starts the proof pools itself.
"""

from __future__ import annotations

from sandboxes.base import Sandbox
from verifiers import registry
from verifiers.base import VerifyContext


def families(spec: str) -> list[str]:
    """The verifier families `spec` names: `all`, `none`, or a comma list of families."""
    names = registry.names()
    spec = spec.strip()
    if spec == "all":
        return names
    if spec in ("", "none"):
        return []
    chosen = [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise ValueError(f"ASSAY_WARM_UP names no verifier {', '.join(unknown)} "
                         f"(all, none, or a comma list of {', '.join(names)})")
    return [name for name in names if name in chosen]


def warm_verifiers(sandbox: Sandbox, spec: str, services: dict[str, str]) -> None:
    for name in families(spec):
        registry.get(name).warm(VerifyContext(sandbox, services=services))
