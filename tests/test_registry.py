"""The verifier registry finds every verifier, whatever was imported first."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_every_verifier_is_found_after_importing_one_directly():
    code = ("import verifiers.tool_state.verifier\nfrom verifiers import registry\n"
            "print(','.join(registry.names()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert set(out.stdout.strip().split(",")) >= {"math", "code", "sql", "tool_state"}
