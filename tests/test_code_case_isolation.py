"""The cases of one response run in one sandbox job (verifiers/code/inside/cases.py), each
as a fresh process tree: nothing one case leaves may reach the next, and each case gets
its own limits. Written before the runner was tuned; on each backend of the run.

The probe looks for what an earlier case could have left (files in the scratch directory,
in /tmp and /dev/shm, a nested directory it made unremovable, System V shared memory,
message queues and semaphores, a POSIX message queue, a process that left its group and
ignores signals and keeps writing files), and tries to attach to its runner (which holds
the other cases' inputs) with ptrace or read its memory; it prints `fresh` when it finds
nothing and gets nowhere, then leaves all of it behind. It checks on the way that it can
see each trace it left (a self-test: a blind probe would prove nothing). Every case
expects `fresh`: only an isolated run earns the reward."""

from __future__ import annotations

import pytest

from tests.conftest import verify_program
from verifiers.base import Verdict

pytestmark = [pytest.mark.slow,
              pytest.mark.no_remote("compiled languages are tested on the process and docker backends")]

PROBE = r'''
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/ptrace.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *FILES[] = {"trace", "/tmp/trace", "/dev/shm/trace", "deep/er/trace", "/tmp/work/trace",
                              "/tmp/work/alive", "/tmp/alive"};
static char seen[512];

static void note(const char *what) { strcat(seen, " "); strcat(seen, what); }

static int traces(void) {
    seen[0] = 0;
    for (unsigned i = 0; i < sizeof FILES / sizeof *FILES; i++)
        if (access(FILES[i], F_OK) == 0) note(FILES[i]);
    if (shmget(0x5151, 0, 0) >= 0) note("shm");
    if (msgget(0x5152, 0) >= 0) note("msg");
    if (semget(0x5153, 0, 0) >= 0) note("sem");
    mqd_t q = mq_open("/assay-trace", O_RDONLY);
    if (q != (mqd_t)-1) { note("mq"); mq_close(q); }
    return seen[0] != 0;
}

static void touch(const char *path) { int fd = open(path, O_WRONLY | O_CREAT, 0600); if (fd >= 0) close(fd); }

int main(void) {
    long n = 0;
    if (scanf("%ld", &n) != 1) return 2;
    usleep(100000);  /* time for a leftover process to write its files again */
    int earlier = traces();
    char before[512];
    strcpy(before, seen);
    /* The runner (its parent) holds the other cases' inputs: out of reach? */
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)getppid());
    if (ptrace(PTRACE_ATTACH, getppid(), 0, 0) == 0) { printf("attached to the runner\n"); return 0; }
    if (open(mem, O_RDONLY) >= 0) { printf("opened the runner's memory\n"); return 0; }
    /* Leave everything behind. */
    touch("trace"); touch("/tmp/trace"); touch("/dev/shm/trace"); touch("/tmp/work/trace");
    mkdir("deep", 0700); mkdir("deep/er", 0700); touch("deep/er/trace"); chmod("deep/er", 0); chmod("deep", 0500);
    shmget(0x5151, 4096, IPC_CREAT | 0600);
    msgget(0x5152, IPC_CREAT | 0600);
    semget(0x5153, 1, IPC_CREAT | 0600);
    struct mq_attr attr = {.mq_maxmsg = 1, .mq_msgsize = 16};
    mq_open("/assay-trace", O_CREAT | O_RDWR, 0600, &attr);
    pid_t child = fork();
    if (child == 0) {
        setsid();
        for (int s = 1; s < 32; s++) signal(s, SIG_IGN);
        for (;;) { touch("/tmp/work/alive"); touch("/tmp/alive"); usleep(5000); }
    }
    /* Until the child has written its files (at most 2 s: a loaded machine may not run it at once). */
    for (int i = 0; i < 400 && (access("/tmp/alive", F_OK) != 0 || access("/tmp/work/alive", F_OK) != 0); i++)
        usleep(5000);
    /* Self-test: each kind of trace just left must be visible to this probe. */
    chmod("deep", 0700); chmod("deep/er", 0700);
    traces();
    chmod("deep/er", 0); chmod("deep", 0500);
    const char *kinds[] = {"trace", "/tmp/trace", "deep/er/trace", "/tmp/work/trace", "shm", "msg", "sem",
                           "/tmp/alive"};
    for (unsigned i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strstr(seen, kinds[i])) { printf("blind to %s (saw%s)\n", kinds[i], seen); return 0; }
    if (earlier) printf("left by an earlier case:%s\n", before); else printf("fresh %ld\n", n * 2);
    return 0;
}
'''
CASES = [{"stdin": f"{n}\n", "stdout": f"fresh {2 * n}\n"} for n in (1, 2, 3, 4)]


def test_nothing_one_case_leaves_reaches_the_next(ctx):
    task = {"io_cases": CASES, "visible_io_cases": [CASES[0]], "time_limit_s": 2.0, "memory_mb": 256}
    outcome, reward = verify_program(ctx, task, "c", PROBE)
    # Five runs (the visible case, then four hidden), each one `fresh`.
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence["tests"]
    assert [t["status"] for t in outcome.evidence["tests"]] == ["pass"] * 5, outcome.evidence


def test_each_case_has_its_own_limits(ctx):
    # Partial credit: every case runs. The second spins past its CPU limit: that case's
    # failure alone; the ones after it get their full limits and pass. The fifth floods
    # its output, a violation, which ends the run (as it always did).
    program = ('#include <stdio.h>\nint main(void){long n;if(scanf("%ld",&n)!=1)return 1;\n'
               'if(n==2){volatile unsigned long x=0;for(;;)x++;}\n'
               'if(n==5){for(;;)fputs("flood flood flood flood flood flood flood\\n",stdout);}\n'
               'printf("%ld\\n",n*2);return 0;}\n')
    cases = [{"stdin": f"{n}\n", "stdout": f"{2 * n}\n"} for n in (1, 2, 3, 4, 5)]
    task = {"io_cases": cases, "time_limit_s": 1.0, "memory_mb": 128, "output_bytes": 65536,
            "partial_credit": True}
    outcome, reward = verify_program(ctx, task, "c", program)
    statuses = [(t["status"], t.get("killed_by")) for t in outcome.evidence["tests"]]
    # (A loaded machine may reach the wall clock before the CPU limit: both are `timeout`.)
    assert statuses[1] in (("timeout", "cpu"), ("timeout", "timeout")), outcome.evidence
    assert statuses[:1] + statuses[2:] == [("pass", None), ("pass", None), ("pass", None), ("error", "output")], \
        outcome.evidence
    assert outcome.evidence["hidden_passed"] == 3
    # Without partial credit the first failure ends the run: the cases after it never run.
    strict, reward = verify_program(ctx, {**task, "partial_credit": False}, "c", program)
    assert (strict.verdict, reward) == (Verdict.timeout, 0.0), strict.evidence
    assert len(strict.evidence["tests"]) == 2, strict.evidence
    honest = program.replace("if(n==2)", "if(0)").replace("if(n==5)", "if(0)")
    good, reward = verify_program(ctx, task, "c", honest)
    assert (good.verdict, reward) == (Verdict.correct, 1.0), good.evidence


def test_a_wrong_answer_is_judged_in_order(ctx):
    # The runner cannot know a wrong answer (it never holds the expected output): it runs
    # on, and the host judges the cases in order and stops at the first that fails.
    cases = [{"stdin": f"{n}\n", "stdout": f"{2 * n}\n"} for n in (1, 2, 3)]
    wrong = '#include <stdio.h>\nint main(void){long n;scanf("%ld",&n);printf("%ld\\n",n==2?0:2*n);return 0;}\n'
    outcome, reward = verify_program(ctx, {"io_cases": cases, "time_limit_s": 1.0}, "c", wrong)
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0), outcome.evidence
    assert [t["status"] for t in outcome.evidence["tests"]] == ["pass", "fail"], outcome.evidence
    right = wrong.replace("n==2?0:2*n", "2*n")
    outcome, reward = verify_program(ctx, {"io_cases": cases, "time_limit_s": 1.0}, "c", right)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
