// Exponential template instantiation: each level instantiates two of the level below.
template <int N, int M> struct Bomb {
    static constexpr long long value = Bomb<N - 1, M * 2>::value + Bomb<N - 1, M * 2 + 1>::value;
};
template <int M> struct Bomb<0, M> { static constexpr long long value = M; };
int main() { return (int)Bomb<40, 1>::value; }
