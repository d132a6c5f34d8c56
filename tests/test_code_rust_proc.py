"""Rust on the process backend: rustc 1.63 finds its installation through /proc/self/exe,
and a process-backend job has an empty /proc. The compile job gives rustc a /proc of its
own that holds one link, `self/exe` -> /usr/bin/rustc (verifiers/code/inside/native.py);
the candidate's program still runs with a /proc of no process. These tests pin down both sides
of that: what the compile can see, and what the program sees when it runs."""

from __future__ import annotations

import os

import pytest

from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

pytestmark = pytest.mark.slow

HONEST = ("use std::io::*;\nfn main() { let mut s = String::new(); stdin().read_to_string(&mut s).unwrap();\n"
          "  let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
          '  println!("{}", v[0] + v[1]); }\n')
SUM = {"io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}], "time_limit_s": 2.0, "memory_mb": 256}


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    if sandbox.name != "process":
        pytest.skip("the empty /proc of a job is the process backend's")
    return VerifyContext(sandbox=sandbox)


def _verify(ctx: VerifyContext, task: dict, code: str):
    verifier = get("code")
    parsed = verifier.parse_task({**task, "language": "rust"})
    outcome = verifier.verify(parsed, f"```rust\n{code}\n```", ctx)
    return outcome, outcome.reward(parsed)


def test_the_program_still_runs_with_a_proc_of_no_process(ctx):
    # At run time the link is gone: no /proc/self/exe, no process in /proc, only `self`
    # holding `fd`, the link to the job's own stream files (inside/streams.py). The task
    # expects exactly that, so a reward of 1 is the proof.
    probe = ('fn main() {\n  let names = |p: &str| std::fs::read_dir(p).map(|d| d.map(|e| e.unwrap().file_name()'
             '.into_string().unwrap()).collect::<Vec<_>>().join(",")).unwrap_or_else(|_| "none".into());\n'
             '  let exe = std::fs::read_link("/proc/self/exe").map(|p| p.display().to_string())'
             '.unwrap_or_else(|_| "none".to_string());\n'
             '  let me = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "none".into());\n'
             '  println!("proc={} self={} exe={} current_exe={}", names("/proc"), names("/proc/self"), exe, me);\n}\n')
    task = {"io_cases": [{"stdin": "", "stdout": "proc=self self=fd exe=none current_exe=none\n"}],
            "time_limit_s": 2.0}
    outcome, reward = _verify(ctx, task, probe)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    honest, reward = _verify(ctx, SUM, HONEST)
    assert (honest.verdict, reward) == (Verdict.correct, 1.0), honest.evidence


def test_the_compile_sees_the_compilers_link_and_nothing_else(ctx):
    # include_bytes! reads at compile time, with the compiler's /proc: the link is the
    # compiler's own (world-readable) binary...
    exe = 'const EXE: &[u8] = include_bytes!("/proc/self/exe");\nfn main() { println!("{}", EXE.len()); }\n'
    task = {"io_cases": [{"stdin": "", "stdout": f"{os.path.getsize('/usr/bin/rustc')}\n"}], "time_limit_s": 2.0}
    outcome, reward = _verify(ctx, task, exe)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    # ...and nothing else of /proc exists there: not its environment, its command line,
    # its descriptors or any other process.
    for path in ("/proc/self/environ", "/proc/self/cmdline", "/proc/self/fd/0", "/proc/1/environ",
                 "/proc/self/exe/../environ", "/proc/mounts"):
        attack = f'const X: &[u8] = include_bytes!("{path}");\nfn main() {{ println!("{{}}", X.len()); }}\n'
        outcome, reward = _verify(ctx, SUM, attack)
        assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0), (path, outcome.evidence)
        assert "couldn't read" in outcome.evidence["compiler_message"], (path, outcome.evidence)
    # The honest answer after all of that still compiles and earns its reward.
    honest, reward = _verify(ctx, SUM, HONEST)
    assert (honest.verdict, reward) == (Verdict.correct, 1.0), honest.evidence


def test_rust_is_not_an_error_on_the_process_backend(ctx):
    # Before, every Rust response here was verdict `error` (toolchain_unavailable).
    wrong, reward = _verify(ctx, SUM, HONEST.replace("v[0] + v[1]", "v[0] - v[1]"))
    assert (wrong.verdict, reward) == (Verdict.incorrect, 0.0), wrong.evidence
    broken, reward = _verify(ctx, SUM, "fn main() { let x: i32 = \"s\"; }\n")
    assert (broken.verdict, reward) == (Verdict.invalid_format, 0.0), broken.evidence
    assert "mismatched types" in broken.evidence["compiler_message"], broken.evidence
    honest, reward = _verify(ctx, SUM, HONEST)
    assert (honest.verdict, reward) == (Verdict.correct, 1.0), honest.evidence
