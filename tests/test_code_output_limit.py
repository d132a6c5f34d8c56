"""The output limit and the task's own answers, on every backend of ASSAY_TEST_BACKENDS.

Round 16's blind probe: a task whose expected stdout was over the default `output_bytes`
(1,000,000) was accepted, and every right answer to it was cut off (`violation`, reward 0)
in every language. Left at its default, the limit now makes room for twice the largest
expected stdout; a limit given smaller than the task's own answer is a 422 naming
`output_bytes`. A program that writes far more than the answer is still stopped.
"""

from __future__ import annotations

import pytest

from tests.conftest import verify_program
from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

NUMBERS = list(range(1_000_000, 1_200_000))  # 200,000 numbers of 7 digits: 1.6 MB each way
BIG = {"io_cases": [{"stdin": f"{len(NUMBERS)}\n" + " ".join(map(str, NUMBERS)) + "\n",
                     "stdout": "\n".join(map(str, reversed(NUMBERS))) + "\n"},
                    {"stdin": "3\n1 2 3\n", "stdout": "3\n2\n1\n"}],
       "time_limit_s": 4.0, "memory_mb": 256}
REVERSE = {
    "c": "#include <stdio.h>\nstatic int v[300000];\nint main(void){int n;if(scanf(\"%d\",&n)!=1)return 1;\n"
         "for(int i=0;i<n;i++)if(scanf(\"%d\",&v[i])!=1)return 1;\n"
         "for(int i=n-1;i>=0;i--)printf(\"%d\\n\",v[i]);return 0;}\n",
    "python": "import sys\nd = sys.stdin.buffer.read().split()\n"
              "sys.stdout.write('\\n'.join(map(bytes.decode, d[:0:-1])) + '\\n')\n",
}


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox=sandbox, reveal_hidden=True)


@pytest.mark.slow
@pytest.mark.parametrize("language", list(REVERSE))
def test_a_right_answer_longer_than_the_default_limit_gets_its_reward(ctx, language):
    outcome, reward = verify_program(ctx, BIG, language, REVERSE[language])
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    # The limit is still there: five copies of the answer are over it.
    flood = REVERSE[language].replace("for(int i=n-1;", "for(int k=0;k<5;k++)for(int i=n-1;").replace(
        "sys.stdout.write(", "sys.stdout.write(5 * (").replace("+ '\\n')", "+ '\\n'))")
    assert flood != REVERSE[language]
    outcome, reward = verify_program(ctx, BIG, language, flood)
    assert (outcome.verdict, reward) == (Verdict.violation, 0.0), outcome.evidence
    assert "output" in outcome.usage["killed_by"], outcome.usage


@pytest.mark.slow
def test_node_output_written_whole_then_exit_arrives_whole(ctx):
    # Node drops what a full pipe had not yet taken when a program calls process.exit().
    task = {"io_cases": [{"stdin": "120000\n", "stdout": "".join(f"{i}\n" for i in range(120_000))}],
            "time_limit_s": 4.0}
    code = ("const n = Number(require('fs').readFileSync(0, 'utf8'));\nconst out = [];\n"
            "for (let i = 0; i < n; i++) out.push(i);\nprocess.stdout.write(out.join('\\n') + '\\n');\n"
            "process.exit(0);\n")
    outcome, reward = verify_program(ctx, task, "javascript", code)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_the_grown_limit_tells_little_of_the_hidden_answers_size():
    # A response finds the limit through its verdict, so it is a power of two, the same for
    # answers of many sizes, and never below the default.
    def limit(answer_bytes: int) -> int:
        return get("code").parse_task({"language": "c", "io_cases": [{"stdin": "", "stdout": "x" * answer_bytes}]}
                                       ).output_limit_bytes
    assert {limit(size) for size in (600_000, 700_000, 1_000_000, 1_048_576)} == {1 << 21}
    assert limit(1_600_000) == 1 << 22 and limit(100) == 1_000_000


def test_a_limit_smaller_than_the_tasks_own_answer_is_refused(client):
    answer = "x" * 5000 + "\n"
    task = {"language": "python", "io_cases": [{"stdin": "", "stdout": answer}], "output_bytes": 2048}
    response = "```python\nprint('x' * 5000)\n```"
    refused = client.post("/v1/verify", json={"verifier": "code", "task": task, "response": response})
    assert refused.status_code == 422, refused.text
    assert "output_bytes" in refused.text and "5001 bytes" in refused.text, refused.text
    # Room for the answer: accepted and rewarded; left unset, the limit makes that room itself.
    for fitting in ({**task, "output_bytes": 8192}, {k: v for k, v in task.items() if k != "output_bytes"}):
        judged = client.post("/v1/verify", json={"verifier": "code", "task": fitting, "response": response})
        assert judged.status_code == 200 and judged.json()["reward"] == 1.0, judged.text
