// Compile-time evaluation that never ends (within the compiler's own step limit).
constexpr long long spin(long long n) {
    long long x = 0;
    for (long long i = 0; i < n; ++i) x += i % 7;
    return x;
}
constexpr long long value = spin(1LL << 62);
int main() { return (int)value; }
