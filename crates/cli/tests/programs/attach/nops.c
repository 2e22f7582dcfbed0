/* A workload whose threads are parked inside runs of one-byte NOPs while
 * `fntrace attach` rewrites them (tests/attach_nops.rs; issue 16, case 2).
 * Built with gcc -fpatchable-function-entry=5: every function starts with
 * five one-byte NOPs, each its own instruction.
 *
 * Two workers call hot() in a loop and check its result. Two parkers call
 * hot() in a loop too; `park` sends each a SIGUSR1 whose handler makes the
 * interrupted context a call of hot() stopped between two of its NOPs
 * (hot+1 .. hot+4, in turn; the call returns to parker_land, which checks
 * its result and loops again), and waits there: released, the thread
 * resumes *inside* the run.
 *
 * Commands on stdin, one line each, one line answered:
 *   park      every parker parked inside the run: `parked`
 *   release   every parker resumed: `released`
 *   report    rounds=R bad=B parks=P value=V
 *   quit      the report, then exit 0
 * It prints `ready PID` first. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define PARKERS 2
#define TWIN __attribute__((noinline, no_instrument_function, patchable_function_entry(0, 0)))

static atomic_long rounds, bad, parks, last;
static atomic_int wanted[PARKERS], parked[PARKERS], released;
static pthread_t parker_threads[PARKERS];
static volatile int sink;

__attribute__((noinline)) int hot(int x) {
    sink = x;
    return x * 5 + 3;
}

TWIN static int twin_hot(int x) { return x * 5 + 3; }

TWIN static void *loop(void *arg);

/* Where a parked call of hot(PARK_ARG) returns: its result in rax. */
#define PARK_ARG 7
void parker_land(void);
__asm__(".text\n"
        "parker_land:\n"
        "  mov %rax, %rdi\n"
        "  and $-16, %rsp\n"
        "  call parker_resume\n"
        "  ud2\n");
TWIN __attribute__((used, noreturn)) void parker_resume(long v) {
    if (v != twin_hot(PARK_ARG))
        atomic_fetch_add(&bad, 1);
    loop(NULL);
    __builtin_unreachable();
}

TWIN static void on_signal(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)info;
    int id = -1;
    for (int i = 0; i < PARKERS; i++)
        if (pthread_equal(pthread_self(), parker_threads[i]))
            id = i;
    /* A signal still pending from the last `park` is not another park. */
    if (id < 0 || !atomic_exchange(&wanted[id], 0))
        return;
    /* The parker's loop keeps nothing: its context becomes a call of
     * hot(PARK_ARG) from parker_land, stopped at hot + 1..4. */
    mcontext_t *m = &((ucontext_t *)ctx)->uc_mcontext;
    uintptr_t sp = ((uintptr_t)m->gregs[REG_RSP] - 256) & ~(uintptr_t)15;
    sp -= 8;
    *(uintptr_t *)sp = (uintptr_t)parker_land;
    m->gregs[REG_RSP] = (greg_t)sp;
    m->gregs[REG_RIP] = (greg_t)((uintptr_t)hot + 1 + atomic_load(&parks) % 4);
    m->gregs[REG_RDI] = PARK_ARG;
    atomic_store(&parked[id], 1);
    while (!atomic_load(&released))
        usleep(200);
    atomic_fetch_add(&parks, 1);
    atomic_store(&parked[id], 0);
}

TWIN static void *loop(void *arg) {
    (void)arg;
    for (long k = 0;; k++) {
        long sum = 0;
        for (int i = 0; i < 1000; i++) {
            int v = hot(i);
            if (v != twin_hot(i))
                atomic_fetch_add(&bad, 1);
            sum += v;
        }
        atomic_store(&last, sum);
        atomic_fetch_add(&rounds, 1);
    }
    return NULL;
}

TWIN static void report(void) {
    printf("rounds=%ld bad=%ld parks=%ld value=%ld\n", atomic_load(&rounds), atomic_load(&bad),
           atomic_load(&parks), atomic_load(&last));
    fflush(stdout);
}

TWIN int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t t;
    for (int i = 0; i < 2; i++)
        pthread_create(&t, NULL, loop, NULL);
    for (int i = 0; i < PARKERS; i++)
        pthread_create(&parker_threads[i], NULL, loop, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "park", 4) == 0) {
            atomic_store(&released, 0);
            for (int i = 0; i < PARKERS; i++)
                atomic_store(&wanted[i], 1);
            for (int i = 0; i < PARKERS; i++) {
                pthread_kill(parker_threads[i], SIGUSR1);
                while (!atomic_load(&parked[i]))
                    usleep(100);
            }
            printf("parked\n");
            fflush(stdout);
        } else if (strncmp(line, "release", 7) == 0) {
            atomic_store(&released, 1);
            for (int i = 0; i < PARKERS; i++)
                while (atomic_load(&parked[i]))
                    usleep(100);
            printf("released\n");
            fflush(stdout);
        } else if (strncmp(line, "report", 6) == 0) {
            report();
        } else if (strncmp(line, "quit", 4) == 0) {
            report();
            return 0;
        }
    }
    return 0;
}
