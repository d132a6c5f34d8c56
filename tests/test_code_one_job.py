"""A new source is compiled and its cases run in ONE sandbox job (verifiers/code/inside/build.py),
yet each step keeps the limits it had as a job of its own: the compiler the compile's, each
case the run job's (processes, file size, open files, and on the process backend a 64 MB
scratch), though the job's own limits are the wider of the two. Written after the change;
each probe was checked against the runner with the per-case limits and the scratch shrink
left out, where all four failed.

The probe prints what the limits let it do; every case expects what a run job allowed, so
only a run under the run job's limits earns the reward."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import verify_program
from verifiers.base import Verdict
from verifiers.code import native

pytestmark = [pytest.mark.slow,
              pytest.mark.no_remote("compiled languages are tested on the process and docker backends")]

PROBE = r'''
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char block[1 << 20];

/* Bytes written to `path` before the first failure, up to `mb` MiB. */
static long fill(const char *path, int mb) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 0;
    long done = 0;
    for (int i = 0; i < mb; i++) {
        ssize_t n = write(fd, block, sizeof block);
        if (n != (ssize_t)sizeof block) break;
        done += n;
    }
    close(fd);
    return done;
}

int main(void) {
    int what = 0;
    if (scanf("%d", &what) != 1) return 2;
    signal(SIGXFSZ, SIG_IGN);
    memset(block, 'x', sizeof block);
    if (what == 1) {  /* processes: a run job allowed the language's 16 (+ the sandbox's headroom) */
        pid_t kids[80];
        int made = 0;
        for (int i = 0; i < 80; i++) {
            pid_t pid = fork();
            if (pid == 0) { pause(); _exit(0); }
            if (pid < 0) break;
            kids[made++] = pid;
        }
        for (int i = 0; i < made; i++) kill(kids[i], SIGKILL);
        for (int i = 0; i < made; i++) waitpid(kids[i], 0, 0);
        printf(made < 40 ? "processes limited\n" : "processes %d\n", made);
    } else if (what == 2) {  /* file size: 16 MB in a run job (64 in a compile) */
        long done = fill("big", 32);
        printf(done < (20L << 20) ? "file size limited\n" : "file of %ld bytes\n", done);
    } else if (what == 3) {  /* open files: 64 in a run job (256 in a compile) */
        int opened = 0;
        while (opened < 200 && dup(1) >= 0) opened++;
        printf(opened < 100 ? "open files limited\n" : "%d files open\n", opened);
    } else {  /* scratch: 64 MB in a run job (256 in a compile), process backend */
        long total = 0;
        char name[32];
        for (int i = 0; i < 6; i++) {
            snprintf(name, sizeof name, "part%d", i);
            total += fill(name, 15);
        }
        printf(total < (70L << 20) ? "scratch limited\n" : "scratch took %ld bytes\n", total);
    }
    return 0;
}
'''


def test_each_case_keeps_the_run_jobs_limits(ctx):
    expected = ["processes limited", "file size limited", "open files limited"]
    if ctx.sandbox.name == "process":  # a container's scratch is the container's (docs/security.md)
        expected.append("scratch limited")
    cases = [{"stdin": f"{n}\n", "stdout": f"{line}\n"} for n, line in enumerate(expected, start=1)]
    task = {"io_cases": cases, "time_limit_s": 5.0, "memory_mb": 256, "partial_credit": True}
    source = PROBE.replace("int main(void)", f"/* {ctx.sandbox.name} */\nint main(void)")
    outcome, reward = verify_program(ctx, task, "c", source)
    assert not outcome.evidence["compile"]["compile_cached"], outcome.evidence
    got = [(t["status"], t.get("detail")) for t in outcome.evidence["tests"]]
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), got


def test_the_compiler_keeps_the_compile_limits(ctx):
    # A task of 64 MB and half a second: g++ with <bits/stdc++.h> needs far more address
    # space than that and about a second of CPU; it compiles under the compile's limits,
    # then the program runs under the task's.
    source = ('#include <bits/stdc++.h>\n// one job, compile limits\n'
              'int main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n')
    task = {"io_cases": [{"stdin": "2 3\n", "stdout": "5\n"}], "time_limit_s": 0.5, "memory_mb": 64}
    outcome, reward = verify_program(ctx, task, "cpp", source)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    assert outcome.evidence["compile"]["compile_cpu_s"] > 0.0, outcome.evidence
    # A compile error in the same one job: the format's failure, with the compiler's message.
    broken, reward = verify_program(ctx, task, "cpp", source.replace("a+b", "a+"))
    assert (broken.verdict, reward) == (Verdict.invalid_format, 0.0), broken.evidence
    assert "expected primary-expression" in broken.evidence["compiler_message"], broken.evidence


def test_identical_sources_compile_once_when_they_wait_and_at_most_twice_one_after_another(ctx):
    task = {"io_cases": [{"stdin": "4\n", "stdout": "8\n"}], "time_limit_s": 2.0}
    base = '#include <stdio.h>\nint main(void){int n;scanf("%d",&n);printf("%d\\n",2*n);return 0;}\n'
    # Four at once: one compiles (in its one job) and hands its program to the three waiting.
    source = f"// at once, {ctx.sandbox.name}\n{base}"
    before = native.CACHE.compiles
    results: list = [None] * 4

    def one(i: int) -> None:
        results[i] = verify_program(ctx, task, "c", source)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all((o.verdict, r) == (Verdict.correct, 1.0) for o, r in results), [o.evidence for o, _ in results]
    fresh = [o for o, _ in results if not o.evidence["compile"]["compile_cached"]]
    assert len(fresh) == 1 and native.CACHE.compiles - before == 1, [o.evidence["compile"] for o, _ in results]
    # One after another: the first's program stayed in its sandbox; the second compiles
    # again and brings it back; the third finds it.
    source = f"// one after another, {ctx.sandbox.name}\n{base}"
    cached = [verify_program(ctx, task, "c", source)[0].evidence["compile"]["compile_cached"] for _ in range(3)]
    assert cached == [False, False, True], cached
