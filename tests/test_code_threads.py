"""C and C++ programs that start threads without a stack size (`std::thread`,
`pthread_create` with no attributes), on every backend of ASSAY_TEST_BACKENDS.

The judge sets the stack limit as large as the memory limit, so that the main thread can
recurse as deep as the memory allows. glibc sizes a default thread's stack from that limit,
and the address-space limit cannot hold a second stack that size: before round 16 such a
thread failed to start and an honest program got 0 (round 15's blind probe). Every C and
C++ program now links a constructor that gives them 8 MiB (verifiers/code/languages.py).
The main thread's deep recursion, a thread given its own large stack, and the memory
limit itself must stay as they were.
"""

from __future__ import annotations

import pytest

from tests.conftest import verify_program as judge
from verifiers.base import Verdict, VerifyContext

pytestmark = pytest.mark.slow

SUM = {"io_cases": [{"stdin": "4\n1 2 3 4\n", "stdout": "10\n"}, {"stdin": "3\n-5 10 7\n", "stdout": "12\n"}],
       "time_limit_s": 3.0, "memory_mb": 256}

# Four threads each sum a quarter of the numbers.
CPP_STD_THREAD = """#include <bits/stdc++.h>
int main() {
    int n; std::cin >> n; std::vector<long long> v(n);
    for (auto &x : v) std::cin >> x;
    std::vector<long long> part(4, 0); std::vector<std::thread> pool;
    for (int t = 0; t < 4; t++) pool.emplace_back([&, t] { for (int i = t; i < n; i += 4) part[t] += v[i]; });
    for (auto &th : pool) th.join();
    std::cout << std::accumulate(part.begin(), part.end(), 0LL) << "\\n";
}
"""
C_PTHREAD_NULL = """#include <pthread.h>
#include <stdio.h>
static long long v[1000], part[4]; static int n;
static void *work(void *arg) { long t = (long)arg; for (int i = (int)t; i < n; i += 4) part[t] += v[i]; return NULL; }
int main(void) {
    if (scanf("%d", &n) != 1) return 1;
    for (int i = 0; i < n; i++) if (scanf("%lld", &v[i]) != 1) return 1;
    pthread_t th[4];
    for (long t = 0; t < 4; t++) if (pthread_create(&th[t], NULL, work, (void *)t) != 0) return 2;
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    printf("%lld\\n", part[0] + part[1] + part[2] + part[3]);
    return 0;
}
"""
# A thread that asks for 64 MiB gets it: it recurses 20 MiB deep, past the default.
C_PTHREAD_OWN_STACK = """#include <pthread.h>
#include <stdio.h>
static int n; static long long v[1000], total;
static long long deep(int depth) { volatile char pad[1024]; pad[0] = (char)depth;
    return depth == 0 ? 0 : deep(depth - 1) + pad[0] - pad[0]; }
static void *work(void *arg) { (void)arg; total = deep(20000); for (int i = 0; i < n; i++) total += v[i]; return NULL; }
int main(void) {
    if (scanf("%d", &n) != 1) return 1;
    for (int i = 0; i < n; i++) if (scanf("%lld", &v[i]) != 1) return 1;
    pthread_attr_t attr; pthread_attr_init(&attr); pthread_attr_setstacksize(&attr, 64u << 20);
    pthread_t th; if (pthread_create(&th, &attr, work, NULL) != 0) return 2;
    pthread_join(th, NULL); printf("%lld\\n", total); return 0;
}
"""
# The main thread still recurses 200 MiB deep within a 256 MiB task.
CPP_DEEP_MAIN = """#include <bits/stdc++.h>
static long long deep(int depth) { volatile char pad[1000]; pad[0] = (char)depth;
    return depth == 0 ? 0 : deep(depth - 1) + pad[0] - pad[0]; }
int main() { int n; std::cin >> n; long long s = 0, x; for (int i = 0; i < n; i++) { std::cin >> x; s += x; }
    std::cout << s + deep(200000) << "\\n"; }
"""


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox=sandbox, reveal_hidden=True)



@pytest.mark.parametrize(("language", "code"), [("cpp", CPP_STD_THREAD), ("c", C_PTHREAD_NULL),
                                                ("c", C_PTHREAD_OWN_STACK), ("cpp", CPP_DEEP_MAIN)],
                         ids=["std_thread", "pthread_null_attr", "pthread_own_stack", "deep_main_recursion"])
def test_threads_and_deep_recursion_get_their_reward(ctx, language, code):
    outcome, reward = judge(ctx, SUM, language, code)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_threads_still_answer_to_the_memory_limit(ctx):
    # 8 threads each filling 64 MiB in a 256 MiB task: over the limit, as without threads. The
    # program answers right only if all of it was granted.
    hog = """#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *fill(void *arg) { (void)arg; char *p = malloc(64u << 20); if (!p) return NULL;
    memset(p, 1, 64u << 20); return p; }
int main(void) { pthread_t th[8]; void *got[8]; int filled = 0, n; long long s = 0, x;
    if (scanf("%d", &n) != 1) return 1;
    for (int i = 0; i < n; i++) { if (scanf("%lld", &x) != 1) return 1; s += x; }
    for (int t = 0; t < 8; t++) if (pthread_create(&th[t], NULL, fill, NULL) != 0) return 3;
    for (int t = 0; t < 8; t++) { pthread_join(th[t], &got[t]); filled += got[t] != NULL; }
    if (filled == 8) printf("%lld\\n", s); return 0; }
"""
    outcome, reward = judge(ctx, SUM, "c", hog)
    assert reward == 0.0 and outcome.verdict in (Verdict.incorrect, Verdict.violation), outcome.evidence
