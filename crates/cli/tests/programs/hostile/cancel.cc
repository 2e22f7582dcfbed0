// pthread_cancel through traced C++ frames (issue 16, case 6). Each of six
// threads enters ten traced levels, each holding an object whose
// destructor counts, the innermost also a lock_guard on the thread's own
// mutex, then blocks in a cancellation point (read on a pipe that never
// gets data). The main thread cancels and joins them all: the unwinding
// must run every destructor (60) and release every lock. stdout is the
// same in every run.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <pthread.h>
#include <unistd.h>

static const int THREADS = 6, LEVELS = 10;
static std::atomic<int> destroyed{0}, blocked{0};
static std::mutex locks[THREADS];
static int pipe_fds[2];

struct Guard {
    ~Guard() { destroyed++; }
};

__attribute__((noinline)) void block(int id) {
    std::lock_guard<std::mutex> hold(locks[id]);
    blocked++;
    char c;
    for (;;)
        if (read(pipe_fds[0], &c, 1) < 0)
            break;
}

__attribute__((noinline)) void level(int id, int n) {
    Guard g;
    if (n + 1 < LEVELS)
        level(id, n + 1);
    else
        block(id);
    __asm__ volatile("");
}

static void *thread_main(void *arg) {
    level((int)(long)arg, 0);
    return nullptr;
}

int main() {
    if (pipe(pipe_fds) != 0)
        return 2;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], nullptr, thread_main, (void *)i);
    while (blocked.load() < THREADS)
        usleep(1000);
    int canceled = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_cancel(t[i]);
        void *r;
        pthread_join(t[i], &r);
        canceled += r == PTHREAD_CANCELED;
    }
    int free_locks = 0;
    for (auto &m : locks)
        if (m.try_lock()) {
            free_locks++;
            m.unlock();
        }
    std::printf("canceled %d destroyed %d free locks %d\n", canceled, destroyed.load(), free_locks);
    return 0;
}
