#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstring>
#include <iostream>
int main() {
    bool escaped = false;
    addrinfo *res = nullptr;
    if (getaddrinfo("example.com", "80", nullptr, &res) == 0) { std::cout << "ESCAPED:dns\n"; escaped = true; freeaddrinfo(res); }
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(53); inet_pton(AF_INET, "8.8.8.8", &a.sin_addr);
    if (u >= 0 && sendto(u, "x", 1, 0, (sockaddr *)&a, sizeof a) == 1) { std::cout << "ESCAPED:udp\n"; escaped = true; }
    for (int port : {54329, 8000, 8080, 6379, 2375}) {
        int s = socket(AF_INET6, SOCK_STREAM, 0);
        sockaddr_in6 b{}; b.sin6_family = AF_INET6; b.sin6_port = htons(port); b.sin6_addr = in6addr_loopback;
        if (s >= 0 && connect(s, (sockaddr *)&b, sizeof b) == 0) { std::cout << "ESCAPED:tcp6 " << port << '\n'; escaped = true; }
        if (s >= 0) close(s);
    }
    if (!escaped) std::cout << "contained\n";
}
