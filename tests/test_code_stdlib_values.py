"""`Fraction`, `Decimal` and `deque` answers cross the sandbox as themselves (code 1.3.0).

Before, an honest `return Fraction(1, 3)` to a test `assert candidate(...) == Fraction(1, 3)`
was refused as an unencodable value and got 0. Only data crosses: a numerator and a
denominator, a decimal string, a list of items and a maxlen; the far side builds its own
value of the standard type. A subclass, or a candidate that rigs the standard class in its
own process, gains nothing. Through the code verifier on each sandbox backend, and the
encoding itself through its public module (its malformed forms with the others, in
tests/test_code_verifier.py::test_decoder_refuses_malformed_data)."""

from __future__ import annotations

import json
from collections import deque
from decimal import Decimal
from fractions import Fraction

import pytest

from tests.test_code_verifier import fenced, verify
from verifiers.base import Verdict
from verifiers.code.inside import values


def _round_trip(value):
    return values.decode(json.loads(json.dumps(values.encode(value))))


@pytest.mark.parametrize("value", [
    Fraction(1, 3), Fraction(-7, 2), Fraction(10**60, 3), Fraction(0),
    Decimal("0.1"), Decimal("-2.50"), Decimal("1E+400"), Decimal("-0"), Decimal("Infinity"),
    deque([1, (2, 3), "x"]), deque([1, 2, 3], maxlen=3), deque(),
    [Fraction(1, 2), {Decimal("1.5"): deque([Fraction(1, 4)])}],
])
def test_standard_numbers_and_deques_round_trip_with_their_types(value):
    decoded = _round_trip(value)
    assert decoded == value and type(decoded) is type(value)
    if isinstance(value, Decimal):
        assert str(decoded) == str(value)  # the exponent is kept: Decimal("2.50") is not Decimal("2.5")
    if isinstance(value, deque):
        assert decoded.maxlen == value.maxlen


def test_decimal_nan_round_trips():
    decoded = _round_trip(Decimal("NaN"))
    assert type(decoded) is Decimal and decoded.is_nan()


def test_subclasses_of_the_standard_types_are_refused():
    class AlwaysEqualFraction(Fraction):
        def __eq__(self, other):
            return True

    class AlwaysEqualDeque(deque):
        def __eq__(self, other):
            return True

    for bad in (AlwaysEqualFraction(1, 2), AlwaysEqualDeque([1])):
        with pytest.raises(values.Unencodable):
            values.encode(bad)


TASKS = {
    "fraction": ("from fractions import Fraction\n"
                 "def check(candidate):\n    assert candidate(1, 3) == Fraction(1, 3)\n"
                 "    assert candidate(2, 4) + Fraction(1, 2) == 1\n",
                 "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)",
                 "from fractions import Fraction\ndef f(a, b):\n    return Fraction(b, a)"),
    "decimal": ("from decimal import Decimal\n"
                "def check(candidate):\n    assert candidate('1.10', '2.20') == Decimal('3.30')\n"
                "    assert str(candidate('0.1', '0.2')) == '0.3'\n",
                "from decimal import Decimal\ndef f(a, b):\n    return Decimal(a) + Decimal(b)",
                "def f(a, b):\n    return float(a) + float(b)"),
    "deque": ("from collections import deque\n"
              "def check(candidate):\n    assert candidate([1, 2, 3], 2) == deque([2, 3])\n"
              "    assert candidate([1, 2, 3], 2).maxlen == 2\n",
              "from collections import deque\ndef f(items, n):\n    return deque(items, maxlen=n)",
              "def f(items, n):\n    return items[-n:]"),
}


@pytest.mark.parametrize("kind", sorted(TASKS))
def test_an_honest_standard_value_answer_gets_its_reward_and_a_wrong_one_does_not(code_verifier, ctx, kind):
    tests, honest, wrong = TASKS[kind]
    task = {"entry_point": "f", "tests": tests}
    outcome, reward = verify(code_verifier, ctx, task, fenced(honest))
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    outcome, reward = verify(code_verifier, ctx, task, fenced(wrong))
    assert reward == 0.0, outcome.evidence


RIGGED = {
    # The standard class rigged in the candidate's own process: its comparison never runs in
    # the grader, which builds its own Fraction from the two integers.
    "patched_fraction_eq": "from fractions import Fraction\nFraction.__eq__ = lambda self, other: True\n"
                           "def f(a, b):\n    return Fraction(0)",
    "subclass_always_equal": "from fractions import Fraction\n"
                             "class F(Fraction):\n    def __eq__(self, other):\n        return True\n"
                             "    __hash__ = Fraction.__hash__\n"
                             "def f(a, b):\n    return F(0)",
    "module_attribute_swapped": "import fractions\n"
                                "class F(fractions.Fraction):\n    def __eq__(self, other):\n        return True\n"
                                "    __hash__ = fractions.Fraction.__hash__\n"
                                "fractions.Fraction = F\n"
                                "def f(a, b):\n    return F(0)",
    "rigged_numerator": "from fractions import Fraction\n"
                        "Fraction.numerator = property(lambda self: 10**9)\n"
                        "def f(a, b):\n    return Fraction(0)",
}


@pytest.mark.parametrize("name", sorted(RIGGED))
def test_a_rigged_fraction_gets_nothing(code_verifier, ctx, name):
    tests = TASKS["fraction"][0]
    outcome, reward = verify(code_verifier, ctx, {"entry_point": "f", "tests": tests}, fenced(RIGGED[name]))
    assert reward == 0.0 and outcome.verdict != Verdict.correct, (name, outcome.evidence)
    honest, reward = verify(code_verifier, ctx, {"entry_point": "f", "tests": tests}, fenced(TASKS["fraction"][1]))
    assert reward == 1.0, honest.evidence
