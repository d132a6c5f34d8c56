#include <stdio.h>
#include <string.h>
int main(void) {
    static char block[1 << 20];
    memset(block, 'Q', sizeof block);
    for (;;) fwrite(block, 1, sizeof block, stdout);
}
