"""A case's program may rewrite, truncate or lock away every file and directory its uid can reach
in the job (its own directory, the scratch directory, /tmp), but the next case still starts as a
case must: the same limits, the same program, its answer judged. Nothing the runner writes into
the scratch to start a program (the program itself, or anything that sets its limits) may be
taken from an earlier case. Held out: written before the case start was changed again (langs6),
passing on the runner before that change.

The spoiler prints the limits it runs under first, then rewrites every regular file it can open
under /tmp with a shell script, takes every permission away from those files, from its own
directory, the scratch directory and /tmp, and exits cleanly; every case expects the task's
limits, so a case started by a tampered helper, or not started at all, loses the reward. The mover
renames the scratch directory away and leaves a link (or a file) in its place."""

from __future__ import annotations

import pytest

from tests.conftest import assert_correct_on_every_path, verify_program
from verifiers.base import Verdict

pytestmark = [pytest.mark.slow,
              pytest.mark.no_remote("compiled languages are tested on the process and docker backends")]

SPOILER = r'''
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char SCRIPT[] = "#!/bin/sh\necho spoiled\nexit 0\n";

static void spoil(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth < 8) spoil(path, depth + 1);
            chmod(path, 0);
        } else if (S_ISREG(st.st_mode)) {
            int fd = open(path, O_WRONLY | O_TRUNC);
            if (fd >= 0) { if (write(fd, SCRIPT, sizeof SCRIPT - 1) < 0) {} close(fd); }
            chmod(path, 0);
        }
    }
    closedir(d);
}

int main(void) {
    int n = 0;
    if (scanf("%d", &n) != 1) return 2;
    struct rlimit as, cpu, nofile;
    getrlimit(RLIMIT_AS, &as);
    getrlimit(RLIMIT_CPU, &cpu);
    getrlimit(RLIMIT_NOFILE, &nofile);
    printf("case %d as=%lluM/%lluM cpu=%llu/%llu nofile=%llu\n", n, (unsigned long long)as.rlim_cur >> 20,
           (unsigned long long)as.rlim_max >> 20, (unsigned long long)cpu.rlim_cur,
           (unsigned long long)cpu.rlim_max, (unsigned long long)nofile.rlim_cur);
    fflush(stdout);
    char here[4096];
    if (!getcwd(here, sizeof here)) here[0] = 0;
    spoil("/tmp", 0);
    spoil(".", 0);
    chmod(".", 0);
    if (here[0]) chmod(here, 0);
    chmod("/tmp/work", 0);
    chmod("/tmp", 0);
    return 0;
}
'''


MOVER = r'''
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int n = 0;
    if (scanf("%d", &n) != 1) return 2;
    printf("%d\n", n * 5);
    fflush(stdout);
    /* The scratch directory moved away and a link (or a file) left in its place. */
    if (rename("/tmp/work", "/tmp/moved") == 0) {
        if (n % 2) { if (symlink("/tmp/moved", "/tmp/work")) {} }
        else { FILE *f = fopen("/tmp/work", "w"); if (f) fclose(f); }
    }
    return 0;
}
'''


def expected(n: int) -> str:
    # time_limit_s 1.5 -> CPU rlimit ceil(1.5) + 1; memory 96 MB -> address space 96 MiB.
    return f"case {n} as=96M/96M cpu=3/3 nofile=64\n"


def test_a_case_that_spoils_every_file_it_can_reach_leaves_the_next_case_intact(ctx):
    cases = [{"stdin": f"{n}\n", "stdout": expected(n)} for n in (1, 2, 3)]
    task = {"io_cases": cases, "time_limit_s": 1.5, "memory_mb": 96}
    assert_correct_on_every_path(ctx, task, "c", SPOILER)
    honest = '#include <stdio.h>\nint main(void){int n;scanf("%d",&n);printf("%d\\n",3*n);return 0;}\n'
    good, reward = verify_program(ctx, {"io_cases": [{"stdin": "4\n", "stdout": "12\n"}], "time_limit_s": 1.5,
                                        "memory_mb": 96}, "c", honest)
    assert (good.verdict, reward) == (Verdict.correct, 1.0), good.evidence


def test_a_case_that_moves_the_scratch_directory_away_leaves_the_next_case_intact(ctx):
    task = {"io_cases": [{"stdin": f"{n}\n", "stdout": f"{5 * n}\n"} for n in (1, 2, 3, 4)], "time_limit_s": 1.5}
    assert_correct_on_every_path(ctx, task, "c", MOVER)
