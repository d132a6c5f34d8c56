/* No libc wrappers: the syscall instruction itself, for socket/connect, unshare,
   mount and execve. Whatever works is reported. */
#include <stdio.h>
#include <string.h>
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile ("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                      : "rcx", "r11", "memory");
    return ret;
}
int main(void) {
    int escaped = 0;
    long s = sys6(41 /* socket */, 2, 1, 0, 0, 0, 0);
    unsigned char addr[16] = {2, 0, 0xd4, 0x39 /* 54329 */, 127, 0, 0, 1};
    if (s >= 0 && sys6(42 /* connect */, s, (long)addr, 16, 0, 0, 0) == 0) { puts("ESCAPED:connect"); escaped = 1; }
    if (sys6(272 /* unshare */, 0x40000000 /* CLONE_NEWNET */, 0, 0, 0, 0, 0) == 0) {
        if (sys6(165 /* mount */, (long)"none", (long)"/opt", (long)"tmpfs", 0, 0, 0) == 0) { puts("ESCAPED:mount"); escaped = 1; }
    }
    if (sys6(101 /* ptrace */, 16 /* PTRACE_ATTACH */, 1, 0, 0, 0, 0) == 0) { puts("ESCAPED:ptrace 1"); escaped = 1; }
    if (sys6(105 /* setuid */, 0, 0, 0, 0, 0, 0) == 0 && sys6(102 /* getuid */, 0, 0, 0, 0, 0, 0) == 0) {
        puts("ESCAPED:root"); escaped = 1;
    }
    if (!escaped) puts("contained");
    fflush(stdout);
    char *argv[] = {"/bin/sh", "-c", "cat /etc/shadow 2>/dev/null | head -c 40 | sed 's/^/ESCAPED:shadow /'", 0};
    sys6(59 /* execve */, (long)argv[0], (long)argv, 0, 0, 0, 0);
    return 0;
}
