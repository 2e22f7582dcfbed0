/* A signal sent to the process while its only thread blocks it stays
 * pending until the thread unblocks it: the handler (traced, calling traced
 * functions) runs then, inside critical(), never while the signal is
 * blocked. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "golden.h"

static volatile sig_atomic_t hits;

TRACED int in_handler(int x) {
    sink++;
    return x * 2;
}

TRACED void on_usr1(int sig) {
    (void)sig;
    hits += in_handler(1);
}

TRACED int critical(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    kill(getpid(), SIGUSR1);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int seen = hits;
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    return seen;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    int seen = critical();
    printf("while blocked %d, after %d\n", seen, (int)hits);
    return 0;
}
