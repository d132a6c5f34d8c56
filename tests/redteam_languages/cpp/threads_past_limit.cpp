#include <atomic>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <thread>
#include <vector>
int main() {
    std::vector<std::thread> pool;
    std::atomic<bool> stop{false};
    try {
        for (int i = 0; i < 4000; ++i)
            pool.emplace_back([&] { while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
    } catch (const std::system_error &) {
    }
    std::printf(pool.size() >= 512 ? "ESCAPED:threads=%zu\n" : "contained threads=%zu\n", pool.size());
    std::fflush(stdout);
    std::_Exit(0);
}
