// Inline assembly, 32-bit `int 0x80` entry this time (a different syscall table).
#include <cstdio>
static long int80(long nr, long a, long b, long c) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}
int main() {
    bool escaped = false;
    // i386: 102 socketcall, 23 setuid, 26 ptrace, 11 execve
    if (int80(23, 0, 0, 0) == 0) { std::puts("ESCAPED:setuid0"); escaped = true; }
    if (int80(26, 16, 1, 0) == 0) { std::puts("ESCAPED:ptrace"); escaped = true; }
    long fd = int80(5 /* open */, (long)"/etc/shadow", 0, 0);
    if (fd >= 0) { std::puts("ESCAPED:shadow"); escaped = true; }
    if (!escaped) std::puts("contained");
}
