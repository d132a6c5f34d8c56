"""Held-out math answers, round 16: 217 written blind by a helper (docs/math_verifier.md and the
README only, no verifier code read), in the styles R1-, Qwen- and GPT-style policies write, each
labelled with the reward a careful grader gives before anything ran
(tests/data/heldout16/math_blind.json). Blind score 202/217 on math 2.6.0, 210/217 on 2.7.0.
Then regression cases for the round's fixes, written after.

The cases the verifier still decides otherwise are listed in KNOWN with why; they run as strict
xfails, so one that starts to agree fails here until it is moved out of the list.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.heldout8_support import check_verdict, verdicts_of

BLIND = json.loads((Path(__file__).parent / "data" / "heldout16" / "math_blind.json").read_text())["cases"]
C, X, F = "correct", "incorrect", "invalid_format"

# Blind cases decided otherwise, by id: documented policies (the label disagrees with a rule the
# docs state) and gaps seen and left (docs/math_verifier.md, "Round 16").
KNOWN: dict[int, str] = {
    37: "gap: j is not read as the imaginary unit (a variable j stays a variable)",
    38: "gap: j is not read as the imaginary unit (a variable j stays a variable)",
    95: "gap: a ratio in words ('3 to 2') is read as a product of variables, not 3:2",
    123: "policy: 'was a slip' is not among the retraction phrases; two boxes left standing are a hedge",
    124: "policy: an equation 'a + b = 5' is not the value 5 (kind_mismatch)",
    144: "policy: the last <answer> tag counts; an earlier tag is not a second answer",
    145: "policy: text after the last <answer> tag is not read",
}

# Written after the blind run, for the round's fix: a value offered beside the last box.
FIX_CASES: list[tuple[str, dict, str, str | list[str]]] = [
    ("or_value_in_text_after_box", {"answer": "3"},
     "\\boxed{3} \\quad (\\text{or } 4 \\text{ if we count the endpoint})", F),
    ("although_also_possible_after_box", {"answer": "3"}, "The answer is \\boxed{3}, although 4 is also possible.", F),
    ("parenthesised_or_after_box", {"answer": "3"}, "\\boxed{3} (or 4 if the endpoint counts)", F),
    ("or_possibly_after_inline_box", {"answer": "3"}, "So $\\boxed{3}$, or possibly 4.", F),
    ("or_after_box_in_answer_tag", {"answer": "3"}, "<answer>\\boxed{3} (or 4)</answer>", F),
    ("could_also_be_after_box", {"answer": "4"}, "\\boxed{3}, but it could also be 4.", F),
    # an equal value beside the box is a repeat, not a hedge
    ("percent_beside_fraction_box", {"answer": "\\frac{1}{4}"}, "\\boxed{\\frac14} (or 25\\%)", C),
    ("decimal_beside_box", {"answer": "0.5"}, "\\boxed{\\frac{1}{2}} (or 0.5)", C),
    # an approximation, or a number of the sentence that is not offered as the answer
    ("approximation_beside_box", {"answer": "\\pi"}, "\\boxed{\\pi} (or approximately 3.14)", C),
    ("or_inside_a_condition_after_box", {"answer": "5"}, "\\boxed{5} for n = 6 or 7 as well", C),
    ("next_sentence_after_box", {"answer": "3"}, "\\boxed{3}. Note that 4 or 5 would break the condition.", C),
    # A clause that qualifies or explains the value is not the value (its number was read).
    ("qualifier_after_value_in_tag", {"answer": "4"},
     "<answer>The minimum value is 4, attained at x = 2.</answer>", C),
    ("qualifiers_number_is_not_the_answer", {"answer": "2"},
     "<answer>The minimum value is 4, attained at x = 2.</answer>", X),
    ("condition_after_value_in_phrase", {"answer": "5"}, "The answer is 5 for n = 3.", C),
    ("conditions_number_is_not_the_answer", {"answer": "3"}, "The answer is 5 for n = 3.", X),
    ("that_is_after_value_in_tag", {"answer": "\\frac14"}, "<answer>The probability is 1/4, i.e. 25%.</answer>", C),
    ("gives_states_the_value_in_tag", {"answer": "4"}, "<answer>x = 2 gives the minimum value of 4</answer>", C),
    ("opening_reason_in_tag", {"answer": "3"}, "<answer>Since 2x = 6, x = 3.</answer>", C),
    ("opening_reasons_number_is_not_the_answer", {"answer": "6"}, "<answer>Since 2x = 6, x = 3.</answer>", X),
    ("closing_reason_in_tag", {"answer": "3"}, "<answer>x = 3 (since 2x = 6)</answer>", C),
    ("i_think_in_tag", {"answer": "3"}, "<answer>3, I think</answer>", C),
    # A restatement is the value: what follows it counts.
    ("which_is_restates_the_value", {"answer": "12"}, "The answer is 2 times 6, which is 12.", C),
    ("which_is_restates_a_wrong_value", {"answer": "6"}, "The answer is 2 times 6, which is 12.", X),
    # A sentence ends after a number too: the next sentence's number is not the answer.
    ("next_sentence_after_phrase", {"answer": "12"}, "The answer is 12. Next, we check that 5 fails.", C),
    ("next_sentences_number_is_not_the_answer", {"answer": "5"}, "The answer is 12. Next, we check that 5 fails.", X),
    ("reason_still_cut", {"answer": "12"}, "The answer is 12 because 3 groups of 4.", C),
    ("or_in_phrase_still_a_hedge", {"answer": "3"}, "The answer is 3 or 4.", F),
    # Values joined by "and" are one answer, a list: the last alone was read (and rewarded).
    ("roots_are_a_list", {"answer": "\\{2,-3\\}"}, "<answer>The roots are 2 and -3.</answer>", C),
    ("list_missing_a_root", {"answer": "\\{2,-3,5\\}"}, "<answer>The roots are 2 and -3.</answer>", X),
    ("list_for_a_single_gold", {"answer": "-3"}, "The answer is 2 and -3.", [X, F]),
    ("list_of_three_in_phrase", {"answer": "\\{1,2,5\\}"}, "The answers are 1, 2, and 5.", C),
    ("plural_phrase_names_its_values", {"answer": "\\{1,2,5\\}"}, "So the final answers are 1, 2 and 6.", X),
    ("thousands_separator_not_a_list", {"answer": "1234"}, "The answer is 1,234.", C),
    # "has no solutions" names the empty set, as "there is no solution" did.
    ("has_no_real_solutions", {"answer": "\\emptyset"}, "<answer>The equation has no real solutions.</answer>", C),
    ("has_no_solutions_for_a_value_gold", {"answer": "2"}, "<answer>The equation has no solutions.</answer>", X),
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    blind = [(str(case["id"]), case["task"], case["response"], "") for case in BLIND]
    return verdicts_of(client, "math", blind + FIX_CASES)


@pytest.mark.parametrize("case", [
    pytest.param(case, id=str(case["id"]), marks=[pytest.mark.xfail(strict=True, reason=KNOWN[case["id"]])]
                 if case["id"] in KNOWN else []) for case in BLIND])
def test_heldout16_math_blind(verdicts, case):
    result = verdicts[str(case["id"])]
    assert result["verdict"] != "error", result
    assert result["reward"] == case["expected_reward"], (case["response"], result["verdict"], result["evidence"])


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in FIX_CASES])
def test_heldout16_math_fixes(verdicts, name, expected):
    check_verdict(verdicts[name], expected)
