"""Each case's program starts with exactly the limits and surroundings a case must have, however the
runner starts it (verifiers/code/inside/cases.py; written before the per-case start was made
cheaper, and passing on the runner before that change): its CPU, address space and stack from the
task, the run job's file size, open files and processes, a process group of its own, default
SIGPIPE, no descriptor but 0-2, and no way to create a POSIX message queue (which no wipe on the
process backend could find again).

The probe prints what it sees; every case expects the task's figures, so only a program started
under every limit earns the reward. A hostile one that leaves System V objects and files for the
next case is followed by that next case finding nothing."""

from __future__ import annotations

import pytest

from tests.conftest import assert_correct_on_every_path, verify_program
from verifiers.base import Verdict

pytestmark = [pytest.mark.slow,
              pytest.mark.no_remote("compiled languages are tested on the process and docker backends")]

PROBE = r'''
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <unistd.h>

static unsigned long long soft(int which) { struct rlimit r; getrlimit(which, &r); return r.rlim_cur; }
static unsigned long long hard(int which) { struct rlimit r; getrlimit(which, &r); return r.rlim_max; }

int main(void) {
    int n = 0;
    if (scanf("%d", &n) != 1) return 2;
    int fds = 0;
    for (int fd = 3; fd < 1024; fd++) if (fcntl(fd, F_GETFD) >= 0) fds++;
    struct sigaction old;
    sigaction(SIGPIPE, 0, &old);
    struct mq_attr attr = {.mq_maxmsg = 1, .mq_msgsize = 16};
    mqd_t q = mq_open("/assay-spawn-probe", O_CREAT | O_RDWR, 0600, &attr);
    int left = shmget(0x5161, 0, 0) >= 0;
    shmget(0x5161, 4096, IPC_CREAT | 0600);  /* for the next case to find, if the wipe missed it */
    printf("case %d as=%lluM/%lluM cpu=%llu/%llu stack=%lluM fsize=%lluM nofile=%llu nproc_limited=%d "
           "own_group=%d sigpipe_default=%d fds=%d mq_created=%d shm_left=%d\n",
           n, soft(RLIMIT_AS) >> 20, hard(RLIMIT_AS) >> 20, soft(RLIMIT_CPU), hard(RLIMIT_CPU),
           soft(RLIMIT_STACK) >> 20, soft(RLIMIT_FSIZE) >> 20, soft(RLIMIT_NOFILE),
           soft(RLIMIT_NPROC) <= 64, getpgrp() == getpid(), old.sa_handler == SIG_DFL, fds,
           q != (mqd_t)-1, left);
    return 0;
}
'''


def expected(n: int) -> str:
    # time_limit_s 1.5 -> CPU rlimit ceil(1.5) + 1; memory 96 MB -> address space and stack 96 MiB.
    return (f"case {n} as=96M/96M cpu=3/3 stack=96M fsize=16M nofile=64 nproc_limited=1 own_group=1 "
            f"sigpipe_default=1 fds=0 mq_created=0 shm_left=0\n")


def test_each_case_starts_under_every_limit_and_alone(ctx):
    cases = [{"stdin": f"{n}\n", "stdout": expected(n)} for n in (1, 2, 3)]
    task = {"io_cases": cases, "time_limit_s": 1.5, "memory_mb": 96}
    assert_correct_on_every_path(ctx, task, "c", PROBE)
    honest = '#include <stdio.h>\nint main(void){int n;scanf("%d",&n);printf("%d\\n",2*n);return 0;}\n'
    good, reward = verify_program(ctx, {"io_cases": [{"stdin": "4\n", "stdout": "8\n"}], "time_limit_s": 1.5,
                                        "memory_mb": 96}, "c", honest)
    assert (good.verdict, reward) == (Verdict.correct, 1.0), good.evidence
