#include <iostream>
int main() {
    std::ios::sync_with_stdio(false);
    long long n;
    std::cin >> n;
    std::cout << "QZX" << (n * 31337 + 4242) % 1000003 << '\n';
}
