"""Answer tags, gold lists, magnitudes, times, multiple choice, CJK answers, corrections,
qualifiers, units and required forms (issue 28), through the math verifier's Python API in
the real sandbox. Each kind has pairs that must be rewarded and pairs that must not."""

from __future__ import annotations

import pytest

from verifiers import registry
from verifiers.base import Verdict, VerifyContext

C, W, F = Verdict.correct, Verdict.incorrect, Verdict.invalid_format

# (kind, task, response, verdict)
CASES = [
    # A tagged answer is the whole content of the last <answer> tag; a thought never counts.
    ("tags", {"answer": "3 + 2i"}, "<think>expand it</think>\n<answer>3.0 + 2.0i</answer>", C),
    ("tags", {"answer": "3"}, "<think>we need 2x=6</think>\n<answer>\\frac{1}{3}</answer>", W),
    ("tags", {"answer": "13/17"}, "<answer>\\dfrac{13}{17}</answer>", C),
    ("tags", {"answer": "2.5e-8"}, "<answer>2.5e-8</answer>", C),
    ("tags", {"answer": "512"}, "<answer>2^{9}</answer>", C),
    ("tags", {"answer": "8"}, "<answer>7</answer> no wait <answer>8</answer>", C),
    ("tags", {"answer": "8"}, "<think>the answer is 8</think>", F),
    ("tags", {"answer": "8"}, "<think>so \\boxed{8}</think>\n<answer>9</answer>", W),
    ("tags", {"answer": "6"}, "I try 5, no.\n</think>\nSo \\boxed{6}.", C),
    ("tags", {"answer": "6"}, "<answer>So the answer is 6.</answer>", C),
    ("tags", {"answer": "2"}, "Half of it is <answer>\\frac{1}{2}</answer>", W),
]


@pytest.fixture(scope="module")
def math_verifier():
    return registry.get("math")


@pytest.mark.parametrize(("kind", "task", "response", "verdict"), CASES)
def test_kind(math_verifier, sandbox, kind, task, response, verdict):
    parsed = math_verifier.parse_task(task)
    outcome = math_verifier.verify(parsed, response, VerifyContext(sandbox))
    assert outcome.verdict is verdict, (kind, outcome.evidence)
    assert outcome.reward(parsed) == (1.0 if verdict is C else 0.0)


def test_every_kind_has_right_and_wrong_cases():
    for kind in {k for k, *_ in CASES}:
        verdicts = {v for k, _, _, v in CASES if k == kind}
        assert C in verdicts and verdicts - {C}, kind
