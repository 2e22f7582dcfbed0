// A signal storm whose handler calls traced code (issue 16, case 1). One
// thread recurses through the traced `rec` while signals arrive: every
// 100 us from an interval timer (`timer`), or as fast as a second thread
// can send them (`kill`). The handler calls the traced leaf `hleaf`.
// stdout is the same in every run; stderr says how many signals were
// handled (the truth the trace's handler calls are compared with).
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "storm.h"


static volatile long handled;
static volatile int done;
static pthread_t main_thread;

__attribute__((noinline)) void on_signal(int sig) {
    (void)sig;
    handled = hleaf(handled);
}

static void *killer(void *arg) {
    (void)arg;
    while (!done)
        pthread_kill(main_thread, SIGUSR1);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "timer";
    long iterations = argc > 2 ? atol(argv[2]) : 20000;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    main_thread = pthread_self();
    pthread_t k;
    if (strcmp(mode, "kill") == 0) {
        pthread_create(&k, NULL, killer, NULL);
    } else {
        struct itimerval it = {{0, 100}, {0, 100}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    // The storm has begun before the recursion does: on a busy machine the
    // killer thread may otherwise not run at all during a short recursion.
    while (!handled)
        sched_yield();
    long total = 0;
    for (long i = 0; i < iterations; i++)
        total += rec(DEPTH);
    done = 1;
    if (strcmp(mode, "kill") == 0) {
        pthread_join(k, NULL);
    } else {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
    printf("total %ld\n", total);
    fprintf(stderr, "handled %ld\n", handled);
    return 0;
}
