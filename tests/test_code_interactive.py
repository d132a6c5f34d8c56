"""Interactive problems: the task's interactor and the candidate in separate sandboxes with
crossed stdin/stdout (`Sandbox.interact`), judged by the interactor's testlib exit code.

Every hostile candidate is followed by an honest one on the same sandbox pools, which must
still get reward 1. Candidates run only inside the sandbox."""

from __future__ import annotations

import json

import pytest

from sandboxes.base import Job, Limits
from sandboxes.remote import RemoteSandbox
from verifiers.base import TaskInvalid, Verdict, VerifyContext
from verifiers.code.interactive import InteractorFailed

pytestmark = pytest.mark.no_remote("the remote backend does not run interactive jobs")

# The secret the candidate must find by asking; it lives only in the interactor's input
# file, and the answer file carries a marker no candidate may ever see.
SECRET = 7321
ANSWER_MARKER = "QZX-answer-file-4410"
# A testlib-style interactor: input.txt holds the secret, answer.txt the marker; the
# candidate asks "? x" (answers <, >, =) at most 40 times and ends with "! x".
INTERACTOR = r'''
import sys
secret = int(open(sys.argv[1]).read())
assert open(sys.argv[3]).read().startswith("QZX-")
def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
for _ in range(40):
    line = sys.stdin.readline()
    if not line:
        sys.exit(8)  # unexpected EOF
    parts = line.split()
    if len(parts) != 2 or parts[0] not in "?!" or not parts[1].lstrip("-").isdigit():
        sys.exit(2)  # presentation error
    guess = int(parts[1])
    if parts[0] == "!":
        sys.exit(0 if guess == secret else 1)
    say("<" if secret < guess else (">" if secret > guess else "="))
sys.exit(1)  # too many queries
'''
HONEST = r'''
lo, hi = 1, 10 ** 6
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    reply = input()
    if reply == "=":
        print("!", mid, flush=True)
        break
    if reply == "<":
        hi = mid - 1
    else:
        lo = mid + 1
'''
TASK = {
    "language": "python",
    "interactor": {"language": "python", "source": INTERACTOR},
    "io_cases": [{"stdin": f"{SECRET}\n", "stdout": f"{ANSWER_MARKER}\n"},
                 {"stdin": "1\n", "stdout": f"{ANSWER_MARKER}\n"}],
    "time_limit_s": 1.0,
    "memory_mb": 256,
    "output_bytes": 65536,
}

HOSTILE = {
    "wrong_final_answer": ('print("! 5", flush=True)', {Verdict.incorrect}),
    "exits_early_with_zero": ("import sys\nsys.exit(0)", {Verdict.incorrect}),
    "garbage_output": ('import sys\nsys.stdout.buffer.write(bytes(range(256)) * 64)\nsys.stdout.flush()',
                       {Verdict.incorrect}),
    "closes_its_pipes_then_exits_zero": ("import os\nos.close(0)\nos.close(1)\nos._exit(0)", {Verdict.incorrect}),
    # Asks once, then never answers (the interactor waits): the idleness limit ends it.
    "stalls_waiting": ('import time\nprint("? 1", flush=True)\ninput()\ntime.sleep(1000)', {Verdict.timeout}),
    # Never flushes, so both sides wait on each other: a judge's "idleness limit".
    "forgets_to_flush": ('import sys\nsys.stdout.write("? 1\\n")\nsys.stdin.readline()', {Verdict.timeout}),
    "busy_loop": ("while True:\n    pass", {Verdict.timeout}),
    "floods_output": ('import sys\nwhile True:\n    sys.stdout.write("? 1\\n" * 4096)', {Verdict.incorrect,
                                                                                       Verdict.violation}),
    # Pretends the interactor accepted: prints testlib's "ok" and exits 0 without solving.
    "fakes_testlib_ok": ('import sys\nsys.stderr.write("ok 1 query\\n")\nprint("ok")\nsys.exit(0)',
                         {Verdict.incorrect}),
    # Looks for the interactor's files (input with the secret, the answer) anywhere it can.
    "hunts_for_interactor_files": (r'''
import os
found = None
for top in ("/tmp", "/proc", "/opt", "/dev/shm", "/run", "/var/tmp", os.getcwd()):
    for root, dirs, files in os.walk(top):
        if root.count("/") > 5:
            dirs[:] = []
        for name in files:
            if name in ("input.txt", "answer.txt"):
                try:
                    found = open(os.path.join(root, name)).read().split()[0]
                except (OSError, IndexError):
                    pass
print("!", found if found and found.isdigit() else 0, flush=True)
''', {Verdict.incorrect}),
    # Signals every process it can name, hoping to kill the interactor mid-game.
    "signals_everything": (r'''
import os, signal
for pid in [-1, *range(1, 4096)]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
print("! 1", flush=True)
''', {Verdict.incorrect}),
}


def _verify(verifier, ctx: VerifyContext, task: dict, code: str):
    parsed = verifier.parse_task(task)
    outcome = verifier.verify(parsed, f"```python\n{code}\n```", ctx)
    return outcome, outcome.reward(parsed)


def _assert_honest_still_rewarded(verifier, ctx: VerifyContext) -> None:
    honest, reward = _verify(verifier, ctx, TASK, HONEST)
    assert (honest.verdict, reward) == (Verdict.correct, 1.0), honest.evidence


def test_honest_candidate_solves_every_case(code_verifier, ctx):
    outcome, reward = _verify(code_verifier, ctx, TASK, HONEST)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    assert outcome.evidence["passed"] == 2


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_candidate_gets_no_reward(code_verifier, ctx, name):
    code, verdicts = HOSTILE[name]
    outcome, reward = _verify(code_verifier, ctx, TASK, code)
    assert reward == 0.0, (name, outcome.evidence)
    assert outcome.verdict in verdicts, (name, outcome.verdict, outcome.evidence)
    text = json.dumps(outcome.evidence)
    assert ANSWER_MARKER not in text and str(SECRET) not in text
    _assert_honest_still_rewarded(code_verifier, ctx)


@pytest.mark.parametrize("exit_code", [0, 1, 2, 8])
def test_interactor_exit_code_decides(code_verifier, ctx, exit_code):
    # Whatever the honest candidate does, the interactor's testlib verdict is the case's.
    interactor = INTERACTOR.replace("sys.exit(0 if guess == secret else 1)", f"sys.exit({exit_code})")
    task = {**TASK, "interactor": {"language": "python", "source": interactor}}
    outcome, reward = _verify(code_verifier, ctx, task, HONEST)
    assert (reward == 1.0) == (exit_code == 0), outcome.evidence
    if exit_code:
        assert outcome.verdict is Verdict.incorrect
        assert outcome.evidence["tests"][0]["type"] == "InteractorVerdict"


FAILURES = {"exit_3": "os._exit(3)", "crash": "os.abort()", "unknown_exit_code": "os._exit(42)",
            "hangs": "time.sleep(1000)"}


@pytest.mark.parametrize(("failure", "candidate"), [
    *((f, c) for f in ("exit_3", "crash", "unknown_exit_code")
      for c in ("honest", "fakes_testlib_ok", "exits_early_with_zero", "signals_everything")),
    pytest.param("hangs", "honest", marks=pytest.mark.slow),
])
def test_interactor_failure_is_never_the_candidates_success(code_verifier, ctx, failure, candidate):
    # Exit 3 (testlib's _fail), a crash, a hang or an unknown exit code is the task's
    # failure: verdict `error` (InteractorFailed), whatever the candidate did, and at
    # whichever exit the interactor takes (each one ends this way here).
    interactor = f"import os, sys, time\ndef _end(code=0):\n    {FAILURES[failure]}\nsys.exit = _end\n" + INTERACTOR
    task = {**TASK, "interactor": {"language": "python", "source": interactor}}
    code = HONEST if candidate == "honest" else HOSTILE[candidate][0]
    with pytest.raises(InteractorFailed) as raised:
        _verify(code_verifier, ctx, task, code)
    assert ANSWER_MARKER not in str(raised.value)


def test_crossed_pipes_primitive(sandbox):
    # The sandbox primitive itself: each side reads what the other writes, line by line,
    # and each side's result is its own (exit code, limits).
    if isinstance(sandbox, RemoteSandbox):
        pytest.skip("the remote backend does not run interactive jobs")
    ping = "import sys\nfor i in range(200):\n    print(i, flush=True)\n    assert int(input()) == i + 1\nsys.exit(5)"
    pong = "import sys\nfor line in sys.stdin:\n    print(int(line) + 1, flush=True)\nsys.exit(6)"
    limits = Limits(wall_s=20, cpu_s=5, memory_mb=256)
    first, second = sandbox.interact(Job(["python3", "a.py"], {"a.py": ping.encode()}, limits=limits),
                                     Job(["python3", "b.py"], {"b.py": pong.encode()}, limits=limits))
    assert (first.exit_code, second.exit_code) == (5, 6), (first.summary(), first.stderr, second.stderr)
    assert first.killed_by is None and second.killed_by is None
    assert first.wall_s < 15  # 200 round trips (not counting a cold worker's start), far from the wall limit


def test_interactive_task_over_http_hides_the_interactor(live_server):
    # Through the service: the interactor (a hidden field, like the cases) decides, and
    # neither its source nor the answer file appears in what the caller gets back.
    task = {**TASK, "interactor": {"language": "python", "source": f"# {ANSWER_MARKER}\n{INTERACTOR}"}}
    with live_server.client() as client:
        for code, reward in ((HOSTILE["hunts_for_interactor_files"][0], 0.0), (HONEST, 1.0)):
            reply = client.post("/v1/verify", json={"verifier": "code", "task": task,
                                                    "response": f"```python\n{code}\n```"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["reward"] == reward, reply.text
            assert ANSWER_MARKER not in reply.text
        bad = client.post("/v1/verify", json={"verifier": "code", "response": "```python\nprint(1)\n```",
                                              "task": {**task, "io_cases": None, "entry_point": "f",
                                                       "tests": "def check(candidate):\n    pass\n"}})
        assert bad.status_code == 422 and "interactor" in bad.text, bad.text


# ---------------------------------------------------------------- every language

# The same game judged by a testlib interactor in C++ (testlib.h compiles unchanged).
TESTLIB_INTERACTOR = r'''
#include "testlib.h"
#include <iostream>
int main(int argc, char *argv[]) {
    registerInteraction(argc, argv);
    long long secret = inf.readLong();
    for (int q = 0; q < 40; q++) {
        std::string kind = ouf.readToken("[?!]");
        long long guess = ouf.readLong();
        if (kind == "!") {
            if (guess == secret) quitf(_ok, "found in %d queries", q);
            quitf(_wa, "wrong answer");
        }
        std::cout << (secret < guess ? "<" : secret > guess ? ">" : "=") << std::endl;
    }
    quitf(_wa, "too many queries");
}
'''
# Binary search over 1..10^6 in every language; `{wrong}` replaces the final answer.
SEARCHERS = {
    "c": r'''#include <stdio.h>
int main(void) { long lo = 1, hi = 1000000; char r[8];
  for (;;) { long mid = (lo + hi) / 2; printf("? %ld\n", mid); fflush(stdout);
    if (scanf("%7s", r) != 1) return 0;
    if (r[0] == '=') { printf("! %ld\n", {wrong}mid); fflush(stdout); return 0; }
    if (r[0] == '<') hi = mid - 1; else lo = mid + 1; } }''',
    "cpp": r'''#include <iostream>
int main() { long long lo = 1, hi = 1000000; std::string r;
  while (true) { long long mid = (lo + hi) / 2; std::cout << "? " << mid << std::endl; std::cin >> r;
    if (r == "=") { std::cout << "! " << {wrong}mid << std::endl; return 0; }
    if (r == "<") hi = mid - 1; else lo = mid + 1; } }''',
    "java": r'''import java.io.*;
public class Main { public static void main(String[] a) throws IOException {
  BufferedReader in = new BufferedReader(new InputStreamReader(System.in)); long lo = 1, hi = 1000000;
  while (true) { long mid = (lo + hi) / 2; System.out.println("? " + mid); System.out.flush();
    String r = in.readLine().trim();
    if (r.equals("=")) { System.out.println("! " + ({wrong}mid)); System.out.flush(); return; }
    if (r.equals("<")) hi = mid - 1; else lo = mid + 1; } } }''',
    "javascript": r'''const rl = require('readline').createInterface({ input: process.stdin });
let lo = 1, hi = 1000000, mid = 0;
const ask = () => { mid = Math.floor((lo + hi) / 2); process.stdout.write(`? ${mid}\n`); };
rl.on('line', (r) => { r = r.trim();
  if (r === '=') { process.stdout.write(`! ${{wrong}mid}\n`); rl.close(); return; }
  if (r === '<') hi = mid - 1; else lo = mid + 1; ask(); });
ask();''',
    "go": r'''package main
import ("bufio"; "fmt"; "os")
func main() { in := bufio.NewReader(os.Stdin); lo, hi := 1, 1000000
  for { mid := (lo + hi) / 2; fmt.Printf("? %d\n", mid); var r string; fmt.Fscan(in, &r)
    if r == "=" { fmt.Printf("! %d\n", {wrong}mid); return }
    if r == "<" { hi = mid - 1 } else { lo = mid + 1 } } }''',
    "rust": r'''use std::io::{self, BufRead, Write};
fn main() { let stdin = io::stdin(); let mut lines = stdin.lock().lines(); let (mut lo, mut hi) = (1i64, 1000000i64);
  loop { let mid = (lo + hi) / 2; println!("? {}", mid); io::stdout().flush().unwrap();
    let r = lines.next().unwrap().unwrap();
    if r.trim() == "=" { println!("! {}", {wrong}mid); return; }
    if r.trim() == "<" { hi = mid - 1 } else { lo = mid + 1 } } }''',
}


@pytest.mark.slow
@pytest.mark.parametrize("language", sorted(SEARCHERS))
def test_every_language_plays_against_a_testlib_interactor(code_verifier, ctx, language):
    task = {**TASK, "language": language, "interactor": {"language": "cpp", "source": TESTLIB_INTERACTOR}}
    wrong, reward = _verify_in(code_verifier, ctx, task, language, SEARCHERS[language].replace("{wrong}", "1 + "))
    assert (wrong.verdict, reward) == (Verdict.incorrect, 0.0), wrong.evidence
    assert wrong.evidence["tests"][0]["verdict"] == "wrong answer", wrong.evidence
    honest, reward = _verify_in(code_verifier, ctx, task, language, SEARCHERS[language].replace("{wrong}", ""))
    assert (honest.verdict, reward) == (Verdict.correct, 1.0), honest.evidence


def _verify_in(verifier, ctx: VerifyContext, task: dict, language: str, code: str):
    parsed = verifier.parse_task(task)
    outcome = verifier.verify(parsed, f"```{language}\n{code}\n```", ctx)
    return outcome, outcome.reward(parsed)


def test_interactor_that_does_not_compile_is_the_tasks_fault(code_verifier, ctx):
    task = {**TASK, "interactor": {"language": "cpp", "source": "int main( {"}}
    with pytest.raises(TaskInvalid, match="interactor"):
        _verify(code_verifier, ctx, task, HONEST)


def test_crossed_pipes_bound_a_flood_and_pass_on_an_early_end(sandbox):
    # One side floods: it is stopped by its own output limit, and the other side reads at
    # most that much, then the end of its input. One side exits at once: the other reads
    # the end of its input and finishes on its own.
    if isinstance(sandbox, RemoteSandbox):
        pytest.skip("the remote backend does not run interactive jobs")
    flood = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    count = "import sys\nprint(len(sys.stdin.buffer.read()), file=sys.stderr)\n"
    limits = Limits(wall_s=20, cpu_s=5, memory_mb=256, output_bytes=200_000)
    flooder, counter = sandbox.interact(Job(["python3", "f.py"], {"f.py": flood.encode()}, limits=limits),
                                        Job(["python3", "c.py"], {"c.py": count.encode()}, limits=limits))
    assert flooder.killed_by == "output" and flooder.stdout_truncated, flooder.summary()
    assert counter.exit_code == 0 and int(counter.stderr) <= limits.output_bytes, (counter.summary(), counter.stderr)
    quitter, reader = sandbox.interact(Job(["true"], limits=limits),
                                       Job(["python3", "c.py"], {"c.py": count.encode()}, limits=limits))
    assert (quitter.exit_code, reader.exit_code, reader.stderr.strip()) == (0, 0, b"0"), reader.summary()
