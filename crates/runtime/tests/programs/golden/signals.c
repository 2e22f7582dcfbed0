/* Signals: handlers that call traced functions, the signals raised from
 * inside traced frames (raise, kill of itself), and one handler that leaves
 * with siglongjmp. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "golden.h"

static volatile sig_atomic_t hits;
static sigjmp_buf jb;

TRACED int in_handler(int x) {
    sink++;
    return x * 2;
}

TRACED void on_usr1(int sig) {
    (void)sig;
    hits += in_handler(1);
}

TRACED void on_alrm(int sig) {
    (void)sig;
    hits += in_handler(3);
    siglongjmp(jb, 1);
}

TRACED int raiser(int n) {
    sink++;
    if (n == 0) {
        raise(SIGUSR1);
        return in_handler(100);
    }
    return raiser(n - 1) + 1;
}

TRACED int killer(int n) {
    sink++;
    if (n == 0) {
        kill(getpid(), SIGUSR1);
        return 5;
    }
    return killer(n - 1) * 2;
}

TRACED int jumper(int n) {
    sink++;
    if (n == 0) {
        raise(SIGALRM);
        return -1;
    }
    return jumper(n - 1) + 1;
}

static void install(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

int main(void) {
    install(SIGUSR1, on_usr1);
    install(SIGALRM, on_alrm);
    int r = raiser(3);
    r += killer(2);
    if (sigsetjmp(jb, 1) == 0)
        r += jumper(2);
    else
        r += in_handler(5);
    r += raiser(1);
    printf("hits=%d r=%d\n", (int)hits, r);
    return 0;
}
