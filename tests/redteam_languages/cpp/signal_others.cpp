#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <string>
#include <unistd.h>
int main() {
    int hits = 0;
    // Every pid /proc shows, then a blind sweep: SIGTERM to all but ourselves.
    if (DIR *d = opendir("/proc")) {
        while (dirent *e = readdir(d)) {
            int pid = std::atoi(e->d_name);
            if (pid > 0 && pid != getpid() && pid != getppid() && ::kill(pid, SIGTERM) == 0) ++hits;
        }
        closedir(d);
    }
    for (int pid = 2; pid < 40000; ++pid)
        if (pid != getpid() && pid != getppid() && ::kill(pid, 0) == 0 && ::kill(pid, SIGTERM) == 0) ++hits;
    std::printf(hits ? "ESCAPED:signalled %d\n" : "contained\n", hits);
}
