// A signal handler on an alternate signal stack that lies above the
// thread's own stack (issue 16, case 4): the alternate stack is mapped
// before the thread is made, so the thread's stack is mapped below it.
// The worker recurses through the traced `rec`; the main thread sends it
// signals until it is done; the handler, on the alternate stack, calls the
// traced `hleaf`. stderr says how many signals were handled.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "storm.h"

#define ALT_SIZE (256 * 1024)

static char *alt;
static volatile long handled, off_stack;
static volatile int done, ready;

__attribute__((noinline)) void on_signal(int sig) {
    char here;
    (void)sig;
    if ((uintptr_t)&here < (uintptr_t)alt || (uintptr_t)&here >= (uintptr_t)alt + ALT_SIZE)
        off_stack++;
    handled = hleaf(handled);
}

static void *worker(void *arg) {
    long iterations = *(long *)arg;
    stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE, .ss_flags = 0};
    char here;
    if (sigaltstack(&ss, NULL) != 0 || (uintptr_t)alt < (uintptr_t)&here) {
        fprintf(stderr, "the alternate stack is not above the thread's stack\n");
        exit(3);
    }
    ready = 1;
    long total = 0;
    for (long i = 0; i < iterations; i++)
        total += rec(DEPTH);
    done = 1;
    return (void *)total;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 20000;
    alt = mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt == MAP_FAILED)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w;
    pthread_create(&w, NULL, worker, &iterations);
    while (!ready)
        ;
    while (!done)
        pthread_kill(w, SIGUSR1);
    void *total;
    pthread_join(w, &total);
    printf("total %ld, off the alternate stack %ld\n", (long)total, off_stack);
    fprintf(stderr, "handled %ld\n", handled);
    return 0;
}
