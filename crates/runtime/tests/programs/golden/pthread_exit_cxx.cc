// C++: pthread_exit from inside nested traced frames whose locals have
// traced destructors: the forced unwinding runs them, and
// -finstrument-functions logs the exit of every frame it unwinds, up to
// the thread's start routine.
#include <pthread.h>

#include <cstdio>

#include "golden.h"

struct Guard {
    int id;
    TRACED explicit Guard(int i) : id(i) { sink++; }
    TRACED ~Guard() { sink += id; }
};

TRACED void deepest(int n) {
    Guard g(n);
    if (n == 0)
        pthread_exit(reinterpret_cast<void *>(42L));
    deepest(n - 1);
    sink++;
}

TRACED void *worker(void *arg) {
    Guard g(100);
    deepest(static_cast<int>(reinterpret_cast<long>(arg)));
    return nullptr;
}

TRACED int after(int x) {
    sink++;
    return x + 1;
}

int main() {
    pthread_t t;
    void *value = nullptr;
    if (pthread_create(&t, nullptr, worker, reinterpret_cast<void *>(2L)) != 0)
        return 1;
    pthread_join(t, &value);
    long v = reinterpret_cast<long>(value);
    int d = after(static_cast<int>(v));
    std::printf("value=%ld d=%d\n", v, d);
    return 0;
}
