#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    const char *targets[] = {"/opt/assay/pwned", "/opt/assay/verifiers/pwned.py", "/etc/pwned", "/usr/pwned",
                             "/var/tmp/pwned", "/pwned", "/tmp/../pwned", "/root/pwned", "/home/pwned",
                             "/proc/sys/kernel/core_pattern", "/sys/kernel/pwned", NULL};
    int escaped = 0;
    for (int i = 0; targets[i]; i++) {
        int fd = open(targets[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0 && write(fd, "x", 1) == 1) { printf("ESCAPED:%s\n", targets[i]); escaped = 1; }
        if (fd >= 0) close(fd);
    }
    if (!escaped) puts("contained");
    return 0;
}
