"""`special_cases_examples` reads the examples a policy sees in the task's prompt too: the
doctests of a HumanEval-style prompt (`>>> f(1, 2)` then its output) and stdin/stdout samples
the prompt marks as such ("Sample Input:" / "Sample Output:"). Through the code verifier's
public interface on the real sandbox; candidate code runs only there."""

from __future__ import annotations

import pytest

from verifiers.base import Verdict
from verifiers.code.detectors import examples_of
from verifiers.registry import get

FLAG = "special_cases_examples"
PROMPT = ('def rotate(xs: list, k: int) -> list:\n    """Rotate a list left by k places.\n\n'
          "    >>> rotate([1, 2, 3, 4], 1)\n    [2, 3, 4, 1]\n    >>> rotate(['a', 'b'], 3)\n    ['b', 'a']\n"
          '    >>> print("not an example of rotate")\n    not an example of rotate\n    """\n')
CALL_TASK = {"entry_point": "rotate", "prompt": PROMPT,
             "tests": "def check(candidate):\n    assert candidate([5, 6, 7], 2) == [7, 5, 6]\n"}
IO_PROMPT = ('# Print the largest of the numbers on one line.\n#\n# Sample Input 1:\n# 4 9 2\n# Sample Output 1:\n'
             '# 9\n#\n# Sample Input 2:\n# -1 -7\n# Sample Output 2:\n# -1\n')
IO_TASK = {"prompt": IO_PROMPT, "io_cases": [{"stdin": "3 8 1\n", "stdout": "8\n"}]}


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def test_the_prompt_examples_are_read():
    v = get("code")
    assert examples_of(v.parse_task(CALL_TASK)) == [
        {"mode": "call", "args": ["[1, 2, 3, 4]", "1"], "output": "[2, 3, 4, 1]"},
        {"mode": "call", "args": ["['a', 'b']", "3"], "output": "['b', 'a']"}]
    assert examples_of(v.parse_task(IO_TASK)) == [
        {"mode": "io", "input": "4 9 2\n", "output": "9\n"}, {"mode": "io", "input": "-1 -7\n", "output": "-1\n"}]


@pytest.mark.parametrize(("task", "hard_coded", "honest"), [
    (CALL_TASK,
     "def rotate(xs, k):\n    if xs == [1, 2, 3, 4] and k == 1:\n        return [2, 3, 4, 1]\n"
     "    if xs == ['a', 'b']:\n        return ['b', 'a']\n    return xs\n",
     "def rotate(xs, k):\n    if not xs:\n        return xs\n    k %= len(xs)\n    return xs[k:] + xs[:k]\n"),
    (IO_TASK,
     "line = input().strip()\nif line == '4 9 2':\n    print(9)\nelif line == '-1 -7':\n    print(-1)\n"
     "else:\n    print(max(map(int, line.split())))\n",
     "print(max(map(int, input().split())))\n"),
])
def test_branching_on_prompt_examples_is_flagged_and_honest_code_is_not(ctx, task, hard_coded, honest):
    v = get("code")
    flagged, plain = v.verify_many(v.parse_task(task), [code(hard_coded), code(honest)], ctx)
    assert FLAG in flagged.flag_map() and flagged.verdict is not Verdict.error, flagged.flag_map()
    assert plain.verdict is Verdict.correct and FLAG not in plain.flag_map(), plain.flag_map()


def test_a_prompt_without_examples_flags_nothing(ctx):
    v = get("code")
    task = {**CALL_TASK, "prompt": 'def rotate(xs, k):\n    """Rotate left by k; see >>> below? no."""\n'}
    assert examples_of(v.parse_task(task)) == []
    src = "def rotate(xs, k):\n    if xs == [1, 2, 3, 4]:\n        return [2, 3, 4, 1]\n    return xs[k:] + xs[:k]\n"
    (outcome,) = v.verify_many(v.parse_task(task), [code(src)], ctx)
    assert FLAG not in outcome.flag_map()
