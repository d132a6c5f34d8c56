#include <stdio.h>
int main(void) {
    long long n;
    if (scanf("%lld", &n) != 1) return 1;
    printf("QZX%lld\n", (n * 31337 + 4242) % 1000003);
    return 0;
}
