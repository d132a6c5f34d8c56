"""In-sandbox entry point: parse and compare math answers, one request per response.

The host keeps warm sandboxed sessions (`verifiers.math.verifier.SESSIONS`): one process
serves request after request (up to `max_requests`, recycled by age), and each request
is judged from scratch under its own time budget. When a request hangs or kills its
process, the host drops that session and judges the rest of the batch in a fresh
sandboxed process, which pins the failure on the answer that caused it.
"""

from __future__ import annotations

import functools
from typing import Any

from verifiers.math.inside.answer import Parsed, ParseFailure, TooLarge, parse_answer
from verifiers.math.inside.choices import as_choice
from verifiers.math.inside.claims import check_claims
from verifiers.math.inside.compare import Policy, distinct, equivalent
from verifiers.math.inside.forms import form_problem
from verifiers.math.inside.normalise import normalise

_CRASHES = (RecursionError, MemoryError, OverflowError, TypeError, ValueError, ZeroDivisionError, AttributeError)


@functools.lru_cache(maxsize=256)
def _parse_gold(candidates: tuple[str, ...], named_values: bool) -> tuple[Parsed, str]:
    # A group's answers share one gold; comparisons only read the parsed value.
    items = distinct([leaf for text in candidates for leaf in parse_answer(text, named_values).flat()])
    gold = items[0] if len(items) == 1 else Parsed("multi", items=items)
    return gold, gold.describe()


@functools.lru_cache(maxsize=64)
def _parse_choices(choices: tuple[tuple[str, str], ...], named_values: bool) -> dict[str, Parsed]:
    return {letter: parse_answer(value, named_values) for letter, value in choices}


def _as_choices(gold: Parsed, choices: dict[str, Parsed], policy: Policy) -> Parsed:
    def equal(a: Parsed, b: Parsed) -> tuple[bool, str]:
        return equivalent(a, b, policy)

    if gold.kind == "multi":
        return Parsed("multi", items=[as_choice(item, choices, equal) for item in gold.items])
    return as_choice(gold, choices, equal)


def _same_text(answer: str, gold: str) -> bool:
    try:
        return normalise(answer) == normalise(gold)
    except ParseFailure:
        return False


def _several(gold: Parsed) -> bool:
    """Whether the gold asks for several values (a list, a set, a ±)."""
    return gold.kind in ("multi", "set", "tuple") and len(gold.items) > 1


def check_one(item: dict[str, Any]) -> dict[str, Any]:
    try:
        result = _check(item)
    except Exception as exc:  # noqa: BLE001 - any internal failure is a verdict on this answer, never a crash
        return {"status": "unparsable", "message": f"internal failure {type(exc).__name__}: {str(exc)[:200]}"}
    if result.get("equal") and item.get("claims"):  # false_step: only a correct answer's working is checked
        result["claims"] = check_claims(item["claims"])
    return result


def _check(item: dict[str, Any]) -> dict[str, Any]:
    named_values = bool(item.get("named_values", True))
    figures = item.get("significant_figures") if item.get("form") == "scientific" else None
    policy = Policy(percent=item.get("percent", "either"), require_units=bool(item.get("require_units", False)),
                    figures=figures)
    gold_texts = tuple(item.get("gold_candidates") or [item["gold"]])
    candidates = item.get("candidates") or [item["answer"]]
    try:
        choices = _parse_choices(tuple(sorted((item.get("choices") or {}).items())), named_values)
    except (ParseFailure, *_CRASHES) as exc:
        return {"status": "choices_unparsable", "message": str(exc)[:300]}
    if len(gold_texts) == 1 and not item.get("form") and all(_same_text(text, gold_texts[0]) for text in candidates):
        return {"status": "compared", "equal": True, "how": "identical", "answer_normalised": candidates[0][:300],
                "gold_normalised": gold_texts[0][:300]}
    try:
        gold, gold_described = _parse_gold(gold_texts, named_values)
    except Exception as exc:  # noqa: BLE001 - whatever breaks on the gold makes the task invalid
        return {"status": "gold_unparsable", "message": str(exc)[:300]}
    if choices:
        gold = _as_choices(gold, choices, policy)
        gold_described = gold.describe()
    try:
        parsed = [parse_answer(text, named_values) for text in candidates]
        leaves = [leaf for p in parsed for leaf in p.flat()]
        if choices:
            leaves = [as_choice(leaf, choices, lambda a, b: equivalent(a, b, policy)) for leaf in leaves]
        values = distinct(leaves, policy)
    except TooLarge as exc:
        return {"status": "too_large", "message": str(exc)[:300]}
    except (ParseFailure, RecursionError, MemoryError, OverflowError) as exc:
        return {"status": "unparsable", "message": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if gold.kind != "text" and any(v.kind == "text" for v in values):
        return {"status": "no_answer", "message": "the final answer is words, not a mathematical value",
                "answer_normalised": "; ".join(v.describe() for v in values)[:300]}
    several = item.get("several_answers")
    several = _several(gold) if several is None else bool(several)
    if len(values) > 1 and not several:
        return {"status": "multiple_answers", "candidates": [v.describe() for v in values][:10],
                "message": f"{len(values)} different final answers where one is asked"}
    answer = values[0] if len(values) == 1 else Parsed("multi", items=values)
    try:
        equal, how = equivalent(answer, gold, policy)
    except _CRASHES as exc:
        return {"status": "compare_failed", "message": f"{type(exc).__name__}: {str(exc)[:200]}",
                "answer_normalised": answer.describe(), "gold_normalised": gold_described}
    form = item.get("form")
    if equal and form:
        problems = [p for p in (form_problem(text, form, item.get("significant_figures")) for text in candidates) if p]
        if problems:
            equal, how = False, f"form: {problems[0]}"
    return {
        "status": "compared",
        "equal": bool(equal),
        "how": how,
        "answer_normalised": answer.describe(),
        "gold_normalised": gold_described,
    }


_WARM_UP = [
    ("1/2", "0.5"), ("x(x+1)", "x^2+x"), ("2\\sqrt{2}", "\\sqrt{8}"), ("(1, 2)", "(1,2)"), ("[1, 2)", "[1,2)"),
    ("3\\pi", "\\pi \\cdot 3"), ("1.25", "1.250"), ("\\{1,2\\}", "\\{2,1\\}"), ("\\sin x", "\\cos x"),
    ("e^{i\\pi}", "-1"), ("\\log_2 8", "3"), ("10!", "3628800"), ("yes", "\\text{no}"), ("x \\le 3", "(-\\infty, 3]"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)"), ("2x+4y=12", "x+2y=6"), ("3:4", "6:8"), ("50\\%", "0.5"),
    ("150 cm", "1.5 m"),
]


def sandbox_warm_up() -> None:
    """Run in the warm worker before it forks jobs: sympy's lazy imports and caches
    then cost nothing per job."""
    for answer, gold in _WARM_UP:
        check_one({"answer": answer, "gold": gold})


def serve(payload: Any, channel: Any) -> None:
    def handle(body: Any) -> Any:
        if isinstance(body, dict) and "parts" in body:  # several answers in one message
            for item in body["parts"]:
                _send_part(channel, body.get("id"), check_one(item))
            return None  # closes the request: every part was answered
        return check_one(body)

    channel.serve(handle)


def _send_part(channel: Any, request_id: Any, answer: dict[str, Any]) -> None:
    """One part's answer, as soon as it is judged: the host times each part on its own. An answer
    too big for the channel goes as None (the host judges that part in a fresh process)."""
    try:
        channel.send({"t": "ans", "id": request_id, "body": answer})
    except ValueError:  # FrameError
        channel.send({"t": "ans", "id": request_id, "body": None})
