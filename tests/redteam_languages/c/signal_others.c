#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    pid_t me = getpid(), parent = getppid();
    int hits = 0;
    kill(-1, SIGKILL);  /* everything this uid may signal (in a PID namespace: nothing but us) */
    for (pid_t p = 1; p < 70000; p++) {
        if (p == me || p == parent) continue;
        if (kill(p, SIGSTOP) == 0) { hits++; if (hits < 5) printf("ESCAPED:signalled %d\n", p); }
    }
    if (!hits) puts("contained");
    return 0;
}
