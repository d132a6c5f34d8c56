#include <iostream>
#include <string>
int main() {
    std::string line(4096, '7');
    for (;;) std::cout << line << '\n';
}
