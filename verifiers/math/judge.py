"""In-sandbox entry point: parse and compare math answers, one message per answer.

The host opens one sandboxed process per batch and sends each (answer, gold) pair as a
request, so that each answer gets its own time budget: when one answer hangs, the host
kills this process and continues the batch in a fresh one.
"""

from __future__ import annotations

import functools
from typing import Any

from verifiers.math.claims import check_claims
from verifiers.math.compare import equivalent
from verifiers.math.parse import Parsed, ParseFailure, TooLarge, parse_answer


@functools.lru_cache(maxsize=256)
def _parse_gold(text: str) -> Parsed:
    # A group's answers share one gold; comparisons only read the parsed value.
    return parse_answer(text)


def judge_one(item: dict[str, Any]) -> dict[str, Any]:
    try:
        gold = _parse_gold(item["gold"])
    except ParseFailure as exc:
        return {"status": "gold_unparsable", "message": str(exc)[:300]}
    try:
        answer = parse_answer(item["answer"])
    except TooLarge as exc:
        return {"status": "too_large", "message": str(exc)[:300]}
    except ParseFailure as exc:
        return {"status": "unparsable", "message": str(exc)[:300]}
    except (RecursionError, MemoryError, OverflowError) as exc:
        return {"status": "unparsable", "message": type(exc).__name__}
    try:
        equal, how = equivalent(answer, gold)
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, ZeroDivisionError) as exc:
        return {"status": "compare_failed", "message": f"{type(exc).__name__}: {str(exc)[:200]}",
                "answer_normalised": answer.describe(), "gold_normalised": gold.describe()}
    result = {
        "status": "compared",
        "equal": bool(equal),
        "how": how,
        "answer_normalised": answer.describe(),
        "gold_normalised": gold.describe(),
    }
    if equal and item.get("claims"):  # false_step: only a correct answer's working is checked
        result["claims"] = check_claims(item["claims"])
    return result


_WARM_UP = [
    ("1/2", "0.5"), ("x(x+1)", "x^2+x"), ("2\\sqrt{2}", "\\sqrt{8}"), ("(1, 2)", "(1,2)"), ("[1, 2)", "[1,2)"),
    ("3\\pi", "\\pi \\cdot 3"), ("1.25", "1.250"), ("\\{1,2\\}", "\\{2,1\\}"), ("\\sin x", "\\cos x"),
    ("e^{i\\pi}", "-1"), ("\\log_2 8", "3"), ("10!", "3628800"), ("yes", "\\text{no}"),
]


def sandbox_warm_up() -> None:
    """Run in the warm worker before it forks jobs: sympy's lazy imports and caches
    then cost nothing per job."""
    for answer, gold in _WARM_UP:
        judge_one({"answer": answer, "gold": gold})


def serve(payload: Any, channel: Any) -> None:
    channel.serve(judge_one)
