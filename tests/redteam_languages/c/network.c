#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
static int try_tcp(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_port = htons(port); inet_pton(AF_INET, ip, &a.sin_addr);
    int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}
int main(void) {
    int escaped = 0;
    const char *ips[] = {"127.0.0.1", "10.0.0.1", "172.17.0.1", "1.1.1.1", "8.8.8.8"};
    int ports[] = {54329, 5432, 8000, 2375, 53, 80, 443};
    for (int i = 0; i < 5; i++) for (int j = 0; j < 7; j++)
        if (try_tcp(ips[i], ports[j])) { printf("ESCAPED:tcp %s:%d\n", ips[i], ports[j]); escaped = 1; }
    const char *socks[] = {"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
                           "/var/run/postgresql/.s.PGSQL.5432", "/tmp/.s.PGSQL.54329", NULL};
    for (int i = 0; socks[i]; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un u; memset(&u, 0, sizeof u); u.sun_family = AF_UNIX;
        strncpy(u.sun_path, socks[i], sizeof u.sun_path - 1);
        if (s >= 0 && connect(s, (struct sockaddr *)&u, sizeof u) == 0) { printf("ESCAPED:unix %s\n", socks[i]); escaped = 1; }
        if (s >= 0) close(s);
    }
    if (!escaped) puts("contained");
    return 0;
}
