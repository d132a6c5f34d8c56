"""Math-Verify's own test suite (Apache-2.0, tests/data/math_verify_suite.jsonl) and the
cases where Assay's verdict differs from the upstream label, as docs/math_verifier.md lists
them. Read by tests/test_math_verify_suite.py and bench/math_throughput.py (source checkout)."""

from __future__ import annotations

import json
import re

from service.testing.live import REPO

CASES = [json.loads(line) for line in (REPO / "tests/data/math_verify_suite.jsonl").read_text().splitlines()]


def documented_disagreements() -> set[str]:
    """The suite sources listed in docs/math_verifier.md's "Where we differ" section."""
    doc = (REPO / "docs/math_verifier.md").read_text()
    section = doc.split("## Where we differ from Math-Verify", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(tests/[^`]+\])`", section))
