// C++ exceptions thrown through traced frames while fntrace attaches and
// detaches (tests/attach.rs): the unwinder must find every hijacked return
// address put back. A worker throws from thrower() for every third value
// and catches in catcher(); the main thread answers `report` on stdin with
// `rounds=R bad=B parks=0 value=0` (B: calls whose result was wrong) and
// exits on `quit`.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <unistd.h>

static std::atomic<long> rounds, bad;

__attribute__((noinline)) int thrower(int x) {
    if (x % 3 == 0)
        throw std::runtime_error("third");
    return x;
}
__attribute__((noinline)) int middle(int x) { return thrower(x) + 1; }
__attribute__((noinline)) int catcher(int x) {
    try {
        return middle(x);
    } catch (const std::exception &) {
        return -1;
    }
}

static void work() {
    for (int i = 0;; i++) {
        int r = catcher(i);
        if (r != (i % 3 == 0 ? -1 : i + 1))
            bad++;
        if (i % 1000 == 999) {
            rounds++;
            usleep(200);
        }
    }
}

static void report() {
    std::printf("rounds=%ld bad=%ld parks=0 value=0\n", rounds.load(), bad.load());
    std::fflush(stdout);
}

int main() {
    std::thread(work).detach();
    std::thread(work).detach();
    std::printf("ready %d\n", (int)getpid());
    std::fflush(stdout);
    char line[64];
    while (std::fgets(line, sizeof line, stdin)) {
        if (std::strncmp(line, "report", 6) == 0)
            report();
        if (std::strncmp(line, "quit", 4) == 0) {
            report();
            return 0;
        }
    }
}
