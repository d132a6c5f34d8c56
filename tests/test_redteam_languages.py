"""Red-team battery per language (C, C++, Java, JavaScript, Go, Rust) on every backend.

The samples in tests/redteam_languages/<language>/ were written before the languages
feature existed and are not tuned to it. Each attacks the sandbox from inside a response:
fork bombs, threads past the limit, hunting /proc and the file system for the hidden
answer or the checker, writing outside the scratch directory, network, signalling other
processes, huge output, raw syscalls (inline assembly, `unsafe`, JNI and Runtime.exec,
child_process, syscall.RawSyscall), and compile-time attacks (`#include "/etc/shadow"`,
`#include </dev/random>`, template and macro bombs, `include_bytes!`, `#[path]`, cgo).

A probe prints `ESCAPED:<what>` for each wall it got through (else `contained`), or the
hidden answer if it found it. The task's visible case has the hidden case's input, so a
found answer would pass both and earn reward; a visible case's checker message shows what
the probe printed. Every sample must get reward 0 with a verdict that is not `error`, must
leave no `ESCAPED` and no host secret in what the caller sees, and an honest answer in the
same language, verified right after on the same sandbox pools, must still get reward 1.
Samples only ever run inside the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifiers.base import Verdict, VerifyContext

pytestmark = [pytest.mark.slow, pytest.mark.no_remote("the languages' battery runs on the process and docker backends")]

SAMPLES = Path(__file__).resolve().parent / "redteam_languages"
EXTENSIONS = {"c": "c", "cpp": "cpp", "java": "java", "javascript": "js", "go": "go", "rust": "rs"}
HIDDEN_N = 987654
ANSWER = f"QZX{(HIDDEN_N * 31337 + 4242) % 1000003}"
# The checker: its source carries a marker no candidate may read; for a wrong output its
# message quotes what the candidate printed (shown for the visible case only).
CHECKER = r'''
# QZXCHECKER: the checker's source is out of the candidate's reach.
import sys
out, ans = open(sys.argv[2]).read(), open(sys.argv[3]).read()
if out.split() == ans.split():
    sys.exit(0)
sys.stderr.write("got " + " ".join(out.split())[:250])
sys.exit(1)
'''
TASK = {
    "io_cases": [{"stdin": f"{HIDDEN_N}\n", "stdout": f"{ANSWER}\n"}],
    "visible_io_cases": [{"stdin": f"{HIDDEN_N}\n", "stdout": f"{ANSWER}\n"}],
    "checker": {"language": "python", "source": CHECKER},
    "time_limit_s": 1.0,
    "memory_mb": 256,
    "output_bytes": 65536,
}
# What must never reach the caller: probes that got through, the checker's source, and
# secrets of the machine (a shadow hash, the service's settings, a database address).
FORBIDDEN = ("ESCAPED", "QZXCHECKER", "root:$", "root:*", "root:!", "ASSAY_", "postgresql://", "PGPASSWORD")
# Expected verdict of a sample (every one gets reward 0). A run-time attack must compile
# and run (else the sample tests nothing); a compile-time attack must fail its compile.
RUN_TIME = {Verdict.incorrect, Verdict.timeout, Verdict.violation}
COMPILE_TIME = {Verdict.invalid_format}
EXPECTED = {
    ("c", "include_shadow"): COMPILE_TIME,
    ("c", "include_random"): COMPILE_TIME,
    ("c", "preprocessor_bomb"): COMPILE_TIME,
    ("cpp", "include_shadow"): COMPILE_TIME,
    # Where the compile job sees /proc (docker), g++ reads procfs files as empty (they
    # report size 0): the program compiles, prints nothing and fails. No /proc: no file.
    ("cpp", "include_proc_environ"): COMPILE_TIME | {Verdict.incorrect},
    ("cpp", "template_bomb"): COMPILE_TIME,
    ("cpp", "constexpr_loop"): COMPILE_TIME,
    ("go", "cgo_include_shadow"): COMPILE_TIME,
    ("go", "huge_array"): COMPILE_TIME,
    ("java", "finally_bomb"): COMPILE_TIME,
    ("rust", "include_shadow"): COMPILE_TIME,
    ("rust", "path_attribute"): COMPILE_TIME,
    ("rust", "macro_bomb"): COMPILE_TIME,
    # Process backend: the compile's /proc holds only self/exe (no file to include);
    # docker: PID 1 is the worker, which the job's uid cannot read.
    ("rust", "proc_at_compile_time"): COMPILE_TIME,
}


def _samples() -> list[tuple[str, str]]:
    found = []
    for language, ext in EXTENSIONS.items():
        for path in sorted((SAMPLES / language).glob(f"*.{ext}")):
            if path.stem != "honest":
                found.append((language, path.stem))
    return found


def _source(language: str, name: str) -> str:
    return (SAMPLES / language / f"{name}.{EXTENSIONS[language]}").read_text()


def _verify(verifier, ctx: VerifyContext, language: str, code: str):
    parsed = verifier.parse_task({**TASK, "language": language})
    outcome = verifier.verify(parsed, f"```{language}\n{code}\n```", ctx)
    return outcome, outcome.reward(parsed)


def test_every_language_has_samples_of_every_kind():
    # The battery's coverage, checked so that a deleted sample cannot pass unnoticed.
    kinds = ("fork_bomb", "threads_past_limit", "snoop_files", "write_outside", "network", "signal_others",
             "huge_output")
    for language in EXTENSIONS:
        names = {name for lang, name in _samples() if lang == language}
        assert set(kinds) <= names, (language, set(kinds) - names)
        assert len(names) >= len(kinds) + 2, (language, names)  # an escape hatch and a compile-time attack


@pytest.mark.parametrize(("language", "name"), _samples())
def test_language_exploit_gets_no_reward(code_verifier, ctx, language, name):
    outcome, reward = _verify(code_verifier, ctx, language, _source(language, name))
    shown = json.dumps({"evidence": outcome.evidence, "flags": outcome.flags})
    assert reward == 0.0, (language, name, outcome.evidence)
    assert outcome.verdict in EXPECTED.get((language, name), RUN_TIME), (language, name, outcome.verdict, shown)
    for word in FORBIDDEN:
        assert word not in shown, (language, name, word, shown)
    honest, honest_reward = _verify(code_verifier, ctx, language, _source(language, "honest"))
    assert (honest.verdict, honest_reward) == (Verdict.correct, 1.0), honest.evidence


@pytest.mark.parametrize("language", sorted(EXTENSIONS))
def test_probes_are_not_vacuous(code_verifier, ctx, language):
    # Positive control: a program that prints ESCAPED is seen as such in the visible
    # case's checker message, and one that prints the answer earns the reward.
    honest = _source(language, "honest")
    fake = honest.replace('"QZX"', '"ESCAPED:control QZX"').replace("'QZX'", "'ESCAPED:control QZX'").replace(
        '"QZX{}"', '"ESCAPED:control QZX{}"').replace('"QZX%lld\\n"', '"ESCAPED:control QZX%lld\\n"').replace(
        '"QZX%d\\n"', '"ESCAPED:control QZX%d\\n"')
    assert fake != honest, language
    outcome, reward = _verify(code_verifier, ctx, language, fake)
    assert reward == 0.0 and "ESCAPED:control" in json.dumps(outcome.evidence), outcome.evidence
