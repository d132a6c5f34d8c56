#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *sleeper(void *arg) { (void)arg; for (;;) pause(); return NULL; }
int main(void) {
    int made = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int i = 0; i < 5000; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, sleeper, NULL) != 0) break;
        made++;
    }
    if (made >= 512) printf("ESCAPED:threads=%d\n", made); else printf("contained threads=%d\n", made);
    fflush(stdout);
    _exit(0);
}
