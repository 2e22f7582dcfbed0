/* The host must not notice the tracer: errno survives a callback that
 * changes it, a callback that calls a traced function is not re-entered,
 * functions called from a signal handler are traced (unless the signal
 * interrupted a callback: then the call is counted in stats.recursions, as
 * the kernel's recursion protection drops it), and the exit status is the
 * program's own (7). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "fntrace.h"

#define NOINLINE __attribute__((noinline, noipa))

static atomic_ulong seen_helper, seen_in_signal, seen_busy, handled, depth_max;
static __thread int depth;

NOINLINE int helper(int x) { return x + 1; }
NOINLINE int in_signal(int x) { return x * 2; }
NOINLINE int busy(int x) { return x ^ 0x55; }

static void callback(uintptr_t ip, uintptr_t parent, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)parent, (void)ops, (void)regs;
    char name[32];
    if (fntrace_lookup(ip, name, sizeof name) != 0)
        return;
    depth++;
    if ((unsigned long)depth > atomic_load(&depth_max))
        atomic_store(&depth_max, depth);
    if (strcmp(name, "helper") == 0)
        atomic_fetch_add(&seen_helper, 1);
    else if (strcmp(name, "in_signal") == 0)
        atomic_fetch_add(&seen_in_signal, 1);
    else if (strcmp(name, "busy") == 0)
        atomic_fetch_add(&seen_busy, 1);
    close(-1);        /* sets errno to EBADF */
    (void)helper(1);  /* traced: must not re-enter this callback */
    depth--;
}

static void on_alarm(int sig) {
    (void)sig;
    if (in_signal(3) == 6)
        atomic_fetch_add(&handled, 1);
}

int main(void) {
    fntrace_ops *ops = fntrace_ops_new(callback, NULL, NULL, 0);
    if (!ops || fntrace_ops_set_filter(ops, "helper in_signal busy", NULL) || fntrace_ops_register(ops)) {
        fprintf(stderr, "host: %s\n", fntrace_last_error());
        return 2;
    }
    signal(SIGALRM, on_alarm);
    struct itimerval t = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &t, NULL);
    unsigned long errno_kept = 0, calls = 0;
    long s = 0;
    while (atomic_load(&handled) < 50) {
        errno = 1234;
        s += busy((int)calls);
        errno_kept += errno == 1234;
        calls++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    s += helper(5);
    struct fntrace_stats st;
    fntrace_get_stats(&st);
    printf("recursions=%lu ", (unsigned long)st.recursions);
    printf("calls=%lu errno_kept=%lu busy=%lu helper=%lu in_signal=%lu handled=%lu depth_max=%lu sum=%ld\n",
           calls, errno_kept, atomic_load(&seen_busy), atomic_load(&seen_helper), atomic_load(&seen_in_signal),
           atomic_load(&handled), atomic_load(&depth_max), s);
    return 7;
}
